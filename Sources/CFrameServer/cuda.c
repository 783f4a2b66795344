// cuda.c: loads the CUDA driver (libcuda.so.1) at run time for CFrameServerCUDA.h, so that
// neither the Swift library nor libframesrv (which compiles this file through
// clients/c/src/cuda_loader.c) needs CUDA to build. _GNU_SOURCE is set here, never in the
// public header.
#define _GNU_SOURCE
#include "CFrameServerCUDA.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static fs_cuda_api api;
static const char *load_error;        // NULL once loaded
static char load_text[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

// Each entry point: the table's field and the symbol libcuda exports for it (cuda.h's
// macro maps the plain name to the versioned one for these; the _v2 forms came with
// CUDA 11.7 for the stream memory operations, earlier for the others).
#define ENTRY(field, symbol) { offsetof(fs_cuda_api, field), symbol }
static const struct { size_t offset; const char *symbol; } entries[] = {
    ENTRY(cuInit, "cuInit"),
    ENTRY(cuDriverGetVersion, "cuDriverGetVersion"),
    ENTRY(cuGetErrorName, "cuGetErrorName"),
    ENTRY(cuGetErrorString, "cuGetErrorString"),
    ENTRY(cuDeviceGetCount, "cuDeviceGetCount"),
    ENTRY(cuDeviceGet, "cuDeviceGet"),
    ENTRY(cuDeviceGetName, "cuDeviceGetName"),
    ENTRY(cuDeviceGetUuid, "cuDeviceGetUuid_v2"),
    ENTRY(cuDeviceGetAttribute, "cuDeviceGetAttribute"),
    ENTRY(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    ENTRY(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
    ENTRY(cuCtxPushCurrent, "cuCtxPushCurrent_v2"),
    ENTRY(cuCtxPopCurrent, "cuCtxPopCurrent_v2"),
    ENTRY(cuCtxSynchronize, "cuCtxSynchronize"),
    ENTRY(cuMemGetInfo, "cuMemGetInfo_v2"),
    ENTRY(cuMemGetAllocationGranularity, "cuMemGetAllocationGranularity"),
    ENTRY(cuMemCreate, "cuMemCreate"),
    ENTRY(cuMemRelease, "cuMemRelease"),
    ENTRY(cuMemExportToShareableHandle, "cuMemExportToShareableHandle"),
    ENTRY(cuMemImportFromShareableHandle, "cuMemImportFromShareableHandle"),
    ENTRY(cuMemAddressReserve, "cuMemAddressReserve"),
    ENTRY(cuMemAddressFree, "cuMemAddressFree"),
    ENTRY(cuMemMap, "cuMemMap"),
    ENTRY(cuMemUnmap, "cuMemUnmap"),
    ENTRY(cuMemSetAccess, "cuMemSetAccess"),
    ENTRY(cuMemHostRegister, "cuMemHostRegister_v2"),
    ENTRY(cuMemHostUnregister, "cuMemHostUnregister"),
    ENTRY(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2"),
    ENTRY(cuStreamSynchronize, "cuStreamSynchronize"),
    ENTRY(cuMemcpy2DAsync, "cuMemcpy2DAsync_v2"),
    ENTRY(cuStreamWaitValue64, "cuStreamWaitValue64_v2"),
    ENTRY(cuStreamWriteValue64, "cuStreamWriteValue64_v2"),
};

static void load(void)
{
    const char *path = getenv("FRAMESRV_LIBCUDA");
    if (path == NULL || *path == '\0') path = "libcuda.so.1";
    // RTLD_LOCAL: the driver's symbols stay out of the process's namespace (the CUDA runtime
    // of the application opens its own handle to the same library).
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        snprintf(load_text, sizeof load_text, "cannot load the CUDA driver %s (%s): is the NVIDIA driver installed?", path,
                 why ? why : "unknown error");
        load_error = load_text;
        return;
    }
    fs_cuda_api table;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        void *f = dlsym(lib, entries[i].symbol);
        if (f == NULL) {
            snprintf(load_text, sizeof load_text, "the CUDA driver %s has no %s: framesrv needs a driver of CUDA 11.7 or newer",
                     path, entries[i].symbol);
            load_error = load_text;
            dlclose(lib);
            return;
        }
        memcpy((char *)&table + entries[i].offset, &f, sizeof f);   // object to function pointer, as dlsym intends
    }
    fs_cuda_result r = table.cuInit(0);
    if (r != FS_CU_SUCCESS) {
        const char *name = NULL;
        table.cuGetErrorName(r, &name);
        snprintf(load_text, sizeof load_text, "the CUDA driver %s failed to start (cuInit: %s, CUresult %d)", path,
                 name ? name : "unknown error", r);
        load_error = load_text;
        return;   // the library stays loaded: the driver may hold it anyway
    }
    api = table;
    load_error = NULL;
}

const char *fs_cuda_load(void)
{
    pthread_once(&load_once, load);
    return load_error;
}

const fs_cuda_api *fs_cuda_api_get(void)
{
    return fs_cuda_load() == NULL ? &api : NULL;
}

const char *fs_cuda_error_text(fs_cuda_result result)
{
    static _Thread_local char text[160];
    const char *name = NULL, *description = NULL;
    if (fs_cuda_load() == NULL) {
        api.cuGetErrorName(result, &name);
        api.cuGetErrorString(result, &description);
    }
    if (name && description) snprintf(text, sizeof text, "%s (%s)", name, description);
    else if (name) snprintf(text, sizeof text, "%s", name);
    else snprintf(text, sizeof text, "CUresult %d", result);
    return text;
}

void fs_cuda_uuid_text(const uint8_t uuid[16], char out[41])
{
    int n = snprintf(out, 41, "GPU-");
    for (int i = 0; i < 16; i++) {
        n += snprintf(out + n, (size_t)(41 - n), "%02x", uuid[i]);
        if (i == 3 || i == 5 || i == 7 || i == 9) n += snprintf(out + n, (size_t)(41 - n), "-");
    }
}
