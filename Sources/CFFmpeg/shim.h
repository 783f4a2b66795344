#ifndef CFFMPEG_SHIM_H
#define CFFMPEG_SHIM_H
// FFmpeg's libraries as Swift sees them, plus what Swift cannot import: function-like
// macros (AVERROR) and constants built from them.
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/md5.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <libavutil/parseutils.h>
#include <libswscale/swscale.h>

static inline int cffmpeg_averror(int e) { return AVERROR(e); }
static inline int cffmpeg_eagain(void) { return AVERROR(EAGAIN); }
static inline int cffmpeg_eof(void) { return AVERROR_EOF; }
static inline int cffmpeg_stream_not_found(void) { return AVERROR_STREAM_NOT_FOUND; }
static inline int cffmpeg_decoder_not_found(void) { return AVERROR_DECODER_NOT_FOUND; }
static inline int64_t cffmpeg_nopts(void) { return AV_NOPTS_VALUE; }
#endif
