// kernels.cu: the GPU suite's kernels (built by scripts/test-gpu with nvcc). One block walks a
// plane row by row and sleeps after each row, so a write or a read takes long enough for a
// missing fence to show: a reader that does not wait for the writer sees rows of the old
// frame, and a writer that does not wait for the reader changes rows the reader has yet to read.
// The pattern is framesrv's test pattern: byte (plane p, row y, byte x) = x + 2y + 3 seq + 61 p.
#include <cuda_runtime.h>
#include <stdint.h>

__device__ static inline uint8_t expected(uint32_t x, uint32_t y, uint64_t seq, uint32_t plane)
{
    return (uint8_t)(x + 2u * y + 3u * (uint32_t)seq + 61u * plane);
}

__global__ void fill(uint8_t *base, size_t pitch, uint32_t row_bytes, uint32_t rows, uint64_t seq, uint32_t plane, uint32_t sleep_ns)
{
    for (uint32_t y = 0; y < rows; y++) {
        for (uint32_t x = threadIdx.x; x < row_bytes; x += blockDim.x) base[y * pitch + x] = expected(x, y, seq, plane);
        if (sleep_ns) __nanosleep(sleep_ns);
        __syncthreads();
    }
}

__global__ void verify(const uint8_t *base, size_t pitch, uint32_t row_bytes, uint32_t rows, uint64_t seq, uint32_t plane,
                       uint32_t sleep_ns, unsigned long long *mismatches, unsigned int *per_frame, uint32_t per_frame_count)
{
    unsigned long long bad = 0;
    for (uint32_t y = 0; y < rows; y++) {
        for (uint32_t x = threadIdx.x; x < row_bytes; x += blockDim.x) bad += base[y * pitch + x] != expected(x, y, seq, plane);
        if (sleep_ns) __nanosleep(sleep_ns);
        __syncthreads();
    }
    if (bad) atomicAdd(mismatches, bad);
    if (bad && per_frame) atomicAdd(&per_frame[seq % per_frame_count], 1u);
}

extern "C" int gpu_fill(uint64_t ptr, size_t pitch, uint32_t row_bytes, uint32_t rows, uint64_t seq, uint32_t plane,
                        uint32_t sleep_ns, void *stream)
{
    fill<<<1, 256, 0, (cudaStream_t)stream>>>((uint8_t *)ptr, pitch, row_bytes, rows, seq, plane, sleep_ns);
    return (int)cudaGetLastError();
}

extern "C" int gpu_verify(uint64_t ptr, size_t pitch, uint32_t row_bytes, uint32_t rows, uint64_t seq, uint32_t plane,
                          uint32_t sleep_ns, unsigned long long *mismatches, unsigned int *per_frame, uint32_t per_frame_count,
                          void *stream)
{
    verify<<<1, 256, 0, (cudaStream_t)stream>>>((const uint8_t *)ptr, pitch, row_bytes, rows, seq, plane, sleep_ns, mismatches,
                                                per_frame, per_frame_count);
    return (int)cudaGetLastError();
}
