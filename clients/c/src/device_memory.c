/*
 * device_memory.c: one epoch's device allocation (PROTOCOL.md 4.5): the producer's
 * cuMemCreate, exported once as a descriptor, and each consumer's import of it.
 */
#include "device.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

static fs_cuda_alloc_prop properties(const fsi_device *d)
{
    fs_cuda_alloc_prop prop = { 0 };
    prop.type = FS_CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requested_handle_types = FS_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = FS_CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = d->ordinal;
    return prop;
}

/* Reserves an address range for m->size bytes, maps m->handle there and sets `flags`. */
static fs_cuda_result map(fsi_device_memory *m, int flags)
{
    const fs_cuda_api *cu = m->device.cu;
    fs_cuda_result r = cu->cuMemAddressReserve(&m->base, m->size, 0, 0, 0);
    if (r != FS_CU_SUCCESS) return m->base = 0, r;
    if ((r = cu->cuMemMap(m->base, m->size, 0, m->handle, 0)) != FS_CU_SUCCESS) {
        cu->cuMemAddressFree(m->base, m->size);
        return m->base = 0, r;
    }
    fs_cuda_access_desc access = { .location = { FS_CU_MEM_LOCATION_TYPE_DEVICE, m->device.ordinal }, .flags = flags };
    return cu->cuMemSetAccess(m->base, m->size, &access, 1);
}

static fsi_device_memory *allocate(const fsi_device *d)
{
    fsi_device_memory *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->fd = -1;
    if (fsi_device_copy(&m->device, d) != FRAMESRV_OK) {
        free(m);
        return NULL;
    }
    return m;
}

/* Creates and exports the allocation with the context pushed. */
static int create(fsi_device_memory *m, size_t granularity_for)
{
    const fs_cuda_api *cu = m->device.cu;
    fs_cuda_alloc_prop prop = properties(&m->device);
    size_t granularity = 0;
    fs_cuda_result r = cu->cuMemGetAllocationGranularity(&granularity, &prop, FS_CU_MEM_ALLOC_GRANULARITY_MINIMUM);
    if (r != FS_CU_SUCCESS || granularity == 0) return fsi_cuda_fail(r, "cuMemGetAllocationGranularity");
    m->size = (granularity_for + granularity - 1) / granularity * granularity;
    if ((r = cu->cuMemCreate(&m->handle, m->size, &prop, 0)) != FS_CU_SUCCESS) return fsi_cuda_fail(r, "cuMemCreate");
    m->has_handle = true;
    if ((r = cu->cuMemExportToShareableHandle(&m->fd, m->handle, FS_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0)) != FS_CU_SUCCESS) {
        m->fd = -1;
        return fsi_cuda_fail(r, "cuMemExportToShareableHandle (POSIX file descriptor)");
    }
    if ((r = map(m, FS_CU_MEM_ACCESS_FLAGS_PROT_READWRITE)) != FS_CU_SUCCESS) return fsi_cuda_fail(r, "map the new allocation");
    return FRAMESRV_OK;
}

int fsi_device_memory_create(const fsi_device *d, uint64_t slot_bytes, uint32_t slots, fsi_device_memory **out)
{
    fsi_device_memory *m = allocate(d);
    if (!m) return fsi_fail(FRAMESRV_E_NO_MEMORY, "out of memory for a device pool");
    m->slot_stride = (size_t)((slot_bytes + 4095) / 4096 * 4096);
    int rc = fsi_device_push(d);
    if (rc == FRAMESRV_OK) {
        rc = create(m, m->slot_stride * slots);
        fsi_device_pop(d);
    }
    if (rc != FRAMESRV_OK) {
        fsi_device_memory_free(m);
        return rc;
    }
    *out = m;
    return FRAMESRV_OK;
}

/* Read-only where the device takes it (the pool is the producer's to write), else read-write. */
static int import(fsi_device_memory *m, int fd)
{
    const fs_cuda_api *cu = m->device.cu;
    fs_cuda_result r = cu->cuMemImportFromShareableHandle(&m->handle, (void *)(intptr_t)fd, FS_CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    if (r != FS_CU_SUCCESS) return fsi_cuda_fail(r, "cuMemImportFromShareableHandle");
    m->has_handle = true;
    m->read_only = true;
    if ((r = map(m, FS_CU_MEM_ACCESS_FLAGS_PROT_READ)) != FS_CU_SUCCESS && m->base != 0) {
        m->read_only = false;
        fs_cuda_access_desc access = { .location = { FS_CU_MEM_LOCATION_TYPE_DEVICE, m->device.ordinal },
                                       .flags = FS_CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
        r = cu->cuMemSetAccess(m->base, m->size, &access, 1);
    }
    if (r != FS_CU_SUCCESS) return fsi_cuda_fail(r, "map the stream's allocation");
    /* The mapping keeps the memory; the handle is not needed any more. */
    cu->cuMemRelease(m->handle);
    m->has_handle = false;
    return FRAMESRV_OK;
}

int fsi_device_memory_import(const fsi_device *d, int fd, size_t size, size_t slot_stride, fsi_device_memory **out)
{
    fsi_device_memory *m = allocate(d);
    if (!m) return fsi_fail(FRAMESRV_E_NO_MEMORY, "out of memory for a device pool");
    m->size = size;
    m->slot_stride = slot_stride;
    int rc = fsi_device_push(d);
    if (rc == FRAMESRV_OK) {
        rc = import(m, fd);
        fsi_device_pop(d);
    }
    if (rc != FRAMESRV_OK) {
        fsi_device_memory_free(m);
        return rc;
    }
    *out = m;
    return FRAMESRV_OK;
}

void fsi_device_memory_free(fsi_device_memory *m)
{
    if (!m) return;
    const fs_cuda_api *cu = m->device.cu;
    if (m->device.ctx && fsi_device_push(&m->device) == FRAMESRV_OK) {
        /* A kernel queued before the last release may still read (or write) the memory. */
        if (m->base) cu->cuCtxSynchronize();
        if (m->base) cu->cuMemUnmap(m->base, m->size);
        if (m->base) cu->cuMemAddressFree(m->base, m->size);
        if (m->has_handle) cu->cuMemRelease(m->handle);
        fsi_device_pop(&m->device);
    }
    if (m->fd >= 0) close(m->fd);
    fsi_device_release(&m->device);
    free(m);
}
