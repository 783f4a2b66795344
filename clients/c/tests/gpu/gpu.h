/*
 * gpu.h: what the GPU suite's programs share: the kernels of kernels.cu, the CUDA runtime
 * calls they make (declared here, so the C files build with gcc alone), and a one-line exit.
 */
#ifndef FRAMESRV_GPU_H
#define FRAMESRV_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int gpu_fill(uint64_t ptr, size_t pitch, uint32_t row_bytes, uint32_t rows, uint64_t seq, uint32_t plane, uint32_t sleep_ns,
             void *stream);
int gpu_verify(uint64_t ptr, size_t pitch, uint32_t row_bytes, uint32_t rows, uint64_t seq, uint32_t plane, uint32_t sleep_ns,
               unsigned long long *mismatches, unsigned int *per_frame, uint32_t per_frame_count, void *stream);

/* The CUDA runtime (libcudart, linked by nvcc). */
int cudaStreamCreateWithFlags(void **stream, unsigned int flags);
int cudaStreamSynchronize(void *stream);
int cudaStreamDestroy(void *stream);
int cudaMalloc(void **ptr, size_t size);
int cudaMemset(void *ptr, int value, size_t size);
int cudaMemcpy(void *dst, const void *src, size_t size, int kind);   /* kind 2: device to host */
int cudaFree(void *ptr);
int cudaSetDevice(int device);
const char *cudaGetErrorString(int error);
#define GPU_NON_BLOCKING 1u
#define GPU_D2H 2

#define GPU_DIE(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), exit(2))
#define GPU_CHECK(call) do { int e_ = (call); if (e_) GPU_DIE("%s: CUDA error %d (%s)", #call, e_, cudaGetErrorString(e_)); } while (0)

#endif
