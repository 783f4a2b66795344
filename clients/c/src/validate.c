/*
 * validate.c: the one validator per structure another process wrote (PROTOCOL.md 4.1,
 * 4.2, 5), mirroring the Swift library's ControlSegment.validate, Segment.openPool and
 * FrameHeader.validate. Every check is on a value read once (a copy), with 64-bit
 * arithmetic that cannot overflow for 32-bit inputs; every failure is one line naming the
 * file, the field and the value (FRAMESRV_E_BAD_DATA).
 */
#include "pixfmt.h"
#include "validate.h"

#include <stdio.h>
#include <string.h>

#define TIMESTAMP_LIMIT ((int64_t)1 << 62)   /* FrameHeader.timestampLimit */
#define MAX_DIMENSION 16384u

static uint32_t u32_at(const uint8_t *bytes, size_t offset)
{
    uint32_t v;
    memcpy(&v, bytes + offset, sizeof v);
    return v;
}

static int bad_field(const char *path, const char *field, uint64_t value, uint64_t expected)
{
    return fsi_fail(FRAMESRV_E_BAD_DATA, "%s: %s is %llu, expected %llu", path, field, (unsigned long long)value,
                    (unsigned long long)expected);
}

/* memory and fence_offset (4.5): host with no fence table, or CUDA with it after the consumer table. */
static int check_memory(const uint8_t *bytes, uint32_t slots, const char *path, uint32_t *memory)
{
    uint32_t kind = u32_at(bytes, offsetof(fs_control, memory)), fences = u32_at(bytes, offsetof(fs_control, fence_offset));
    if (kind == FS_MEMORY_HOST && fences != 0)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "%s: fence_offset is %u, expected 0 (a host stream has no fence table)", path, fences);
    if (kind == FS_MEMORY_CUDA && fences != fs_control_fence_offset(slots))
        return fsi_fail(FRAMESRV_E_BAD_DATA, "%s: fence_offset is %u, expected %zu, after the consumer table", path, fences,
                        fs_control_fence_offset(slots));
    if (kind != FS_MEMORY_HOST && kind != FS_MEMORY_CUDA)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "%s: memory is %u, expected 0 (host) or 1 (cuda)", path, kind);
    *memory = kind;
    return FRAMESRV_OK;
}

int fsi_validate_control(const void *base, size_t size, const char *path, uint32_t *slot_count, uint32_t *memory)
{
    const uint8_t *bytes = base;
    const size_t header = sizeof(fs_control);
    if (size < header) return fsi_fail(FRAMESRV_E_BAD_DATA, "%s: it has %zu bytes, its header needs %zu", path, size, header);
    uint32_t magic = u32_at(bytes, offsetof(fs_control, magic));
    if (magic != FS_MAGIC_CONTROL)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "%s: it is not a framesrv control segment (magic 0x%x)", path, magic);
    uint32_t version = u32_at(bytes, offsetof(fs_control, version));
    if (version != FS_PROTOCOL_VERSION)   /* nothing past the identity prefix is read (16) */
        return fsi_fail(FRAMESRV_E_VERSION, "control segment %s speaks framesrv protocol version %u, but this program speaks "
                        "version %u; run the same framesrv version on both sides", path, version, FS_PROTOCOL_VERSION);
    uint32_t slots = u32_at(bytes, offsetof(fs_control, slot_count));
    if (slots < 1 || slots > FS_MAX_SLOTS)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "%s: slot_count is %u, expected 1..%u", path, slots, FS_MAX_SLOTS);
    const struct { const char *field; size_t offset; uint64_t expected; } fixed[] = {
        { "header_size", offsetof(fs_control, header_size), header },
        { "max_consumers", offsetof(fs_control, max_consumers), FS_MAX_CONSUMERS },
        { "slot_ctl_size", offsetof(fs_control, slot_ctl_size), sizeof(fs_slot_ctl) },
        { "consumer_size", offsetof(fs_control, consumer_size), sizeof(fs_consumer) },
        { "slot_ctl_offset", offsetof(fs_control, slot_ctl_offset), header },
        { "consumer_offset", offsetof(fs_control, consumer_offset), header + (uint64_t)slots * sizeof(fs_slot_ctl) },
    };
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        uint32_t v = u32_at(bytes, fixed[i].offset);
        if (v != fixed[i].expected) return bad_field(path, fixed[i].field, v, fixed[i].expected);
    }
    int status = check_memory(bytes, slots, path, memory);
    if (status != FRAMESRV_OK) return status;
    uint32_t media = u32_at(bytes, offsetof(fs_control, media));
    if (media != FS_MEDIA_VIDEO && media != FS_MEDIA_AUDIO)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "%s: media is %u, expected 0 (video) or 1 (audio)", path, media);
    size_t needed = *memory == FS_MEMORY_CUDA ? fs_control_size_cuda(slots) : fs_control_size(slots);
    if (size < needed) return fsi_fail(FRAMESRV_E_BAD_DATA, "%s: it has %zu bytes, its header needs %zu", path, size, needed);
    uint64_t num, den;   /* const: read once here */
    memcpy(&num, bytes + offsetof(fs_control, rate_num), sizeof num);
    memcpy(&den, bytes + offsetof(fs_control, rate_den), sizeof den);
    if ((num == 0) != (den == 0) || num > INT64_MAX || den > INT64_MAX)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "%s: rate_num/rate_den is %llu/%llu, expected 0/0 (unknown) or both 1..2^63-1", path,
                        (unsigned long long)num, (unsigned long long)den);
    *slot_count = slots;
    return FRAMESRV_OK;
}

int fsi_validate_pool(size_t size, uint32_t slot_count, const char *path, size_t *slot_bytes)
{
    if (slot_count < 1 || slot_count > FS_MAX_SLOTS) return bad_field(path, "slot_count", slot_count, FS_MAX_SLOTS);
    size_t stride = size / slot_count;
    if (size % slot_count != 0 || stride % 64 != 0 || stride < sizeof(fs_frame))
        return fsi_fail(FRAMESRV_E_BAD_DATA, "%s: file size is %zu, expected %u slots of a multiple of 64 bytes (at least %zu)",
                        path, size, slot_count, sizeof(fs_frame));
    *slot_bytes = stride;
    return FRAMESRV_OK;
}

int fsi_validate_header_pool(size_t size, uint32_t slot_count, const char *path)
{
    if (slot_count < 1 || slot_count > FS_MAX_SLOTS) return bad_field(path, "slot_count", slot_count, FS_MAX_SLOTS);
    if (size != (size_t)slot_count * FS_CUDA_HEADER_SLOT)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "%s: file size is %zu, expected %u headers of %u bytes (a CUDA stream's pool)", path,
                        size, slot_count, FS_CUDA_HEADER_SLOT);
    return FRAMESRV_OK;
}

/* ---- frame headers --------------------------------------------------------------------- */

/* Where the frame header's failure is reported: "<pool> slot <i>: frame header ...". */
typedef struct where { const char *path; uint32_t slot; } where;

static int frame_bad(where w, const char *field, long long value, const char *expected)
{
    return fsi_fail(FRAMESRV_E_BAD_DATA, "%s slot %u: frame header field %s is %lld, expected %s", w.path, w.slot, field, value,
                    expected);
}

static int check_range(where w, const char *field, int64_t v, int64_t lo, int64_t hi)
{
    if (v >= lo && v <= hi) return FRAMESRV_OK;
    char expected[64];
    snprintf(expected, sizeof expected, "%lld..%lld", (long long)lo, (long long)hi);
    return frame_bad(w, field, v, expected);
}

/* Every plane at offset >= lowest (256 in a host slot, 0 in a device slot) and
 * offset + size <= slot_bytes. */
static int check_plane_bounds(where w, const fs_frame *h, uint64_t lowest, uint64_t slot_bytes)
{
    for (uint32_t p = 0; p < h->plane_count; p++) {
        uint64_t offset = h->plane_offset[p], end = offset + h->plane_size[p];   /* < 2^33: no overflow */
        char field[32], expected[96];
        if (offset < lowest) {
            snprintf(field, sizeof field, "plane_offset[%u]", p);
            return frame_bad(w, field, (long long)offset, ">= 256");
        }
        if (end > slot_bytes) {
            snprintf(field, sizeof field, "plane_size[%u]", p);
            snprintf(expected, sizeof expected, "a plane inside the slot's %llu bytes (it starts at %llu)",
                     (unsigned long long)slot_bytes, (unsigned long long)offset);
            return frame_bad(w, field, h->plane_size[p], expected);
        }
    }
    return FRAMESRV_OK;
}

/* The table's format the header names (NULL for code 0 with an unknown name), checking
 * that code and name agree and that plane_count is the format's. */
static int checked_format(where w, const fs_frame *h, const fsi_pix_format **out)
{
    char name[sizeof h->pix_fmt_name + 1];
    memcpy(name, h->pix_fmt_name, sizeof h->pix_fmt_name);
    name[sizeof h->pix_fmt_name] = '\0';
    const fsi_pix_format *f;
    *out = NULL;
    if (h->pix_fmt == FS_PIX_OTHER) {   /* a format of the table must be written with its code (19) */
        if ((f = fsi_pix_format_of(framesrv_pix_fmt_from_name(name)))) {
            char expected[64];
            snprintf(expected, sizeof expected, "%d, the code of pix_fmt_name '%s'", f->code, name);
            return frame_bad(w, "pix_fmt", 0, expected);
        }
        return FRAMESRV_OK;
    } else {
        if (!(f = fsi_pix_format_of((int)h->pix_fmt))) return check_range(w, "pix_fmt", h->pix_fmt, 0, FS_PIX_GBRP);
        if (name[0] && strcmp(name, f->name) != 0) {
            char expected[80];
            snprintf(expected, sizeof expected, "the code of pix_fmt_name '%s'", name);
            return frame_bad(w, "pix_fmt", h->pix_fmt, expected);
        }
    }
    if (h->plane_count != f->plane_count) {
        char expected[48];
        snprintf(expected, sizeof expected, "%u for %s", f->plane_count, f->name);
        return frame_bad(w, "plane_count", h->plane_count, expected);
    }
    *out = f;
    return FRAMESRV_OK;
}

/* Every row a reader takes (rows x stride, row_bytes each) lies inside its plane. */
static int check_rows(where w, const fs_frame *h, const fsi_pix_format *f)
{
    for (uint32_t p = 0; p < f->plane_count; p++) {
        const fsi_plane_shape *s = &f->planes[p];
        uint64_t rows = ((uint64_t)h->height + (1u << s->hs) - 1) >> s->hs;
        uint64_t row_bytes = (((uint64_t)h->width + (1u << s->ws) - 1) >> s->ws) * s->components * s->sample_bytes;
        uint64_t stride = h->plane_stride[p];
        /* stride < 2^32, rows <= 16384: the product fits in 64 bits. */
        if (stride >= row_bytes && stride * (rows - 1) + row_bytes <= h->plane_size[p]) continue;
        char field[32], expected[160];
        snprintf(field, sizeof field, "plane_stride[%u]", p);
        snprintf(expected, sizeof expected, "a stride and size %u that hold %llu rows of %llu bytes (%s %ux%u)",
                 h->plane_size[p], (unsigned long long)rows, (unsigned long long)row_bytes, f->name, h->width, h->height);
        return frame_bad(w, field, (long long)stride, expected);
    }
    return FRAMESRV_OK;
}

/* An audio frame's own fields (4.6): width and height 0, a sample format of the table whose
 * name matches, channels 1..64 with a mask that agrees, rate and samples in range, one plane
 * whose rows (one per channel when planar) of row_bytes fit at its stride. Every product is
 * below 2^63: samples <= 2^20, channels <= 64, bytes <= 8, stride < 2^32. */
static int check_audio(where w, const fs_frame *h)
{
    int status;
    if ((status = check_range(w, "width", h->width, 0, 0)) != FRAMESRV_OK || (status = check_range(w, "height", h->height, 0, 0)) != FRAMESRV_OK ||
        (status = check_range(w, "pix_fmt", h->pix_fmt, 1, FS_SAMPLE_MAX)) != FRAMESRV_OK ||
        (status = check_range(w, "channels", h->channels, 1, FS_MAX_CHANNELS)) != FRAMESRV_OK ||
        (status = check_range(w, "sample_rate", h->sample_rate, 1, FS_MAX_SAMPLE_RATE)) != FRAMESRV_OK ||
        (status = check_range(w, "nb_samples", h->nb_samples, 1, FS_MAX_SAMPLES)) != FRAMESRV_OK ||
        (status = check_range(w, "plane_count", h->plane_count, 1, 1)) != FRAMESRV_OK)
        return status;
    const fsi_sample_format *f = fsi_sample_format_of((int)h->pix_fmt);
    char name[sizeof h->pix_fmt_name + 1];
    memcpy(name, h->pix_fmt_name, sizeof h->pix_fmt_name);
    name[sizeof h->pix_fmt_name] = '\0';
    if (name[0] && strcmp(name, f->name) != 0) return frame_bad(w, "pix_fmt", h->pix_fmt, "the code of its sample format name");
    int bits = __builtin_popcountll(h->channel_mask);
    if (h->channel_order == FS_CHANNEL_ORDER_NATIVE ? bits != (int)h->channels
        : (h->channel_order != FS_CHANNEL_ORDER_UNSPEC && h->channel_order != FS_CHANNEL_ORDER_AMBISONIC) || h->channel_mask != 0)
        return frame_bad(w, "channel_mask", (long long)h->channel_mask, "one bit per channel (native order), else 0 (unspecified, ambisonic)");
    uint64_t rows = f->planar ? h->channels : 1;
    uint64_t row_bytes = (uint64_t)h->nb_samples * (f->planar ? 1 : h->channels) * f->bytes;
    uint64_t stride = h->plane_stride[0];
    if (stride >= row_bytes && stride * (rows - 1) + row_bytes <= h->plane_size[0]) return FRAMESRV_OK;
    char expected[128];
    snprintf(expected, sizeof expected, "a stride and size %u that hold %llu rows of %llu bytes (%s)", h->plane_size[0],
             (unsigned long long)rows, (unsigned long long)row_bytes, f->name);
    return frame_bad(w, "plane_stride[0]", (long long)stride, expected);
}

static int validate_frame(const fs_frame *h, uint64_t seq, uint64_t lowest, uint64_t slot_bytes, uint32_t media, const char *path,
                          uint32_t slot)
{
    where w = { path, slot };
    if (h->magic != FS_MAGIC_FRAME)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "%s slot %u: not a framesrv frame header (magic 0x%x)", path, slot, h->magic);
    if (h->version != FS_PROTOCOL_VERSION)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "%s slot %u: frame header speaks protocol version %u, expected %u", path, slot,
                        h->version, FS_PROTOCOL_VERSION);
    if (h->seq != seq)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "%s slot %u: frame header field seq is %llu, expected %llu, the slot's", path, slot,
                        (unsigned long long)h->seq, (unsigned long long)seq);
    int status;
    const fsi_pix_format *f;
    if ((status = check_range(w, "media", h->media, media, media)) != FRAMESRV_OK) return status;   /* the stream's (4.6) */
    if (media == FS_MEDIA_AUDIO) {
        if ((status = check_plane_bounds(w, h, lowest, slot_bytes)) != FRAMESRV_OK || (status = check_audio(w, h)) != FRAMESRV_OK)
            return status;
    } else if ((status = check_range(w, "width", h->width, 1, MAX_DIMENSION)) != FRAMESRV_OK ||
        (status = check_range(w, "height", h->height, 1, MAX_DIMENSION)) != FRAMESRV_OK ||
        (status = check_range(w, "plane_count", h->plane_count, 1, FS_MAX_PLANES)) != FRAMESRV_OK ||
        (status = check_plane_bounds(w, h, lowest, slot_bytes)) != FRAMESRV_OK ||
        (status = checked_format(w, h, &f)) != FRAMESRV_OK || (f && (status = check_rows(w, h, f)) != FRAMESRV_OK))
        return status;
    if (h->pts != FS_PTS_NONE && (status = check_range(w, "pts", h->pts, -TIMESTAMP_LIMIT, TIMESTAMP_LIMIT)) != FRAMESRV_OK)
        return status;
    if ((status = check_range(w, "time_base_num", h->time_base_num, 1, INT32_MAX)) != FRAMESRV_OK ||
        (status = check_range(w, "time_base_den", h->time_base_den, 1, INT32_MAX)) != FRAMESRV_OK ||
        (status = check_range(w, "field_order", h->field_order, 0, FS_FIELD_MAX)) != FRAMESRV_OK ||
        (status = check_range(w, "chroma_location", h->chroma_location, 0, FS_CHROMA_MAX)) != FRAMESRV_OK)
        return status;
    return check_range(w, "duration", h->duration, 0, TIMESTAMP_LIMIT);
}

int fsi_validate_frame(const fs_frame *h, uint64_t seq, uint64_t slot_bytes, uint32_t media, const char *path, uint32_t slot)
{
    return validate_frame(h, seq, sizeof(fs_frame), slot_bytes, media, path, slot);
}

int fsi_validate_device_frame(const fs_frame *h, uint64_t seq, uint64_t device_slot_stride, const char *path, uint32_t slot)
{
    return validate_frame(h, seq, 0, device_slot_stride, FS_MEDIA_VIDEO, path, slot);   /* CUDA streams carry pictures */
}

/* ---- announcements (5) ------------------------------------------------------------------ */

int fsi_validate_announce(const void *message, size_t length)
{
    fs_announce a;
    if (length < sizeof a) return fsi_fail(FRAMESRV_E_BAD_DATA, "announcement (short): %zu bytes, expected at least %zu", length, sizeof a);
    memcpy(&a, message, sizeof a);   /* little-endian hosts only, as the layout */
    if (a.magic != FS_MAGIC_ANNOUNCE) return fsi_fail(FRAMESRV_E_BAD_DATA, "announcement (bad-magic): magic is 0x%x", a.magic);
    if (a.version != FS_PROTOCOL_VERSION)   /* the one fatal check: a receiver stops reading the stream (5) */
        return fsi_fail(FRAMESRV_E_VERSION, "announcement (version) speaks framesrv protocol version %u, but this program speaks "
                        "version %u", a.version, FS_PROTOCOL_VERSION);
    if (a.kind < FS_ANNOUNCE_FRAME || a.kind > FS_ANNOUNCE_EPOCH)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "announcement (kind): kind is %u, expected 1..3", a.kind);
    if (a.name_len < 1 || a.name_len > FS_NAME_MAX)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "announcement (name-len): name_len is %u, expected 1..%u", a.name_len, FS_NAME_MAX);
    if (length != sizeof a + a.name_len)
        return fsi_fail(FRAMESRV_E_BAD_DATA, "announcement (length): %zu bytes, expected 64 + name_len %u", length, a.name_len);
    for (size_t i = sizeof a; i < length; i++) {   /* a stream name's bytes (3.1) */
        uint8_t b = ((const uint8_t *)message)[i];
        bool ok = (b >= 'A' && b <= 'Z') || (b >= 'a' && b <= 'z') || (b >= '0' && b <= '9') || b == '.' || b == '_' || b == '-';
        if (!ok)
            return fsi_fail(FRAMESRV_E_BAD_DATA, "announcement (name): byte 0x%02x at %zu is outside [A-Za-z0-9._-]", b, i);
    }
    return FRAMESRV_OK;
}
