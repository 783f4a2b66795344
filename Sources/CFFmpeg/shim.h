#ifndef CFFMPEG_SHIM_H
#define CFFMPEG_SHIM_H
// FFmpeg's libraries as Swift sees them, plus what Swift cannot import: function-like
// macros (AVERROR) and constants built from them.
#include <libavcodec/avcodec.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

static inline int cffmpeg_averror(int e) { return AVERROR(e); }
static inline int cffmpeg_eagain(void) { return AVERROR(EAGAIN); }
static inline int cffmpeg_eof(void) { return AVERROR_EOF; }
#endif
