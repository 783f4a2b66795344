/*
 * device.c: finding a CUDA device (by ordinal for a producer, by UUID for a consumer), its
 * primary context, and the driver's errors as one line (device.h).
 */
#include "device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fsi_cuda_fail(fs_cuda_result result, const char *what)
{
    return fsi_fail(FRAMESRV_E_SYSTEM, "%s: %s", what, fs_cuda_error_text(result));
}

/* $FRAMESRV_CUDA_NO_MEMOPS=1 forces the CPU path of 4.5 step 4 (the GPU suite runs both). */
static bool memops_disabled(void)
{
    const char *v = getenv("FRAMESRV_CUDA_NO_MEMOPS");
    return v && strcmp(v, "1") == 0;
}

static int attribute(const fsi_device *d, int which)
{
    int value = 0;
    if (d->cu->cuDeviceGetAttribute(&value, which, d->dev) != FS_CU_SUCCESS) return 0;
    return value;
}

/* Fills everything but the context from device `dev` of ordinal `ordinal`. */
static int describe(fsi_device *d, fs_cuda_device dev, int ordinal)
{
    fs_cuda_uuid uuid;
    fs_cuda_result r = d->cu->cuDeviceGetUuid(&uuid, dev);
    if (r != FS_CU_SUCCESS) return fsi_cuda_fail(r, "cuDeviceGetUuid");
    d->dev = dev;
    d->ordinal = ordinal;
    memcpy(d->uuid, uuid.bytes, sizeof d->uuid);
    fs_cuda_uuid_text(d->uuid, d->uuid_text);
    /* The v2 memops (CUDA 11.7+) need only this attribute; ..._STREAM_MEM_OPS_V1 is about the
     * v1 entry points and a kernel-module option, and is 0 on a default driver (4.5 step 4). */
    d->memops = attribute(d, FS_CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS) != 0 && !memops_disabled();
    return FRAMESRV_OK;
}

static int retain(fsi_device *d)
{
    fs_cuda_result r = d->cu->cuDevicePrimaryCtxRetain(&d->ctx, d->dev);
    if (r != FS_CU_SUCCESS) {
        d->ctx = NULL;
        return fsi_cuda_fail(r, "cuDevicePrimaryCtxRetain");
    }
    return FRAMESRV_OK;
}

static int load(fsi_device *d, const char *who)
{
    memset(d, 0, sizeof *d);
    const char *why = fs_cuda_load();
    if (why) return fsi_fail(FRAMESRV_E_MEMORY, "%s: %s", who, why);
    d->cu = fs_cuda_api_get();
    return FRAMESRV_OK;
}

int fsi_device_by_ordinal(fsi_device *d, int ordinal)
{
    int rc = load(d, "a CUDA producer needs the CUDA driver"), count = 0;
    if (rc != FRAMESRV_OK) return rc;
    fs_cuda_device dev;
    d->cu->cuDeviceGetCount(&count);
    if (ordinal < 0 || ordinal >= count || d->cu->cuDeviceGet(&dev, ordinal) != FS_CU_SUCCESS)
        return fsi_fail(FRAMESRV_E_MEMORY, "producer: cuda_device %d: this process sees %d CUDA device(s) (CUDA_VISIBLE_DEVICES?)",
                        ordinal, count);
    if ((rc = describe(d, dev, ordinal)) != FRAMESRV_OK) return rc;
    if (!attribute(d, FS_CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED) ||
        !attribute(d, FS_CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED))
        return fsi_fail(FRAMESRV_E_MEMORY, "producer: CUDA device %d (%s) cannot export memory as a file descriptor "
                        "(cuMemCreate with CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), which a CUDA stream needs", ordinal, d->uuid_text);
    return retain(d);
}

int fsi_device_by_uuid(fsi_device *d, const uint8_t uuid[16], const char *stream)
{
    char want[41];
    fs_cuda_uuid_text(uuid, want);
    char who[160];
    snprintf(who, sizeof who, "stream '%s' holds its frames on CUDA device %s, but this process cannot use CUDA", stream, want);
    int rc = load(d, who), count = 0;
    if (rc != FRAMESRV_OK) return rc;
    d->cu->cuDeviceGetCount(&count);
    for (int i = 0; i < count; i++) {
        fs_cuda_device dev;
        if (d->cu->cuDeviceGet(&dev, i) != FS_CU_SUCCESS || describe(d, dev, i) != FRAMESRV_OK) continue;
        if (memcmp(d->uuid, uuid, sizeof d->uuid) == 0) return retain(d);
    }
    return fsi_fail(FRAMESRV_E_MEMORY, "stream '%s' holds its frames on CUDA device %s, which is not among the %d this process "
                    "sees: run it where that device is visible (CUDA_VISIBLE_DEVICES), or read a host copy of the stream", stream,
                    want, count);
}

int fsi_device_copy(fsi_device *to, const fsi_device *from)
{
    *to = *from;
    return retain(to);
}

void fsi_device_release(fsi_device *d)
{
    if (d->cu && d->ctx) d->cu->cuDevicePrimaryCtxRelease(d->dev);
    d->ctx = NULL;
}

int fsi_device_push(const fsi_device *d)
{
    fs_cuda_result r = d->cu->cuCtxPushCurrent(d->ctx);
    return r == FS_CU_SUCCESS ? FRAMESRV_OK : fsi_cuda_fail(r, "cuCtxPushCurrent");
}

void fsi_device_pop(const fsi_device *d)
{
    fs_cuda_context ignored;
    d->cu->cuCtxPopCurrent(&ignored);
}
