/*
 * validate.h: one validator per structure another process writes (validate.c). Not installed.
 */
#ifndef FRAMESRV_VALIDATE_H
#define FRAMESRV_VALIDATE_H

#include "common.h"

/* ---- validation of what another process wrote (validate.c) -------------------------
 * Each returns FRAMESRV_OK or FRAMESRV_E_BAD_DATA with one line naming the file, the
 * field and the value (framesrv_last_error). Pure: they read only what they are given. */

/* The control segment's header (PROTOCOL.md 4.1; ControlSegment.validate): magic, version,
 * every fixed size and offset, slot_count 1..64, the memory kind (4.5: host with fence_offset
 * 0, or CUDA with its fence table after the consumer table), a file large enough for the
 * tables and a rate pair 0/0 or both >= 1. Another version is FRAMESRV_E_VERSION, read no
 * further than the identity prefix (magic, version, producer_pid @36, producer_start_time @40).
 * *memory: FS_MEMORY_HOST or FS_MEMORY_CUDA. */
FSI_HIDDEN int fsi_validate_control(const void *bytes, size_t size, const char *path, uint32_t *slot_count, uint32_t *memory);
/* A pool file of `size` bytes holds slot_count slots of a multiple of 64 bytes, each at
 * least a frame header (Segment.openPool): *slot_bytes is its slot stride. */
FSI_HIDDEN int fsi_validate_pool(size_t size, uint32_t slot_count, const char *path, size_t *slot_bytes);
/* A CUDA stream's pool file: slot_count headers of FS_CUDA_HEADER_SLOT bytes each (4.5). */
FSI_HIDDEN int fsi_validate_header_pool(size_t size, uint32_t slot_count, const char *path);
/* A frame header (a copy taken once: validate the copy, then use only it), as
 * FrameHeader.validate: magic, version, seq == the slot's seq, 1..16384 size, plane_count,
 * every plane inside the slot (offset >= 256), pix_fmt and its name agree (code 0 only for a
 * name outside the table), a known format's rows fit their planes, pts and duration within
 * +-2^62, time base >= 1/1, field_order 0..5, chroma_location 0..6. `path`/`slot` name it. */
FSI_HIDDEN int fsi_validate_frame(const fs_frame *header, uint64_t seq, uint64_t slot_bytes, uint32_t media, const char *path,
                                  uint32_t slot);
/* A CUDA frame header (4.5): as fsi_validate_frame, but every plane inside the device slot
 * (offset >= 0, offset + size <= device_slot_stride). */
FSI_HIDDEN int fsi_validate_device_frame(const fs_frame *header, uint64_t seq, uint64_t device_slot_stride, const char *path,
                                         uint32_t slot);

/* An announcement of `length` bytes (PROTOCOL.md 5), checked in the spec's order: short,
 * bad-magic, version, kind, name-len (1..48), length (the vectors' error names appear in
 * the message). A version mismatch is FRAMESRV_E_VERSION (fatal), the rest BAD_DATA (ignored). */
FSI_HIDDEN int fsi_validate_announce(const void *message, size_t length);

#endif /* FRAMESRV_VALIDATE_H */
