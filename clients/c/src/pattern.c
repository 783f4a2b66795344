/*
 * pattern.c: the test pattern of PROTOCOL.md 21. Byte x of row y of plane p in frame seq is
 * (x + 2y + 3 seq + 61 p) mod 256; only the first row_bytes of each row (the pixels) count.
 */
#include "frame.h"

#include <pthread.h>
#include <string.h>

/* 0..255 twice: any run of up to 256 pattern bytes starting anywhere is one memcpy. */
static uint8_t ramp_bytes[512];
static void ramp_init(void) { for (int i = 0; i < 512; i++) ramp_bytes[i] = (uint8_t)i; }
static const uint8_t *ramp(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, ramp_init);
    return ramp_bytes;
}

/* The pattern's first byte of row y of plane p in frame seq. */
static unsigned row_start(uint32_t p, size_t y, uint64_t seq)
{
    return (unsigned)((2 * (uint64_t)y + 3 * seq + 61 * (uint64_t)p) & 0xFF);
}

void framesrv_pattern_fill(framesrv_frame *frame)
{
    if (frame == NULL || framesrv_frame_memory(frame) != FRAMESRV_MEMORY_HOST) return;
    const framesrv_frame_info *info = &frame->info;
    const uint8_t *r = ramp();
    for (uint32_t p = 0; p < info->plane_count && p < FRAMESRV_MAX_PLANES; p++) {
        const framesrv_plane *pl = &info->planes[p];
        for (size_t y = 0; y < pl->height; y++) {
            uint8_t *row = pl->data + y * pl->stride;
            unsigned c = row_start(p, y, info->seq);
            for (size_t x = 0; x < pl->row_bytes; x += 256) {
                size_t n = pl->row_bytes - x < 256 ? pl->row_bytes - x : 256;
                memcpy(row + x, r + ((c + x) & 0xFF), n);
            }
        }
    }
}

uint64_t framesrv_pattern_check(framesrv_frame *frame)
{
    if (frame == NULL) return 0;
    if (framesrv_frame_memory(frame) != FRAMESRV_MEMORY_HOST) return UINT64_MAX;   /* device memory */
    const framesrv_frame_info *info = &frame->info;
    const uint8_t *r = ramp();
    uint64_t bad = 0;
    for (uint32_t p = 0; p < info->plane_count && p < FRAMESRV_MAX_PLANES; p++) {
        const framesrv_plane *pl = &info->planes[p];
        for (size_t y = 0; y < pl->height; y++) {
            const uint8_t *row = pl->data + y * pl->stride;
            unsigned c = row_start(p, y, info->seq);
            for (size_t x = 0; x < pl->row_bytes; x += 256) {
                size_t n = pl->row_bytes - x < 256 ? pl->row_bytes - x : 256;
                const uint8_t *want = r + ((c + x) & 0xFF);
                if (memcmp(row + x, want, n) == 0) continue;
                for (size_t i = 0; i < n; i++) bad += row[x + i] != want[i];
            }
        }
    }
    return bad;
}
