/*
 * producer_audio.c: an audio stream's producer (PROTOCOL.md 4.6). Its options, the slot
 * layout for max_samples, the (w) fields reserve presets and the header publish writes,
 * field for field as framesrv's own producer writes it (AudioFormat.swift,
 * fs_frame.init(audio:description:)).
 */
#include "producer.h"

#include <stdio.h>
#include <string.h>

static uint64_t round_up_64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

/* Bytes of one row of n samples: a channel's (planar) or all channels' (packed). */
static uint64_t row_bytes(const framesrv_producer *p, uint32_t n)
{
    return (uint64_t)n * (p->samples->planar ? 1 : p->opt.channels) * p->samples->bytes;
}

static uint32_t rows(const framesrv_producer *p) { return p->samples->planar ? p->opt.channels : 1; }

int fsp_audio_options(framesrv_producer_options *o)
{
    if (o->media != FRAMESRV_MEDIA_VIDEO && o->media != FRAMESRV_MEDIA_AUDIO)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: media %d: use FRAMESRV_MEDIA_VIDEO (0) or FRAMESRV_MEDIA_AUDIO (1)", o->media);
    if (o->media == FRAMESRV_MEDIA_VIDEO) {
        if (o->sample_fmt || o->sample_rate || o->channels || o->channel_mask || o->max_samples)
            return fsi_fail(FRAMESRV_E_INVALID, "producer: sample_fmt, sample_rate, channels, channel_mask and max_samples "
                            "describe audio: set media = FRAMESRV_MEDIA_AUDIO (or leave them 0 for pictures)");
        return FRAMESRV_OK;
    }
    if (o->width || o->height || o->pix_fmt)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: an audio stream has no width, height or pix_fmt (%ux%u, %d): leave them 0",
                        o->width, o->height, o->pix_fmt);
    if (o->memory != FRAMESRV_MEMORY_HOST)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: memory %d: an audio stream is in host memory (FRAMESRV_MEMORY_HOST)", o->memory);
    if (fsi_sample_format_of(o->sample_fmt) == NULL)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: sample_fmt %d is not a sample format of the table (1..%u)", o->sample_fmt,
                        FS_SAMPLE_MAX);
    if (o->sample_rate < 1 || o->sample_rate > FS_MAX_SAMPLE_RATE)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: sample_rate %u: must be 1..%u", o->sample_rate, FS_MAX_SAMPLE_RATE);
    if (o->channels < 1 || o->channels > FS_MAX_CHANNELS)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: channels %u: must be 1..%u", o->channels, FS_MAX_CHANNELS);
    if (o->channel_mask != 0 && (uint32_t)__builtin_popcountll(o->channel_mask) != o->channels)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: channel_mask 0x%llx has %d bits for %u channels: one bit per channel, "
                        "or 0 (unspecified order)", (unsigned long long)o->channel_mask, __builtin_popcountll(o->channel_mask),
                        o->channels);
    if (o->max_samples < 1 || o->max_samples > FS_MAX_SAMPLES)
        return fsi_fail(FRAMESRV_E_INVALID, "producer: max_samples %u: must be 1..%u", o->max_samples, FS_MAX_SAMPLES);
    return FRAMESRV_OK;
}

/* The header of a frame of n samples: every field but the (w) ones (4.6). */
static void describe(const framesrv_producer *p, uint32_t n, fs_frame *h)
{
    uint64_t stride = round_up_64(row_bytes(p, n));   /* <= 2^20 x 64 x 8: no overflow, fits u32 */
    h->plane_stride[0] = (uint32_t)stride;
    h->plane_size[0] = (uint32_t)(stride * rows(p));
    h->payload_size = h->plane_size[0];
    h->nb_samples = n;
}

int fsp_audio_set_format(framesrv_producer *p)
{
    p->samples = fsi_sample_format_of(p->opt.sample_fmt);
    fs_frame *h = &p->template_header;
    memset(h, 0, sizeof *h);
    h->magic = FS_MAGIC_FRAME;
    h->version = FS_PROTOCOL_VERSION;
    h->media = FS_MEDIA_AUDIO;
    h->pix_fmt = (uint32_t)p->samples->code;
    snprintf(h->pix_fmt_name, sizeof h->pix_fmt_name, "%s", p->samples->name);
    h->plane_count = 1;
    h->plane_offset[0] = sizeof(fs_frame);
    h->sample_rate = p->opt.sample_rate;
    h->channels = p->opt.channels;
    h->channel_order = p->opt.channel_mask ? FS_CHANNEL_ORDER_NATIVE : FS_CHANNEL_ORDER_UNSPEC;
    h->channel_mask = p->opt.channel_mask;
    describe(p, p->opt.max_samples, h);   /* the template: a full frame, what a slot must hold */
    memset(&p->layout, 0, sizeof p->layout);
    p->layout.plane_count = 1;
    p->layout.offset[0] = h->plane_offset[0];
    p->layout.stride[0] = h->plane_stride[0];
    p->layout.size[0] = h->plane_size[0];
    p->layout.slot_bytes = sizeof(fs_frame) + (uint64_t)h->plane_size[0];
    return FRAMESRV_OK;
}

void fsp_audio_preset(framesrv_producer *p, framesrv_frame *f)
{
    framesrv_frame_info *in = &f->info;
    const fs_frame *h = &p->template_header;
    fsi_describe_samples(in, h, p->pool->base + (size_t)f->slot * p->pool->slot_stride);   /* nb_samples: max_samples */
    in->color_matrix = in->color_range = in->color_primaries = in->color_transfer = 0;
    in->sar_num = in->sar_den = 0;
    in->field_order = in->chroma_location = 0;
    in->time_base_num = 1;
    in->time_base_den = (int32_t)h->sample_rate;
    in->pts = p->audio_pts;
    in->duration = 0;   /* publish: nb_samples (in 1/sample_rate) */
}

int fsp_audio_check(framesrv_producer *p, const framesrv_frame_info *in)
{
    if (p->samples == NULL) {
        if (in->nb_samples != 0)
            return fsi_fail(FRAMESRV_E_INVALID, "publish on stream '%s': nb_samples %u on a video frame (audio streams only)",
                            p->name, in->nb_samples);
        return FRAMESRV_OK;
    }
    if (in->nb_samples < 1 || in->nb_samples > p->opt.max_samples)
        return fsi_fail(FRAMESRV_E_INVALID, "publish on stream '%s': nb_samples %u: must be 1..%u (the stream's max_samples)",
                        p->name, in->nb_samples, p->opt.max_samples);
    return FRAMESRV_OK;
}

void fsp_audio_header(framesrv_producer *p, framesrv_frame *f, fs_frame *h)
{
    const framesrv_frame_info *in = &f->info;
    describe(p, in->nb_samples, h);
    /* Video's fields are 0 in an audio frame (4.6), whatever the caller set. */
    h->color_matrix = h->color_range = h->color_primaries = h->color_transfer = 0;
    h->sar_num = h->sar_den = 0;
    h->field_order = h->chroma_location = 0;
    if (h->duration == 0 && h->time_base_num == 1 && (uint32_t)h->time_base_den == h->sample_rate) h->duration = in->nb_samples;
    /* A planar frame's rows were written max_samples apart: move them to the header's stride
     * (lower addresses, row by row from the first: no row is overwritten before it moves). */
    uint8_t *plane = f->pool->base + (size_t)f->slot * f->pool->slot_stride + h->plane_offset[0];
    size_t from = p->template_header.plane_stride[0], to = h->plane_stride[0];
    for (uint32_t r = 1; to != from && r < rows(p); r++) memmove(plane + r * to, plane + r * from, row_bytes(p, in->nb_samples));
    fsi_describe_samples(&f->info, h, plane - h->plane_offset[0]);   /* a kept frame: as published */
    p->audio_pts += in->nb_samples;
}
