/*
 * _framesrv_cuda.c: a CUDA frame's planes (DevicePlane), for PyTorch, CuPy and any consumer of
 * DLPack (__dlpack__, __dlpack_device__) or the CUDA Array Interface (version 3), with no copy.
 *
 * A DevicePlane is to a CUDA frame what a numpy array is to a host frame: it counts as one
 * export of its Frame while it is alive, and every DLPack capsule (and so every tensor made
 * from it) holds the DevicePlane, so the frame is given back only when the last view is gone.
 *
 * Streams (ints: a CUstream handle; 1 and 2 are CU_STREAM_LEGACY and CU_STREAM_PER_THREAD, 0
 * the legacy default stream): a frame remembers where its planes are safe to use (ready: the
 * CPU waited, or the waits were queued on one stream) and the stream it was last given (next,
 * reserve, release, publish, __dlpack__). __dlpack__(stream=S) queues on S the waits that make
 * S safe (framesrv_frame_wait_on) unless S is already, and S becomes the frame's stream; the
 * frame's final release (or publish) is ordered on that stream, else on the legacy default one.
 */
#include "_framesrv.h"

#include <stdlib.h>
#include <string.h>

/* ---- DLPack (dlpack.h 1.0, the parts used) ------------------------------------------- */

enum { DL_CUDA = 2, DL_UINT = 1 };
#define DL_READ_ONLY 1ull

typedef struct { int32_t device_type, device_id; } dl_device;
typedef struct { uint8_t code, bits; uint16_t lanes; } dl_dtype;
typedef struct {
    void *data;
    dl_device device;
    int32_t ndim;
    dl_dtype dtype;
    int64_t *shape, *strides;  /* strides in elements */
    uint64_t byte_offset;
} dl_tensor;
typedef struct dl_managed {
    dl_tensor tensor;
    void *ctx;
    void (*deleter)(struct dl_managed *self);
} dl_managed;
typedef struct dl_managed_v {
    uint32_t major, minor;
    void *ctx;
    void (*deleter)(struct dl_managed_v *self);
    uint64_t flags;
    dl_tensor tensor;
} dl_managed_v;

/* One export: the managed tensor first (its address is the export's), then shape and strides. */
typedef struct {
    union { dl_managed m; dl_managed_v v; } u;
    int64_t shape[3], strides[3];
} dl_export;

static const char CAPSULE[] = "dltensor", CAPSULE_V[] = "dltensor_versioned";

typedef struct {
    PyObject_HEAD
    FrameObject *frame;
    uint32_t index;
    framesrv_device_plane dp;
    int ndim;
    PyObject *weakrefs;
} DevicePlaneObject;

static PyTypeObject DevicePlaneType;

/* The deleter may run in any thread (a tensor freed by torch's allocator), with or without the
 * GIL; after the interpreter's end there is nothing left to give back. */
static void drop_context(void *ctx)
{
    if (!ctx || !Py_IsInitialized()) return;
#if PY_VERSION_HEX >= 0x030D0000
    if (Py_IsFinalizing()) return;
#else
    if (_Py_IsFinalizing()) return;
#endif
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF((PyObject *)ctx);
    PyGILState_Release(g);
}

static void delete_managed(dl_managed *m)
{
    drop_context(m->ctx);
    free(m);
}

static void delete_managed_v(dl_managed_v *m)
{
    drop_context(m->ctx);
    free(m);
}

/* A capsule nobody consumed (its name unchanged) still owns its tensor. */
static void capsule_destructor(PyObject *capsule)
{
    if (PyCapsule_IsValid(capsule, CAPSULE)) {
        dl_managed *m = PyCapsule_GetPointer(capsule, CAPSULE);
        m->deleter(m);
    } else if (PyCapsule_IsValid(capsule, CAPSULE_V)) {
        dl_managed_v *m = PyCapsule_GetPointer(capsule, CAPSULE_V);
        m->deleter(m);
    }
}

/* ---- the plane ----------------------------------------------------------------------- */

static int plane_readonly(const DevicePlaneObject *pl)
{
    return !pl->frame->owner->is_producer || pl->frame->state != FRAME_LIVE;
}

/* Its frame still holds the slot (a producer's published frame is kept while planes live). */
static int plane_usable(DevicePlaneObject *pl)
{
    FrameObject *f = pl->frame;
    if (f->owner->forked) return owner_usable(f->owner);
    if (f->state == FRAME_DONE || f->state == FRAME_ABANDONED || !f->frame) {
        PyErr_SetString(PyExc_BufferError, "the frame was released");
        return 0;
    }
    return 1;
}

PyObject *device_plane_new(FrameObject *f, uint32_t i)
{
    framesrv_device_plane dp;
    int status = framesrv_frame_device_plane(f->frame, i, &dp);
    if (status < 0) return raise_status(status);
    if ((dp.sample_bytes != 1 && dp.sample_bytes != 2) || dp.pitch % dp.sample_bytes != 0)
        return raise_error(BadData, FRAMESRV_E_BAD_DATA, "plane %u: %u-byte samples at a pitch of %zu bytes", i, dp.sample_bytes,
                           dp.pitch);
    DevicePlaneObject *pl = PyObject_New(DevicePlaneObject, &DevicePlaneType);
    if (!pl) return NULL;
    Py_INCREF(f);
    pl->frame = f;
    pl->index = i;
    pl->dp = dp;
    pl->ndim = dp.components > 1 ? 3 : 2;
    pl->weakrefs = NULL;
    f->exports++;   /* until it dies: the rule of a numpy array's base */
    return (PyObject *)pl;
}

static void plane_dealloc(DevicePlaneObject *pl)
{
    if (pl->weakrefs) PyObject_ClearWeakRefs((PyObject *)pl);
    FrameObject *f = pl->frame;
    f->exports--;
    frame_settle(f);
    Py_DECREF(f);
    PyObject_Free(pl);
}

/* Shape (rows, samples[, components]) and strides (bytes, or elements): as the host views have them. */
static void plane_geometry(const DevicePlaneObject *pl, int64_t shape[3], int64_t strides[3], int bytes)
{
    const framesrv_device_plane *d = &pl->dp;
    int64_t unit = bytes ? 1 : d->sample_bytes;
    shape[0] = d->height;
    shape[1] = d->width;
    shape[2] = d->components;
    strides[0] = (int64_t)d->pitch / unit;
    strides[1] = (int64_t)(d->components * d->sample_bytes) / unit;
    strides[2] = (int64_t)d->sample_bytes / unit;
}

int stream_arg(PyObject *arg, uint64_t *stream, int *given)
{
    *stream = 0;
    *given = 0;
    if (arg == Py_None) return 0;
    if (!PyLong_Check(arg)) {
        PyErr_Format(PyExc_TypeError, "stream: an int CUstream handle (or an object with .cuda_stream or __cuda_stream__, "
                     "given to framesrv's Python API), not %.80s", Py_TYPE(arg)->tp_name);
        return -1;
    }
    long long v = PyLong_AsLongLong(arg);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0) {
        PyErr_Format(PyExc_ValueError, "stream %lld: a CUstream handle is >= 0", v);
        return -1;
    }
    *stream = (uint64_t)v;
    *given = 1;
    return 0;
}

int frame_order_on(FrameObject *f, uint64_t stream)
{
    if (f->ready != READY_ANYWHERE && !(f->ready == READY_ON && f->ready_on == stream)) {
        int status = framesrv_frame_wait_on(f->frame, (void *)(uintptr_t)stream);
        if (status < 0) return raise_status(status), -1;
        f->ready = READY_ON;
        f->ready_on = stream;
    }
    f->stream = stream;
    f->has_stream = 1;
    return 0;
}

/* ---- __dlpack__ ------------------------------------------------------------------------ */

/* dl_device and copy: only this device, and never a copy. */
static int dlpack_options(DevicePlaneObject *pl, PyObject *dl_device, PyObject *copy)
{
    if (copy == Py_True) {
        PyErr_SetString(PyExc_BufferError, "__dlpack__(copy=True): framesrv exports a frame's planes in place; copy the "
                        "tensor instead (tensor.clone())");
        return -1;
    }
    if (dl_device == Py_None) return 0;
    int type = -1, id = -1;
    if (!PyArg_ParseTuple(dl_device, "ii", &type, &id)) return -1;
    if (type == DL_CUDA && id == pl->frame->device) return 0;
    PyErr_Format(PyExc_BufferError, "__dlpack__(dl_device=(%d, %d)): the plane is on (%d, %d) and is exported in place", type,
                 id, DL_CUDA, pl->frame->device);
    return -1;
}

/* stream None: the legacy default stream (the DLPack rule for CUDA); -1: no ordering at all. */
static int dlpack_stream(DevicePlaneObject *pl, PyObject *stream)
{
    if (PyLong_Check(stream)) {
        long long v = PyLong_AsLongLong(stream);
        if (v == -1 && PyErr_Occurred()) return -1;
        if (v == -1) return 0;
    }
    uint64_t handle;
    int given;
    if (stream_arg(stream, &handle, &given) < 0) return -1;
    return frame_order_on(pl->frame, handle);
}

static void fill_tensor(DevicePlaneObject *pl, dl_tensor *t, dl_export *e)
{
    plane_geometry(pl, e->shape, e->strides, 0);
    *t = (dl_tensor){ .data = (void *)(uintptr_t)pl->dp.ptr, .device = { DL_CUDA, pl->frame->device }, .ndim = pl->ndim,
                      .dtype = { DL_UINT, (uint8_t)(8 * pl->dp.sample_bytes), 1 }, .shape = e->shape, .strides = e->strides,
                      .byte_offset = 0 };
}

/* A capsule "dltensor_versioned" (DLPack 1.0, read-only flagged unless writable) when the
 * consumer takes version 1, else "dltensor". It holds the plane (and so the frame). */
static PyObject *make_capsule(DevicePlaneObject *pl, int versioned)
{
    dl_export *e = calloc(1, sizeof *e);
    if (!e) return PyErr_NoMemory();
    if (versioned) {
        e->u.v = (dl_managed_v){ .major = 1, .minor = 0, .ctx = pl, .deleter = delete_managed_v,
                                 .flags = plane_readonly(pl) ? DL_READ_ONLY : 0 };
        fill_tensor(pl, &e->u.v.tensor, e);
    } else {
        e->u.m = (dl_managed){ .ctx = pl, .deleter = delete_managed };
        fill_tensor(pl, &e->u.m.tensor, e);
    }
    PyObject *capsule = PyCapsule_New(e, versioned ? CAPSULE_V : CAPSULE, capsule_destructor);
    if (!capsule) {
        free(e);
        return NULL;
    }
    Py_INCREF(pl);   /* the tensor's: dropped by the deleter */
    return capsule;
}

static PyObject *plane_dlpack(DevicePlaneObject *pl, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO", kwlist, &stream, &max_version, &dl_device, &copy)) return NULL;
    if (!plane_usable(pl) || dlpack_options(pl, dl_device, copy) < 0) return NULL;
    long major = 0;
    if (max_version != Py_None) {
        PyObject *first = PySequence_Check(max_version) ? PySequence_GetItem(max_version, 0) : NULL;
        major = first ? PyLong_AsLong(first) : -1;
        Py_XDECREF(first);
        if (major == -1 && PyErr_Occurred()) return NULL;
    }
    if (dlpack_stream(pl, stream) < 0) return NULL;
    return make_capsule(pl, major >= 1);
}

static PyObject *plane_dlpack_device(DevicePlaneObject *pl, PyObject *unused)
{
    (void)unused;
    return Py_BuildValue("(ii)", DL_CUDA, pl->frame->device);
}

/* ---- __cuda_array_interface__ (version 3) ------------------------------------------------ */

static PyObject *tuple_of(const int64_t *v, int n)
{
    PyObject *t = PyTuple_New(n);
    for (int i = 0; t && i < n; i++) {
        PyObject *x = PyLong_FromLongLong(v[i]);
        if (!x) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SET_ITEM(t, i, x);
    }
    return t;
}

/* "stream": where the planes are safe to use (the consumer synchronizes with it): None once the
 * CPU waited; the legacy default stream is 1 there (0 is not allowed). */
static PyObject *cai_stream(const FrameObject *f)
{
    if (f->ready != READY_ON) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(f->ready_on == 0 ? 1 : f->ready_on);
}

static PyObject *plane_cai(DevicePlaneObject *pl, void *unused)
{
    (void)unused;
    if (!plane_usable(pl)) return NULL;
    int64_t shape[3], strides[3];
    plane_geometry(pl, shape, strides, 1);
    return Py_BuildValue("{s:N,s:s,s:(KO),s:i,s:N,s:N}", "shape", tuple_of(shape, pl->ndim),
                         "typestr", pl->dp.sample_bytes == 2 ? "<u2" : "|u1", "data", (unsigned long long)pl->dp.ptr,
                         plane_readonly(pl) ? Py_True : Py_False, "version", 3, "strides", tuple_of(strides, pl->ndim),
                         "stream", cai_stream(pl->frame));
}

/* ---- attributes ------------------------------------------------------------------------ */

static PyObject *plane_get_ptr(DevicePlaneObject *pl, void *unused)
{
    (void)unused;
    return PyLong_FromUnsignedLongLong(pl->dp.ptr);
}

static PyObject *plane_get_shape(DevicePlaneObject *pl, void *unused)
{
    (void)unused;
    int64_t shape[3], strides[3];
    plane_geometry(pl, shape, strides, 1);
    return tuple_of(shape, pl->ndim);
}

static PyObject *plane_get_strides(DevicePlaneObject *pl, void *unused)
{
    (void)unused;
    int64_t shape[3], strides[3];
    plane_geometry(pl, shape, strides, 1);
    return tuple_of(strides, pl->ndim);
}

static PyObject *plane_get_typestr(DevicePlaneObject *pl, void *unused)
{
    (void)unused;
    return PyUnicode_FromString(pl->dp.sample_bytes == 2 ? "<u2" : "|u1");
}

static PyObject *plane_get_readonly(DevicePlaneObject *pl, void *unused)
{
    (void)unused;
    return PyBool_FromLong(plane_readonly(pl));
}

static PyObject *plane_get_device(DevicePlaneObject *pl, void *unused)
{
    (void)unused;
    return PyUnicode_FromFormat("cuda:%d", pl->frame->device);
}

static PyObject *plane_repr(DevicePlaneObject *pl)
{
    return PyUnicode_FromFormat("<framesrv.DevicePlane %u of frame %llu: %ux%u%s %s on cuda:%d, pitch %zu>", pl->index,
                                (unsigned long long)pl->frame->in->seq, pl->dp.width, pl->dp.height,
                                pl->dp.components > 1 ? "xC" : "", pl->dp.sample_bytes == 2 ? "uint16" : "uint8",
                                pl->frame->device, pl->dp.pitch);
}

PyObject *frame_device_plane(FrameObject *f, PyObject *arg)
{
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (!frame_check(f)) return NULL;
    framesrv_device_plane d;
    int status = framesrv_frame_device_plane(f->frame, i < 0 ? UINT32_MAX : (uint32_t)i, &d);
    if (status < 0) return raise_status(status);
    return Py_BuildValue("{s:K,s:n,s:n,s:n,s:I,s:I,s:I,s:I}", "ptr", (unsigned long long)d.ptr, "pitch", (Py_ssize_t)d.pitch,
                         "size", (Py_ssize_t)d.size, "row_bytes", (Py_ssize_t)d.row_bytes, "width", d.width, "height", d.height,
                         "components", d.components, "sample_bytes", d.sample_bytes);
}

static PyMethodDef plane_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))plane_dlpack, METH_VARARGS | METH_KEYWORDS,
     "__dlpack__(*, stream=None, max_version=None, dl_device=None, copy=None): a DLPack capsule viewing the plane."},
    {"__dlpack_device__", (PyCFunction)plane_dlpack_device, METH_NOARGS, "(kDLCUDA, the device's ordinal)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef plane_getset[] = {
    {"__cuda_array_interface__", (getter)plane_cai, NULL, "The CUDA Array Interface, version 3.", NULL},
    {"ptr", (getter)plane_get_ptr, NULL, "the CUdeviceptr of row 0", NULL},
    {"shape", (getter)plane_get_shape, NULL, "(rows, samples[, components])", NULL},
    {"strides", (getter)plane_get_strides, NULL, "in bytes: (pitch, bytes per sample[, bytes per component])", NULL},
    {"typestr", (getter)plane_get_typestr, NULL, "'|u1' or '<u2'", NULL},
    {"readonly", (getter)plane_get_readonly, NULL, "a consumer's planes, and a producer's once published", NULL},
    {"device", (getter)plane_get_device, NULL, "'cuda:N'", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject DevicePlaneType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "framesrv._framesrv.DevicePlane",
    .tp_basicsize = sizeof(DevicePlaneObject),
    .tp_dealloc = (destructor)plane_dealloc,
    .tp_repr = (reprfunc)plane_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One plane of a CUDA frame: __dlpack__, __dlpack_device__ and __cuda_array_interface__ (no copy).",
    .tp_methods = plane_methods,
    .tp_getset = plane_getset,
    .tp_weaklistoffset = offsetof(DevicePlaneObject, weakrefs),
};

int cuda_add_types(PyObject *m)
{
    if (PyType_Ready(&DevicePlaneType) < 0) return -1;
    Py_INCREF(&DevicePlaneType);
    return PyModule_AddObject(m, "DevicePlane", (PyObject *)&DevicePlaneType);
}
