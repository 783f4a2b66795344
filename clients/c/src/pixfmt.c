/*
 * pixfmt.c: the pixel-format table (PROTOCOL.md 19), the canonical plane layout (4.2) and
 * the geometry of a validated frame header's planes.
 */
#include "pixfmt.h"

#include <string.h>

#define Y1 {0, 0, 1, 1}            /* a full-size plane of 1-byte samples */
#define Y2 {0, 0, 1, 2}            /* a full-size plane of 16-bit samples */

/* Indexed by code (PROTOCOL.md 19): {ws, hs, components, sample_bytes} per plane. */
static const fsi_pix_format formats[] = {
    {FRAMESRV_PIX_GRAY, "gray", 1, {Y1}, false},
    {FRAMESRV_PIX_NV12, "nv12", 2, {Y1, {1, 1, 2, 1}}, false},
    {FRAMESRV_PIX_YUV420P, "yuv420p", 3, {Y1, {1, 1, 1, 1}, {1, 1, 1, 1}}, false},
    {FRAMESRV_PIX_YUV422P, "yuv422p", 3, {Y1, {1, 0, 1, 1}, {1, 0, 1, 1}}, false},
    {FRAMESRV_PIX_YUV444P, "yuv444p", 3, {Y1, Y1, Y1}, false},
    {FRAMESRV_PIX_YUV420P10LE, "yuv420p10le", 3, {Y2, {1, 1, 1, 2}, {1, 1, 1, 2}}, false},
    {FRAMESRV_PIX_RGB24, "rgb24", 1, {{0, 0, 3, 1}}, true},
    {FRAMESRV_PIX_BGRA, "bgra", 1, {{0, 0, 4, 1}}, true},
    {FRAMESRV_PIX_RGBA, "rgba", 1, {{0, 0, 4, 1}}, true},
    {FRAMESRV_PIX_P010LE, "p010le", 2, {Y2, {1, 1, 2, 2}}, false},
    {FRAMESRV_PIX_YUV422P10LE, "yuv422p10le", 3, {Y2, {1, 0, 1, 2}, {1, 0, 1, 2}}, false},
    {FRAMESRV_PIX_YUV444P10LE, "yuv444p10le", 3, {Y2, Y2, Y2}, false},
    {FRAMESRV_PIX_GRAY16LE, "gray16le", 1, {Y2}, false},
    {FRAMESRV_PIX_BGR24, "bgr24", 1, {{0, 0, 3, 1}}, true},
    {FRAMESRV_PIX_GBRP, "gbrp", 3, {Y1, Y1, Y1}, true},
};
#define FORMAT_COUNT (sizeof formats / sizeof formats[0])

/* Indexed by code - 1 (PROTOCOL.md 4.6). */
static const fsi_sample_format samples[] = {
    {1, "u8", 1, false}, {2, "s16", 2, false}, {3, "s32", 4, false}, {4, "flt", 4, false}, {5, "dbl", 8, false},
    {6, "u8p", 1, true}, {7, "s16p", 2, true}, {8, "s32p", 4, true}, {9, "fltp", 4, true}, {10, "dblp", 8, true},
    {11, "s64", 8, false}, {12, "s64p", 8, true},
};

const fsi_sample_format *fsi_sample_format_of(int code)
{
    return code >= 1 && (size_t)code <= sizeof samples / sizeof samples[0] ? &samples[code - 1] : NULL;
}

const char *framesrv_sample_fmt_name(int sample_fmt)
{
    const fsi_sample_format *f = fsi_sample_format_of(sample_fmt);
    return f ? f->name : NULL;
}

void fsi_describe_samples(framesrv_frame_info *info, const fs_frame *header, uint8_t *slot)
{
    const fsi_sample_format *f = fsi_sample_format_of((int)header->pix_fmt);   /* validated: not NULL */
    info->media = FRAMESRV_MEDIA_AUDIO;
    info->pix_fmt = 0;   /* the code is sample_fmt's; pix_fmt_name names it */
    info->sample_fmt = (int)header->pix_fmt;
    info->sample_rate = header->sample_rate;
    info->channels = header->channels;
    info->channel_order = header->channel_order;
    info->channel_mask = header->channel_mask;
    info->nb_samples = header->nb_samples;
    memset(info->planes, 0, sizeof info->planes);
    info->plane_count = 1;
    framesrv_plane *pl = &info->planes[0];
    pl->data = slot ? slot + header->plane_offset[0] : NULL;
    pl->stride = header->plane_stride[0];
    pl->size = header->plane_size[0];
    pl->width = header->nb_samples;
    pl->height = f && f->planar ? header->channels : 1;
    pl->components = f && f->planar ? 1 : header->channels;
    pl->sample_bytes = f ? f->bytes : 1;
    pl->row_bytes = (size_t)pl->width * pl->components * pl->sample_bytes;
}

_Static_assert(FRAMESRV_PIX_GRAY == FS_PIX_GRAY8 && FRAMESRV_PIX_GBRP == FS_PIX_GBRP &&
               FRAMESRV_PIX_P010LE == FS_PIX_P010LE, "framesrv.h's codes are the protocol's");

const fsi_pix_format *fsi_pix_format_of(int code)
{
    if (code < 1 || (size_t)code > FORMAT_COUNT) return NULL;
    return &formats[code - 1];
}

const char *framesrv_pix_fmt_name(int pix_fmt)
{
    const fsi_pix_format *f = fsi_pix_format_of(pix_fmt);
    return f ? f->name : NULL;
}

int framesrv_pix_fmt_from_name(const char *name)
{
    if (name == NULL) return FRAMESRV_PIX_OTHER;
    for (size_t i = 0; i < FORMAT_COUNT; i++)
        if (strcmp(formats[i].name, name) == 0) return formats[i].code;
    return FRAMESRV_PIX_OTHER;
}

/* ceil(n / 2^shift) */
static uint64_t shifted_up(uint32_t n, uint8_t shift) { return ((uint64_t)n + (1u << shift) - 1) >> shift; }
static uint64_t round_up_64(uint64_t n) { return (n + 63) & ~(uint64_t)63; }

int fsi_canonical_layout(const fsi_pix_format *format, uint32_t width, uint32_t height, fsi_layout *out)
{
    if (format == NULL || out == NULL)
        return fsi_fail(FRAMESRV_E_INVALID, "canonical layout: no format");
    if (width < 1 || width > 16384 || height < 1 || height > 16384)
        return fsi_fail(FRAMESRV_E_INVALID, "frame size %ux%u: width and height must be 1..16384", width, height);
    memset(out, 0, sizeof *out);
    out->plane_count = format->plane_count;
    uint64_t offset = sizeof(fs_frame), end = offset;
    for (uint32_t p = 0; p < format->plane_count; p++) {
        const fsi_plane_shape *s = &format->planes[p];
        /* At most 16384 x 4 x 2 bytes per row and 16384 rows: no uint64 overflow below. */
        uint64_t row_bytes = shifted_up(width, s->ws) * s->components * s->sample_bytes;
        uint64_t stride = round_up_64(row_bytes);
        uint64_t size = stride * shifted_up(height, s->hs);
        if (offset + size > UINT32_MAX)
            return fsi_fail(FRAMESRV_E_INVALID, "frame %s %ux%u: plane %u ends past 4 GiB", format->name, width, height, p);
        out->offset[p] = (uint32_t)offset;
        out->stride[p] = (uint32_t)stride;
        out->size[p] = (uint32_t)size;
        end = offset + size;
        offset += round_up_64(size);
    }
    out->slot_bytes = end;
    return FRAMESRV_OK;
}

/* The table's format a header names: its code, or (code 0) a name of the table. */
static const fsi_pix_format *format_of_header(const fs_frame *header)
{
    if (header->pix_fmt != FS_PIX_OTHER) return fsi_pix_format_of((int)header->pix_fmt);
    char name[sizeof header->pix_fmt_name + 1];
    memcpy(name, header->pix_fmt_name, sizeof header->pix_fmt_name);
    name[sizeof header->pix_fmt_name] = '\0';
    return fsi_pix_format_of(framesrv_pix_fmt_from_name(name));
}

void fsi_describe_planes(framesrv_frame_info *info, const fs_frame *header, uint8_t *slot)
{
    const fsi_pix_format *f = format_of_header(header);
    uint32_t count = header->plane_count <= FRAMESRV_MAX_PLANES ? header->plane_count : FRAMESRV_MAX_PLANES;
    memset(info->planes, 0, sizeof info->planes);
    info->plane_count = count;
    for (uint32_t p = 0; p < count; p++) {
        framesrv_plane *pl = &info->planes[p];
        pl->data = slot ? slot + header->plane_offset[p] : NULL;   /* NULL: a CUDA frame's planes are on the device */
        pl->stride = header->plane_stride[p];
        pl->size = header->plane_size[p];
        if (f != NULL && p < f->plane_count) {
            const fsi_plane_shape *s = &f->planes[p];
            pl->width = (uint32_t)shifted_up(header->width, s->ws);
            pl->height = (uint32_t)shifted_up(header->height, s->hs);
            pl->components = s->components;
            pl->sample_bytes = s->sample_bytes;
        } else {   /* unknown geometry: rows of stride bytes */
            pl->width = header->plane_stride[p];
            pl->height = pl->stride ? (uint32_t)(pl->size / pl->stride) : 0;
            pl->components = 1;
            pl->sample_bytes = 1;
        }
        pl->row_bytes = (size_t)pl->width * pl->components * pl->sample_bytes;
    }
}
