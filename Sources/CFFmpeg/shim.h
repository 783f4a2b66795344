#ifndef CFFMPEG_SHIM_H
#define CFFMPEG_SHIM_H
// FFmpeg's libraries as Swift sees them, plus what Swift cannot import: function-like
// macros (AVERROR) and constants built from them.
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavdevice/avdevice.h>
#include <libavutil/md5.h>
#include <libavutil/imgutils.h>
#include <libavutil/pixdesc.h>
#include <libavutil/parseutils.h>
#include <libswscale/swscale.h>
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersrc.h>
#include <libavfilter/buffersink.h>
#include <libavutil/hwcontext.h>

/// A hardware frame's software format (its hw_frames_ctx's sw_format), AV_PIX_FMT_NONE for a software frame.
static inline int cffmpeg_frame_sw_format(const AVFrame *f) {
    if (!f->hw_frames_ctx) return AV_PIX_FMT_NONE;
    return ((const AVHWFramesContext *)(const void *)f->hw_frames_ctx->data)->sw_format;
}
/// The decoder's get_format for --hwaccel cuda: CUDA frames (NVDEC) when the codec offers
/// them, else the first software format (ffmpeg's fallback to software decoding).
static inline enum AVPixelFormat cffmpeg_get_cuda_format(AVCodecContext *c, const enum AVPixelFormat *formats) {
    (void)c;
    for (const enum AVPixelFormat *p = formats; *p != AV_PIX_FMT_NONE; p++)
        if (*p == AV_PIX_FMT_CUDA) return *p;
    for (const enum AVPixelFormat *p = formats; *p != AV_PIX_FMT_NONE; p++) {
        const AVPixFmtDescriptor *d = av_pix_fmt_desc_get(*p);
        if (d && !(d->flags & AV_PIX_FMT_FLAG_HWACCEL)) return *p;
    }
    return AV_PIX_FMT_NONE;
}
static inline void cffmpeg_use_cuda_format(AVCodecContext *c) { c->get_format = cffmpeg_get_cuda_format; }

static inline int cffmpeg_averror(int e) { return AVERROR(e); }
static inline int cffmpeg_eagain(void) { return AVERROR(EAGAIN); }
static inline int cffmpeg_eof(void) { return AVERROR_EOF; }
static inline int cffmpeg_stream_not_found(void) { return AVERROR_STREAM_NOT_FOUND; }
static inline int cffmpeg_decoder_not_found(void) { return AVERROR_DECODER_NOT_FOUND; }
static inline int64_t cffmpeg_nopts(void) { return AV_NOPTS_VALUE; }
/// Whether an input format is a device (libavdevice's: x11grab, v4l2, lavfi, ...): its
/// class's category is one of the device categories, as ffmpeg -devices lists them.
static inline int cffmpeg_is_device(const AVInputFormat *f) {
    if (!f || !f->priv_class) return 0;
    AVClassCategory c = f->priv_class->category;
    return c == AV_CLASS_CATEGORY_DEVICE_VIDEO_INPUT || c == AV_CLASS_CATEGORY_DEVICE_AUDIO_INPUT
        || c == AV_CLASS_CATEGORY_DEVICE_INPUT;
}
/// A video frame's extended_data is its data array (what get_buffer2 must set up).
static inline void cffmpeg_frame_use_data(AVFrame *f) { f->extended_data = f->data; }
/// AV_BUFFER_FLAG_READONLY (a macro Swift does not import as an Int32).
static inline int cffmpeg_buffer_flag_readonly(void) { return AV_BUFFER_FLAG_READONLY; }
/// The codec can decode into buffers its user provides (AV_CODEC_CAP_DR1).
static inline int cffmpeg_codec_has_dr1(const AVCodecContext *c) {
    return c->codec && (c->codec->capabilities & AV_CODEC_CAP_DR1) != 0;
}
/// A frame's interlacing as FFmpeg 5.1 says it (interlaced_frame, top_field_first), or as
/// FFmpeg >= 6.1 does (AV_FRAME_FLAG_INTERLACED, AV_FRAME_FLAG_TOP_FIELD_FIRST).
static inline int cffmpeg_frame_interlaced(const AVFrame *f) {
#if LIBAVUTIL_VERSION_INT >= AV_VERSION_INT(58, 7, 100)
    return (f->flags & AV_FRAME_FLAG_INTERLACED) != 0;
#else
    return f->interlaced_frame != 0;
#endif
}
static inline int cffmpeg_frame_top_field_first(const AVFrame *f) {
#if LIBAVUTIL_VERSION_INT >= AV_VERSION_INT(58, 7, 100)
    return (f->flags & AV_FRAME_FLAG_TOP_FIELD_FIRST) != 0;
#else
    return f->top_field_first != 0;
#endif
}
static inline void cffmpeg_frame_set_fields(AVFrame *f, int interlaced, int top_field_first) {
#if LIBAVUTIL_VERSION_INT >= AV_VERSION_INT(58, 7, 100)
    f->flags &= ~(AV_FRAME_FLAG_INTERLACED | AV_FRAME_FLAG_TOP_FIELD_FIRST);
    if (interlaced) f->flags |= AV_FRAME_FLAG_INTERLACED;
    if (top_field_first) f->flags |= AV_FRAME_FLAG_TOP_FIELD_FIRST;
#else
    f->interlaced_frame = interlaced != 0;
    f->top_field_first = top_field_first != 0;
#endif
}
#endif
