/*
 * pixfmt.h: the pixel-format table and the canonical layout (pixfmt.c). Not installed.
 */
#ifndef FRAMESRV_PIXFMT_H
#define FRAMESRV_PIXFMT_H

#include "common.h"

/* ---- pixel formats and layout (pixfmt.c) -------------------------------------- */

typedef struct fsi_plane_shape {
    uint8_t ws, hs;            /* subsampling shifts            */
    uint8_t components;        /* interleaved components        */
    uint8_t sample_bytes;      /* bytes per component           */
} fsi_plane_shape;

typedef struct fsi_pix_format {
    int code;
    const char *name;
    uint32_t plane_count;
    fsi_plane_shape planes[FRAMESRV_MAX_PLANES];
    bool rgb;                  /* matrix 0 by default           */
} fsi_pix_format;

/* The table entry of a code, NULL for 0 or an unknown code. */
FSI_HIDDEN const fsi_pix_format *fsi_pix_format_of(int code);

/* A sample format of audio frames (PROTOCOL.md 4.6): its code, FFmpeg's name, bytes per
 * sample of one channel, and whether each channel has a row of its own. */
typedef struct fsi_sample_format { int code; const char *name; uint32_t bytes; bool planar; } fsi_sample_format;
FSI_HIDDEN const fsi_sample_format *fsi_sample_format_of(int code);
/* An audio frame's fields (validated header): media, sample format, rate, channels, layout,
 * nb_samples, and plane 0 as framesrv_plane: rows of samples. */
FSI_HIDDEN void fsi_describe_samples(framesrv_frame_info *info, const fs_frame *header, uint8_t *slot);

/* The canonical layout of PROTOCOL.md 4.2: offsets, strides, sizes and the slot's bytes.
 * FRAMESRV_E_INVALID on overflow or a bad size. */
typedef struct fsi_layout {
    uint32_t plane_count;
    uint32_t offset[FRAMESRV_MAX_PLANES], stride[FRAMESRV_MAX_PLANES], size[FRAMESRV_MAX_PLANES];
    uint64_t slot_bytes;       /* offset(last) + size(last)     */
} fsi_layout;
FSI_HIDDEN int fsi_canonical_layout(const fsi_pix_format *format, uint32_t width, uint32_t height, fsi_layout *out);

/* Fills info->planes[] (data = slot + offset, or NULL for slot NULL: a CUDA frame; geometry
 * from the format) from a validated header. For pix_fmt 0 every plane is 1 component of 1 byte, width = stride. */
FSI_HIDDEN void fsi_describe_planes(framesrv_frame_info *info, const fs_frame *header, uint8_t *slot);

#endif /* FRAMESRV_PIXFMT_H */
