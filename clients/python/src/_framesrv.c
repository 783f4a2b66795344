/*
 * _framesrv.c: the CPython extension framesrv._framesrv, a thin binding of libframesrv
 * (clients/c/include/framesrv.h), whose sources are compiled into this module.
 *
 * Objects: Consumer, Producer (the library's handles), Frame (a held or reserved frame)
 * and Plane (a buffer-protocol exporter of one plane, which numpy views without a copy).
 *
 * Safety (the decided rule; framesrv/__init__.py documents it for users): every buffer
 * exported by a Plane counts on its Frame (`exports`). A frame given back while buffers
 * are exported is only marked; the slot goes back when the last buffer is released.
 * Frames keep their owner alive, and an owner closed while frames are held closes when
 * the last of them goes (`held`), so a kept array always reads its own frame in a mapped
 * pool, never a recycled slot or an unmapped page.
 *
 * Threads: the waits (next, reserve, open, wait_for_consumers) run without the GIL, in
 * slices of at most 100 ms (signals are checked between slices). A producer's lock is held
 * around each library call. A consumer has two: `wait_lock` around next (which sleeps on
 * the stream's frame_wake inside libframesrv), reopen, fileno and close; `lock` around
 * releases (which may come from any thread, from the garbage collector) and close. A release
 * therefore never waits for a sleeping next: libframesrv's framesrv_frame_release is safe
 * concurrently with framesrv_consumer_next on the same consumer (framesrv.h).
 */
#include "_framesrv.h"

#ifdef FRAMESRV_NUMPY      /* setup.py found numpy's headers: arrays() builds the views directly */
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#endif

#undef _GNU_SOURCE
#include "frame.h"             /* frame->pool: the pool mapping's range (_pool_range) */

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#define SLICE_MS 100

/* ------------------------------------------------------------------------- */
/* Errors                                                                     */
/* ------------------------------------------------------------------------- */

PyObject *Error, *InvalidArgument, *NotFound, *BadData, *SystemCallError, *Busy, *StateError, *NoMemory, *Detached,
    *ZMQError, *HeldFramesError, *MemoryKindError, *ForkedError, *MediaKindError;

static PyObject *error_class(int status)
{
    switch (status) {
    case FRAMESRV_E_INVALID: return InvalidArgument;
    case FRAMESRV_E_NOT_FOUND: return NotFound;
    case FRAMESRV_E_BAD_DATA: return BadData;
    case FRAMESRV_E_SYSTEM: return SystemCallError;
    case FRAMESRV_E_BUSY: return Busy;
    case FRAMESRV_E_STATE: return StateError;
    case FRAMESRV_E_NO_MEMORY: return NoMemory;
    case FRAMESRV_E_DETACHED: return Detached;
    case FRAMESRV_E_ZMQ: return ZMQError;
    case FRAMESRV_E_HELD: return HeldFramesError;
    case FRAMESRV_E_MEMORY: return MemoryKindError;
    case FRAMESRV_E_FORKED: return ForkedError;
    case FRAMESRV_E_MEDIA: return MediaKindError;
    default: return Error;
    }
}

PyObject *raise_error(PyObject *type, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    PyObject *args = Py_BuildValue("(si)", msg, status);
    if (args) {
        PyErr_SetObject(type, args);
        Py_DECREF(args);
    }
    return NULL;
}

PyObject *raise_status(int status)
{
    const char *msg = framesrv_last_error();
    if (!msg || !*msg) msg = framesrv_status_name(status);
    PyObject *args = Py_BuildValue("(si)", msg, status);
    if (args) {
        PyErr_SetObject(error_class(status), args);
        Py_DECREF(args);
    }
    return NULL;
}

/* ------------------------------------------------------------------------- */
/* Waiting in slices without the GIL                                          */
/* ------------------------------------------------------------------------- */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* One try of a wait with a timeout of `ms`; returns a status. */
typedef int (*wait_fn)(void *ctx, int ms);

/* Calls fn in slices of <= SLICE_MS without the GIL (holding lock, if any) until it returns
 * something other than `again` or timeout_ms (-1: forever) has passed; checks for signals
 * between slices. Returns the last status, or INT32_MIN with an exception set. */
static int wait_sliced(wait_fn fn, void *ctx, PyThread_type_lock lock, int timeout_ms, int again)
{
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        uint64_t now = now_ms();
        int slice = SLICE_MS;
        if (deadline != UINT64_MAX) slice = now >= deadline ? 0 : (int)(deadline - now < SLICE_MS ? deadline - now : SLICE_MS);
        int status;
        Py_BEGIN_ALLOW_THREADS
        if (lock) PyThread_acquire_lock(lock, WAIT_LOCK);
        status = fn(ctx, slice);
        if (lock) PyThread_release_lock(lock);
        Py_END_ALLOW_THREADS
        if (status != again || slice == 0 || now_ms() >= deadline) return status;
        if (PyErr_CheckSignals() < 0) return INT32_MIN;
    }
}

static int timeout_ms_of(PyObject *timeout, int *out)
{
    if (timeout == NULL || timeout == Py_None) { *out = -1; return 0; }
    double s = PyFloat_AsDouble(timeout);
    if (s == -1.0 && PyErr_Occurred()) return -1;
    if (s < 0 || s != s) { PyErr_SetString(PyExc_ValueError, "timeout must be >= 0 seconds or None"); return -1; }
    *out = s > 2000000.0 ? 2000000000 : (int)(s * 1000.0 + 0.5);
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Owners (Consumer, Producer) share a head: the lock and the deferred close  */
/* ------------------------------------------------------------------------- */


/* Takes the owner's lock; the GIL is let go only if another thread holds the lock (a
 * wait in progress, which never needs the GIL while it holds the lock). */
static void lock_owner(OwnerObject *o)
{
    if (PyThread_acquire_lock(o->lock, NOWAIT_LOCK)) return;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(o->lock, WAIT_LOCK);
    Py_END_ALLOW_THREADS
}

/* A forked child's close takes no lock (a thread of the parent may have held one at the fork):
 * libframesrv then frees the child's copy only. */
static void owner_close_now(OwnerObject *o)
{
    if (o->closed) return;
    o->closed = 1;
    int locks = !o->forked;
    Py_BEGIN_ALLOW_THREADS
    if (locks) PyThread_acquire_lock(o->wait_lock, WAIT_LOCK);
    if (locks) PyThread_acquire_lock(o->lock, WAIT_LOCK);
    if (o->is_producer) framesrv_producer_close(o->producer);
    else framesrv_consumer_close(o->consumer);
    if (locks) PyThread_release_lock(o->lock);
    if (locks) PyThread_release_lock(o->wait_lock);
    Py_END_ALLOW_THREADS
    o->consumer = NULL;
    o->producer = NULL;
}

static void owner_frame_done(OwnerObject *o)
{
    o->held--;
    if (o->closing && o->held <= 0) owner_close_now(o);
}

/* ForkedError with libframesrv's line ("this consumer of stream 'S' was opened by pid P; ..."). */
static int raise_forked(OwnerObject *o)
{
    int status = FRAMESRV_E_FORKED;
    framesrv_consumer_stats cs;
    framesrv_producer_stats ps;
    if (o->consumer) status = framesrv_consumer_stats_of(o->consumer, &cs);   /* refused at once, no lock */
    else if (o->producer) status = framesrv_producer_stats_of(o->producer, &ps);
    if (status == FRAMESRV_E_FORKED) return raise_status(status), 0;
    PyObject *e = Py_BuildValue("(si)", "this handle was opened by another process; a forked child must open its own",
                                FRAMESRV_E_FORKED);
    if (e) PyErr_SetObject(ForkedError, e);
    Py_XDECREF(e);
    return 0;
}

int owner_usable(OwnerObject *o)
{
    if (o->forked) return raise_forked(o);
    if (o->closing || o->closed) { PyErr_SetString(StateError, "closed"); return 0; }
    return 1;
}

static void owner_dealloc(OwnerObject *o)
{
    owner_close_now(o);     /* frames hold a reference: none is held any more */
    if (o->lock) PyThread_free_lock(o->lock);
    if (o->wait_lock) PyThread_free_lock(o->wait_lock);
    Py_TYPE(o)->tp_free((PyObject *)o);
}

static OwnerObject *owner_new(PyTypeObject *type)
{
    OwnerObject *o = (OwnerObject *)type->tp_alloc(type, 0);
    if (!o) return NULL;
    o->lock = PyThread_allocate_lock();
    o->wait_lock = PyThread_allocate_lock();
    if (!o->lock || !o->wait_lock) { Py_DECREF(o); PyErr_NoMemory(); return NULL; }
    return o;
}

/* close(): ends now if no frame is held, else when the last one is given back. */
static PyObject *owner_close(OwnerObject *o, PyObject *unused)
{
    (void)unused;
    if (o->is_producer && !o->ended && !o->closed && !o->forked && o->producer) {
        o->ended = 1;
        framesrv_producer_end(o->producer, 0);
    }
    o->closing = 1;
    if (o->held <= 0) owner_close_now(o);
    return PyBool_FromLong(o->closed);
}

static PyObject *owner_held(OwnerObject *o, void *unused)
{
    (void)unused;
    return PyLong_FromSsize_t(o->held);
}

static PyObject *owner_closed(OwnerObject *o, void *unused)
{
    (void)unused;
    return PyBool_FromLong(o->closed);
}

static PyObject *owner_get_forked(OwnerObject *o, void *unused)
{
    (void)unused;
    return PyBool_FromLong(o->forked);
}

/* _forked(): this process is a forked child (framesrv's os.register_at_fork hook). */
static PyObject *owner_mark_forked(OwnerObject *o, PyObject *unused)
{
    (void)unused;
    o->forked = 1;
    Py_RETURN_NONE;
}

static PyObject *owner_get_device(OwnerObject *o, void *unused)
{
    (void)unused;
    return PyLong_FromLong(o->memory == FRAMESRV_MEMORY_CUDA ? o->device : -1);
}

/* ------------------------------------------------------------------------- */
/* Frame                                                                      */
/* ------------------------------------------------------------------------- */


static PyTypeObject FrameType, PlaneType;

/* Gives the slot back (the owner's lock: not concurrently with next/close). A consumed CUDA frame goes back on its stream (the one last given, else the legacy default
 * stream): its release fence follows the work queued there. In a forked child nothing is given
 * back (the frame is the parent's; libframesrv frees the child's copy at the close). */
static void frame_give_back(FrameObject *f)
{
    OwnerObject *o = f->owner;
    framesrv_frame *frame = f->frame;
    int state = f->state;
    f->state = FRAME_DONE;
    f->frame = NULL;
    if (o->forked) {
        owner_frame_done(o);
        return;
    }
    lock_owner(o);
    if (o->is_producer && state == FRAME_LIVE) framesrv_producer_abandon(o->producer, frame);
    else if (state != FRAME_ABANDONED && !o->is_producer && f->memory == FRAMESRV_MEMORY_CUDA)
        framesrv_frame_release_on(frame, (void *)(uintptr_t)(f->has_stream ? f->stream : 0));   /* released in any case */
    else if (state != FRAME_ABANDONED) framesrv_frame_release(frame);
    PyThread_release_lock(o->lock);
    owner_frame_done(o);
}

void frame_settle(FrameObject *f)
{
    if (f->exports > 0) return;
    if (f->state == FRAME_RELEASING || f->state == FRAME_KEPT) frame_give_back(f);
    else if (f->state == FRAME_ABANDONED) {
        f->state = FRAME_DONE;
        f->frame = NULL;
        owner_frame_done(f->owner);
    }
}

static FrameObject *frame_wrap(OwnerObject *owner, framesrv_frame *frame)
{
    FrameObject *f = PyObject_New(FrameObject, &FrameType);
    if (!f) {
        if (owner->is_producer) framesrv_producer_abandon(owner->producer, frame);
        else framesrv_frame_release(frame);
        return NULL;
    }
    f->frame = frame;
    f->owner = owner;
    f->memory = framesrv_frame_memory(frame);
    f->device = owner->device;
    f->ready = READY_ANYWHERE;
    f->ready_on = f->stream = 0;
    f->has_stream = 0;
    if (owner->is_producer) f->in = framesrv_frame_info_of(frame);
    else {
        f->header = *framesrv_frame_info_of(frame);
        f->in = &f->header;
    }
    Py_INCREF(owner);
    f->state = FRAME_LIVE;
    f->exports = 0;
    owner->held++;
    return f;
}

static void frame_dealloc(FrameObject *f)
{
    /* No buffer can be exported here: each holds its Plane, which holds this frame. */
    if (f->state != FRAME_DONE) {
        if (f->state == FRAME_ABANDONED) owner_frame_done(f->owner);
        else frame_give_back(f);
    }
    Py_XDECREF(f->owner);
    PyObject_Free(f);
}

int frame_check(FrameObject *f)
{
    if (f->owner->forked) return owner_usable(f->owner);
    if (f->state == FRAME_DONE || !f->frame) { PyErr_SetString(StateError, "the frame was released"); return 0; }
    return 1;
}

/* release(stream=None): gives the slot back now (True) or when the last array dies (False). A
 * CUDA frame goes back on `stream` (an int CUstream), else on the stream it was last given. */
static PyObject *frame_release(FrameObject *f, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t stream;
    int given;
    if (nargs > 1) { PyErr_SetString(PyExc_TypeError, "release(stream=None)"); return NULL; }
    if (stream_arg(nargs ? args[0] : Py_None, &stream, &given) < 0) return NULL;
    if (f->state == FRAME_DONE) Py_RETURN_TRUE;
    if (given && f->memory != FRAMESRV_MEMORY_CUDA)
        return raise_error(MemoryKindError, FRAMESRV_E_MEMORY, "release(stream=...): frame %llu is in host memory: no GPU "
                           "stream to order (release() without one)", (unsigned long long)f->in->seq);
    if (given) {
        f->stream = stream;
        f->has_stream = 1;
    }
    if (f->owner->is_producer) { PyErr_SetString(StateError, "a reserved frame is published or abandoned, not released"); return NULL; }
    f->state = FRAME_RELEASING;
    frame_settle(f);
    return PyBool_FromLong(f->state == FRAME_DONE);
}

static int frame_producer_check(FrameObject *f)
{
    if (!f->owner->is_producer || f->state != FRAME_LIVE || !f->frame) {
        PyErr_SetString(StateError, "not a reserved frame (published or abandoned already)");
        return 0;
    }
    return owner_usable(f->owner);
}

/* Before a reserved frame goes (publish, abandon): its header as set, readable afterwards. */
static void keep_header(FrameObject *f)
{
    f->header = *f->in;
    f->in = &f->header;
}

/* The publish of libframesrv that fits: kept while views are alive; a CUDA frame's ready fence
 * on `stream` (host frames: none). */
static int publish_now(framesrv_producer *p, framesrv_frame *frame, int keep, int cuda, void *stream)
{
    if (cuda) return keep ? framesrv_producer_publish_keep_on(p, frame, stream) : framesrv_producer_publish_on(p, frame, stream);
    return keep ? framesrv_producer_publish_keep(p, frame) : framesrv_producer_publish(p, frame);
}

/* publish(stream=None): publishes; the slot stays held while arrays of the frame are alive. A
 * CUDA frame's ready fence follows the work queued on `stream`, else on the frame's stream (the
 * one last given to reserve or __dlpack__), else on the legacy default stream. */
static PyObject *frame_publish(FrameObject *f, PyObject *const *args, Py_ssize_t nargs)
{
    uint64_t stream;
    int given;
    if (nargs > 1) { PyErr_SetString(PyExc_TypeError, "publish(stream=None)"); return NULL; }
    if (stream_arg(nargs ? args[0] : Py_None, &stream, &given) < 0) return NULL;
    if (!frame_producer_check(f)) return NULL;
    if (given && f->memory != FRAMESRV_MEMORY_CUDA)
        return raise_error(MemoryKindError, FRAMESRV_E_MEMORY, "publish(stream=...): frame %llu is in host memory: no GPU "
                           "stream to order (publish() without one)", (unsigned long long)f->in->seq);
    OwnerObject *o = f->owner;
    int keep = f->exports > 0, cuda = f->memory == FRAMESRV_MEMORY_CUDA, status;
    void *on = (void *)(uintptr_t)(given ? stream : f->has_stream ? f->stream : 0);
    keep_header(f);
    if (cuda) {   /* the ready fence may wait for the GPU */
        Py_BEGIN_ALLOW_THREADS
        PyThread_acquire_lock(o->lock, WAIT_LOCK);
        status = publish_now(o->producer, f->frame, keep, cuda, on);
        PyThread_release_lock(o->lock);
        Py_END_ALLOW_THREADS
    } else {      /* a host frame's publish never waits: the GIL stays (the per-frame path) */
        lock_owner(o);
        status = publish_now(o->producer, f->frame, keep, cuda, on);
        PyThread_release_lock(o->lock);
    }
    if (status < 0) {
        f->in = framesrv_frame_info_of(f->frame);   /* still reserved: fields may be set again */
        return raise_status(status);
    }
    if (keep) f->state = FRAME_KEPT;
    else { f->state = FRAME_DONE; f->frame = NULL; owner_frame_done(o); }
    return PyBool_FromLong(keep);
}

/* abandon(): gives the reserved frame back unpublished. Arrays still alive keep the pool
 * mapped but may show the slot's later content (documented). */
static PyObject *frame_abandon(FrameObject *f, PyObject *unused)
{
    (void)unused;
    if (!f->owner->is_producer || f->state != FRAME_LIVE) Py_RETURN_NONE;
    OwnerObject *o = f->owner;
    keep_header(f);
    if (o->forked) {   /* the parent's reservation: nothing is given back here */
        f->state = FRAME_ABANDONED;
        frame_settle(f);
        Py_RETURN_NONE;
    }
    int status;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(o->lock, WAIT_LOCK);
    status = framesrv_producer_abandon(o->producer, f->frame);
    PyThread_release_lock(o->lock);
    Py_END_ALLOW_THREADS
    f->state = FRAME_ABANDONED;
    frame_settle(f);
    if (status < 0) return raise_status(status);
    Py_RETURN_NONE;
}

static PyObject *pair(int64_t a, int64_t b)
{
    return Py_BuildValue("(LL)", (long long)a, (long long)b);
}

static PyObject *planes_tuple(const framesrv_frame_info *in)
{
    PyObject *t = PyTuple_New(in->plane_count);
    for (uint32_t i = 0; t && i < in->plane_count; i++) {
        const framesrv_plane *p = &in->planes[i];
        PyObject *g = Py_BuildValue("{s:I,s:I,s:I,s:I,s:n,s:n}", "width", p->width, "height", p->height,
                                    "components", p->components, "sample_bytes", p->sample_bytes,
                                    "stride", (Py_ssize_t)p->stride, "row_bytes", (Py_ssize_t)p->row_bytes);
        if (!g) { Py_CLEAR(t); break; }
        PyTuple_SET_ITEM(t, i, g);
    }
    return t;
}

/* A consumer's header (its validated copy) stays readable after the release, and so does a
 * producer's (copied at the publish or abandon); a reserved frame's is the library's. */
static int header_check(FrameObject *f)
{
    return f->in == &f->header || f->frame || frame_check(f);
}

/* info(): every header field as a dict. */
static PyObject *frame_info(FrameObject *f, PyObject *unused)
{
    (void)unused;
    if (!header_check(f)) return NULL;
    const framesrv_frame_info *in = f->in;
    PyObject *planes = planes_tuple(in);
    if (!planes) return NULL;
    PyObject *pts;
    if (in->pts == FRAMESRV_PTS_NONE) { Py_INCREF(Py_None); pts = Py_None; }
    else pts = PyLong_FromLongLong(in->pts);
    PyObject *d = Py_BuildValue(
        "{s:K,s:K,s:I,s:I,s:i,s:s,s:N,s:I,s:I,s:I,s:I,s:N,s:N,s:N,s:L,s:K,s:I,s:I,s:I,s:I,s:K,s:i,s:i,s:I,s:I,s:I,s:I,s:K}",
        "seq", (unsigned long long)in->seq, "epoch", (unsigned long long)in->epoch,
        "width", in->width, "height", in->height, "pix_fmt_code", in->pix_fmt,
        "pix_fmt", in->pix_fmt_name, "planes", planes,
        "color_matrix", in->color_matrix, "color_range", in->color_range,
        "color_primaries", in->color_primaries, "color_transfer", in->color_transfer,
        "sar", pair(in->sar_num, in->sar_den), "pts", pts,
        "time_base", pair(in->time_base_num, in->time_base_den),
        "duration", (long long)in->duration, "capture_ns", (unsigned long long)in->capture_ns,
        "flags", in->flags, "field_order", in->field_order, "chroma_location", in->chroma_location,
        "source_dropped", in->source_dropped, "publish_ns", (unsigned long long)in->publish_ns,
        "media", in->media, "sample_fmt", in->sample_fmt, "sample_rate", in->sample_rate, "channels", in->channels,
        "channel_order", in->channel_order, "nb_samples", in->nb_samples, "channel_mask", (unsigned long long)in->channel_mask);
    return d;
}

/* ------------------------------------------------------------------------- */
/* Header fields, one at a time (the per-frame path: no dict)                 */
/* ------------------------------------------------------------------------- */

/* How a header field is stored in framesrv_frame_info. */
enum field_kind { FIELD_U32, FIELD_U64, FIELD_I32, FIELD_I64, FIELD_PTS, FIELD_NAME };

/* One field: its key (info()'s and set_info's), where it is, its kind and, for the (w)
 * fields a producer sets, the range it must be in (hi > lo; read-only fields: 0, 0). */
typedef struct {
    const char *key;
    size_t offset;
    int kind;
    long long lo, hi;
} field_spec;

/* Every field: the writable ones first, in set_info's order (sar and time_base: pairs of two). */
#define HEADER_FIELDS(X)                                                                                     \
    X(color_matrix, FIELD_U32, 0, 255) X(color_range, FIELD_U32, 0, 2) X(color_primaries, FIELD_U32, 0, 255)  \
    X(color_transfer, FIELD_U32, 0, 255) X(sar_num, FIELD_I32, 0, INT32_MAX) X(sar_den, FIELD_I32, 0, INT32_MAX) \
    X(pts, FIELD_PTS, INT64_MIN, INT64_MAX) X(time_base_num, FIELD_I32, 0, INT32_MAX)                         \
    X(time_base_den, FIELD_I32, 0, INT32_MAX) X(duration, FIELD_I64, 0, INT64_MAX)                            \
    X(capture_ns, FIELD_U64, 0, INT64_MAX) X(flags, FIELD_U32, 0, 7) X(field_order, FIELD_U32, 0, 5)          \
    X(chroma_location, FIELD_U32, 0, 6) X(source_dropped, FIELD_U32, 0, UINT32_MAX)                           \
    X(nb_samples, FIELD_U32, 0, 1 << 20)                                                                      \
    X(seq, FIELD_U64, 0, 0) X(epoch, FIELD_U64, 0, 0) X(width, FIELD_U32, 0, 0) X(height, FIELD_U32, 0, 0)   \
    X(publish_ns, FIELD_U64, 0, 0) X(plane_count, FIELD_U32, 0, 0) X(pix_fmt, FIELD_I32, 0, 0)               \
    X(pix_fmt_name, FIELD_NAME, 0, 0) X(media, FIELD_I32, 0, 0) X(sample_fmt, FIELD_I32, 0, 0)                \
    X(sample_rate, FIELD_U32, 0, 0) X(channels, FIELD_U32, 0, 0) X(channel_order, FIELD_U32, 0, 0)            \
    X(channel_mask, FIELD_U64, 0, 0)

#define FIELD_INDEX(name, kind, lo, hi) F_##name,
enum { HEADER_FIELDS(FIELD_INDEX) WRITABLE_FIELDS = F_seq };
#undef FIELD_INDEX
#define FIELD_SPEC(name, kind, lo, hi) {#name, offsetof(framesrv_frame_info, name), kind, lo, hi},
static const field_spec fields[] = {HEADER_FIELDS(FIELD_SPEC)};
#undef FIELD_SPEC

static PyObject *field_value(const framesrv_frame_info *in, const field_spec *spec)
{
    const char *at = (const char *)in + spec->offset;
    switch (spec->kind) {
    case FIELD_U32: return PyLong_FromUnsignedLong(*(const uint32_t *)at);
    case FIELD_U64: return PyLong_FromUnsignedLongLong(*(const uint64_t *)at);
    case FIELD_I32: return PyLong_FromLong(*(const int32_t *)at);
    case FIELD_PTS: if (*(const int64_t *)at == FRAMESRV_PTS_NONE) Py_RETURN_NONE; /* fall through */
    case FIELD_I64: return PyLong_FromLongLong(*(const int64_t *)at);
    default: return PyUnicode_FromString(at);
    }
}

/* 0 if x is in the field's range, else -1 with ValueError. */
static int field_check(const field_spec *spec, long long x)
{
    if (x >= spec->lo && x <= spec->hi) return 0;
    PyErr_Format(PyExc_ValueError, "%s out of range: %lld", spec->key, x);
    return -1;
}

/* Stores x into the field, range-checked unless `unchecked`. */
static int field_store(framesrv_frame_info *in, const field_spec *spec, long long x, int unchecked)
{
    if (!unchecked && field_check(spec, x) < 0) return -1;
    char *at = (char *)in + spec->offset;
    switch (spec->kind) {
    case FIELD_U32: *(uint32_t *)at = (uint32_t)x; break;
    case FIELD_U64: *(uint64_t *)at = (uint64_t)x; break;
    case FIELD_I32: *(int32_t *)at = (int32_t)x; break;
    default: *(int64_t *)at = x; break;
    }
    return 0;
}

/* Reads an optional integer field of a dict into the frame (None: FRAMESRV_PTS_NONE, unchecked). */
static int dict_field(PyObject *d, framesrv_frame_info *in, const field_spec *spec)
{
    PyObject *v = PyDict_GetItemString(d, spec->key);
    if (!v) return 0;
    long long x = v == Py_None ? FRAMESRV_PTS_NONE : PyLong_AsLongLong(v);
    if (x == -1 && PyErr_Occurred()) return -1;
    return field_store(in, spec, x, v == Py_None);
}

/* set_info(dict): the writable header fields of a reserved frame. */
static PyObject *frame_set_info(FrameObject *f, PyObject *d)
{
    if (!frame_producer_check(f)) return NULL;
    if (!PyDict_Check(d)) { PyErr_SetString(PyExc_TypeError, "set_info takes a dict"); return NULL; }
    framesrv_frame_info *in = framesrv_frame_info_of(f->frame);
    for (size_t i = 0; i < WRITABLE_FIELDS; i++)
        if (dict_field(d, in, &fields[i]) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *frame_plane(FrameObject *f, PyObject *arg);
static PyObject *frame_planes(FrameObject *f, PyObject *unused);
#ifdef FRAMESRV_NUMPY
static PyObject *frame_arrays(FrameObject *f, PyObject *unused);
#endif

/* The test pattern reads and writes host bytes: a CUDA frame has none here. */
static int host_frame_check(FrameObject *f, const char *what)
{
    if (!frame_check(f)) return 0;
    if (f->memory != FRAMESRV_MEMORY_CUDA) return 1;
    raise_error(MemoryKindError, FRAMESRV_E_MEMORY, "%s: frame %llu is in CUDA memory (device cuda:%d): use its planes "
                "through DLPack (torch.from_dlpack(frame.planes[0]))", what, (unsigned long long)f->in->seq, f->device);
    return 0;
}

static PyObject *frame_pattern_check(FrameObject *f, PyObject *unused)
{
    (void)unused;
    if (!host_frame_check(f, "pattern_check")) return NULL;
    uint64_t bad;
    Py_BEGIN_ALLOW_THREADS
    bad = framesrv_pattern_check(f->frame);
    Py_END_ALLOW_THREADS
    return PyLong_FromUnsignedLongLong(bad);
}

static PyObject *frame_pattern_fill(FrameObject *f, PyObject *unused)
{
    (void)unused;
    if (!frame_producer_check(f) || !host_frame_check(f, "fill_pattern")) return NULL;
    Py_BEGIN_ALLOW_THREADS
    framesrv_pattern_fill(f->frame);
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* _pool_range(): (address, bytes) of the pool mapping the frame lives in. */
static PyObject *frame_pool_range(FrameObject *f, PyObject *unused)
{
    (void)unused;
    if (!frame_check(f)) return NULL;
    const fsi_pool *pool = f->frame->pool;
    if (!pool) Py_RETURN_NONE;
    return Py_BuildValue("(Kn)", (unsigned long long)(uintptr_t)pool->base, (Py_ssize_t)pool->size);
}

/* _device_range(): (CUdeviceptr, bytes) of the device allocation a CUDA frame lives in, None for a host frame. */
static PyObject *frame_device_range(FrameObject *f, PyObject *unused)
{
    (void)unused;
    if (!frame_check(f)) return NULL;
    const fsi_pool *pool = f->frame->pool;
    if (!pool || !pool->device) Py_RETURN_NONE;
    return Py_BuildValue("(Kn)", (unsigned long long)pool->device->base, (Py_ssize_t)pool->device->size);
}

static PyObject *frame_get_memory(FrameObject *f, void *unused)
{
    (void)unused;
    return PyLong_FromLong(f->memory);
}

static PyObject *frame_get_device(FrameObject *f, void *unused)
{
    (void)unused;
    return PyLong_FromLong(f->memory == FRAMESRV_MEMORY_CUDA ? f->device : -1);
}

static PyObject *frame_get_stream(FrameObject *f, void *unused)
{
    (void)unused;
    if (!f->has_stream) Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(f->stream);
}

static PyObject *frame_get_state(FrameObject *f, void *unused)
{
    (void)unused;
    static const char *names[] = {"live", "releasing", "kept", "abandoned", "done"};
    static PyObject *interned[5];   /* the same str each time: `state != "live"` compares identities */
    if (!interned[f->state] && !(interned[f->state] = PyUnicode_InternFromString(names[f->state]))) return NULL;
    Py_INCREF(interned[f->state]);
    return interned[f->state];
}

static PyObject *frame_get_exports(FrameObject *f, void *unused)
{
    (void)unused;
    return PyLong_FromSsize_t(f->exports);
}

static PyMethodDef frame_methods[] = {
    {"release", (PyCFunction)(void (*)(void))frame_release, METH_FASTCALL,
     "release(stream=None): gives the slot back now (True) or when the last array dies (False)."},
    {"publish", (PyCFunction)(void (*)(void))frame_publish, METH_FASTCALL,
     "publish(stream=None): publishes a reserved frame; True if arrays keep the slot held."},
    {"abandon", (PyCFunction)frame_abandon, METH_NOARGS, "Gives a reserved frame back unpublished."},
    {"info", (PyCFunction)frame_info, METH_NOARGS, "Every header field, as a dict."},
    {"set_info", (PyCFunction)frame_set_info, METH_O, "Sets a reserved frame's writable header fields from a dict."},
    {"plane", (PyCFunction)frame_plane, METH_O, "The buffer exporter of plane i."},
    {"planes", (PyCFunction)frame_planes, METH_NOARGS, "The buffer exporters of every plane (a tuple)."},
#ifdef FRAMESRV_NUMPY
    {"arrays", (PyCFunction)frame_arrays, METH_NOARGS, "Every plane as a numpy array viewing the pool (a tuple)."},
#endif
    {"pattern_check", (PyCFunction)frame_pattern_check, METH_NOARGS, "Bytes that differ from the test pattern."},
    {"pattern_fill", (PyCFunction)frame_pattern_fill, METH_NOARGS, "Fills a reserved frame with the test pattern."},
    {"_pool_range", (PyCFunction)frame_pool_range, METH_NOARGS, "(address, size) of the pool mapping."},
    {"_device_range", (PyCFunction)frame_device_range, METH_NOARGS, "(CUdeviceptr, size) of a CUDA frame's allocation."},
    {"device_plane", (PyCFunction)frame_device_plane, METH_O, "A CUDA frame's plane i: framesrv_frame_device_plane as a dict."},
    {NULL, NULL, 0, NULL},
};

/* A header field (closure: its index in `fields`), read from the header as delivered (a
 * consumer's validated copy) or as reserved, without the dict of info(): the per-frame path. */
static PyObject *frame_get_field(FrameObject *f, void *closure)
{
    if (!header_check(f)) return NULL;
    return field_value(f->in, &fields[(uintptr_t)closure]);
}

/* sar and time_base (closure: the index of the pair's first field): (num, den). */
static PyObject *frame_get_pair(FrameObject *f, void *closure)
{
    if (!header_check(f)) return NULL;
    const field_spec *spec = &fields[(uintptr_t)closure];
    const char *at = (const char *)f->in;
    return pair(*(const int32_t *)(at + spec[0].offset), *(const int32_t *)(at + spec[1].offset));
}

/* The header a field is set in: a reserved producer frame's, where publish takes it from. */
static framesrv_frame_info *settable_header(FrameObject *f, PyObject *value, const char *key)
{
    if (!f->owner->is_producer || f->state != FRAME_LIVE || f->in == &f->header) {
        PyErr_Format(PyExc_AttributeError, "%s is read-only: set it on a reserved producer frame", key);
        return NULL;
    }
    if (!value) { PyErr_Format(PyExc_AttributeError, "%s cannot be deleted", key); return NULL; }
    return (framesrv_frame_info *)f->in;
}

/* frame.<field> = int (pts: or None), range-checked as set_info checks it. */
static int frame_set_field(FrameObject *f, PyObject *value, void *closure)
{
    const field_spec *spec = &fields[(uintptr_t)closure];
    framesrv_frame_info *in = settable_header(f, value, spec->key);
    if (!in) return -1;
    if (value == Py_None && spec->kind == FIELD_PTS) return field_store(in, spec, FRAMESRV_PTS_NONE, 1);
    long long x = PyLong_AsLongLong(value);
    if (x == -1 && PyErr_Occurred()) return -1;
    return field_store(in, spec, x, 0);
}

/* frame.sar / frame.time_base = (num, den): both checked, then both stored. */
static int frame_set_pair(FrameObject *f, PyObject *value, void *closure)
{
    const field_spec *spec = &fields[(uintptr_t)closure];
    const char *key = (uintptr_t)closure == F_sar_num ? "sar" : "time_base";
    framesrv_frame_info *in = settable_header(f, value, key);
    if (!in) return -1;
    if (!PyTuple_Check(value) || PyTuple_GET_SIZE(value) != 2) {
        PyErr_Format(PyExc_TypeError, "%s: a (num, den) tuple of ints", key);
        return -1;
    }
    long long num = PyLong_AsLongLong(PyTuple_GET_ITEM(value, 0)), den;
    if ((num == -1 && PyErr_Occurred()) || field_check(&spec[0], num) < 0) return -1;
    den = PyLong_AsLongLong(PyTuple_GET_ITEM(value, 1));
    if ((den == -1 && PyErr_Occurred()) || field_check(&spec[1], den) < 0) return -1;
    field_store(in, &spec[0], num, 1);
    return field_store(in, &spec[1], den, 1);
}

static PyGetSetDef frame_getset[] = {
#define READ(name, field, doc) {name, (getter)frame_get_field, NULL, doc, (void *)(uintptr_t)F_##field}
#define WRITE(field) {#field, (getter)frame_get_field, (setter)frame_set_field, NULL, (void *)(uintptr_t)F_##field}
#define PAIR(name) {#name, (getter)frame_get_pair, (setter)frame_set_pair, "(num, den)", (void *)(uintptr_t)F_##name##_num}
    READ("seq", seq, "the frame's sequence number"), READ("epoch", epoch, "the pool epoch"), READ("width", width, "pixels"),
    READ("height", height, "pixels"), READ("publish_ns", publish_ns, "CLOCK_MONOTONIC at publish"),
    READ("plane_count", plane_count, "planes of the frame's format"), READ("pix_fmt_code", pix_fmt, "framesrv_pix_fmt"),
    READ("pix_fmt", pix_fmt_name, "FFmpeg's name of the pixel format (audio: of the sample format)"),
    READ("media", media, "0 video, 1 audio (PROTOCOL.md 4.6)"), READ("sample_fmt", sample_fmt, "audio: framesrv_sample_fmt"),
    READ("sample_rate", sample_rate, "audio: samples per second"), READ("channels", channels, "audio: channels"),
    READ("channel_order", channel_order, "audio: 0 unspecified, 1 native, 3 ambisonic"),
    READ("channel_mask", channel_mask, "audio: AV_CH_* bits"),
    WRITE(color_matrix), WRITE(color_range), WRITE(color_primaries), WRITE(color_transfer), WRITE(pts), WRITE(duration),
    WRITE(capture_ns), WRITE(flags), WRITE(field_order), WRITE(chroma_location), WRITE(source_dropped), WRITE(nb_samples), PAIR(sar),
    PAIR(time_base),
#undef READ
#undef WRITE
#undef PAIR
    {"state", (getter)frame_get_state, NULL, "live, releasing, kept, abandoned or done", NULL},
    {"exports", (getter)frame_get_exports, NULL, "buffers exported right now", NULL},
    {"memory", (getter)frame_get_memory, NULL, "0 host memory, 1 CUDA memory", NULL},
    {"device", (getter)frame_get_device, NULL, "CUDA: the device's ordinal in this process, else -1", NULL},
    {"stream", (getter)frame_get_stream, NULL, "CUDA: the stream last given, None if none", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject FrameType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "framesrv._framesrv.Frame",
    .tp_basicsize = sizeof(FrameObject),
    .tp_dealloc = (destructor)frame_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A frame held by a consumer or reserved by a producer.",
    .tp_methods = frame_methods,
    .tp_getset = frame_getset,
};

/* ------------------------------------------------------------------------- */
/* Plane: the buffer exporter                                                 */
/* ------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    FrameObject *frame;
    int index;
    Py_ssize_t shape[3], strides[3];
    int ndim;
    char format[4];
    int counted;               /* the base of an array from arrays(): counts as one export */
} PlaneObject;

/* The buffer format of a sample format's samples (struct module syntax, little-endian). */
static const char *sample_buffer_format(int sample_fmt)
{
    switch (sample_fmt) {
    case FRAMESRV_SAMPLE_U8: case FRAMESRV_SAMPLE_U8P: return "B";
    case FRAMESRV_SAMPLE_S16: case FRAMESRV_SAMPLE_S16P: return "<h";
    case FRAMESRV_SAMPLE_S32: case FRAMESRV_SAMPLE_S32P: return "<i";
    case FRAMESRV_SAMPLE_FLT: case FRAMESRV_SAMPLE_FLTP: return "<f";
    case FRAMESRV_SAMPLE_DBL: case FRAMESRV_SAMPLE_DBLP: return "<d";
    default: return "<q";   /* s64, s64p */
    }
}

/* An audio frame's plane 0 (PROTOCOL.md 4.6) as samples: (channels, nb_samples) rows of one
 * channel each when planar, (nb_samples, channels) interleaved when packed. */
static PyObject *sample_plane_new(FrameObject *f, const framesrv_frame_info *in)
{
    const framesrv_plane *p = &in->planes[0];
    PlaneObject *pl = PyObject_New(PlaneObject, &PlaneType);
    if (!pl) return NULL;
    pl->frame = f;
    Py_INCREF(f);
    pl->counted = 0;
    pl->index = 0;
    pl->ndim = 2;
    int planar = p->components == 1 && p->height == in->channels && in->channels > 1;
    if (planar || in->channels == 1) {
        pl->shape[0] = planar ? p->height : p->width;
        pl->shape[1] = planar ? p->width : 1;
        pl->strides[0] = planar ? (Py_ssize_t)p->stride : (Py_ssize_t)p->sample_bytes;
        pl->strides[1] = planar ? (Py_ssize_t)p->sample_bytes : (Py_ssize_t)p->sample_bytes;
    } else {
        pl->shape[0] = p->width;
        pl->shape[1] = p->components;
        pl->strides[0] = (Py_ssize_t)(p->components * p->sample_bytes);
        pl->strides[1] = (Py_ssize_t)p->sample_bytes;
    }
    strcpy(pl->format, sample_buffer_format(in->sample_fmt));
    return (PyObject *)pl;
}

static PyObject *frame_plane(FrameObject *f, PyObject *arg)
{
    long i = PyLong_AsLong(arg);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (!frame_check(f)) return NULL;
    const framesrv_frame_info *in = framesrv_frame_info_of(f->frame);
    if (i < 0 || (uint32_t)i >= in->plane_count) { PyErr_Format(PyExc_IndexError, "no plane %ld", i); return NULL; }
    if (f->memory == FRAMESRV_MEMORY_CUDA) return device_plane_new(f, (uint32_t)i);   /* no host bytes */
    const framesrv_plane *p = &in->planes[i];
    if (in->media == FRAMESRV_MEDIA_AUDIO) return sample_plane_new(f, in);
    if (p->sample_bytes != 1 && p->sample_bytes != 2) { PyErr_SetString(BadData, "sample size not 1 or 2"); return NULL; }
    PlaneObject *pl = PyObject_New(PlaneObject, &PlaneType);
    if (!pl) return NULL;
    pl->frame = f;
    Py_INCREF(f);
    pl->counted = 0;
    pl->index = (int)i;
    pl->ndim = p->components > 1 ? 3 : 2;
    pl->shape[0] = p->height;
    pl->shape[1] = p->width;
    pl->shape[2] = p->components;
    pl->strides[0] = (Py_ssize_t)p->stride;
    pl->strides[1] = (Py_ssize_t)(p->components * p->sample_bytes);
    pl->strides[2] = (Py_ssize_t)p->sample_bytes;
    strcpy(pl->format, p->sample_bytes == 2 ? "<H" : "B");
    return (PyObject *)pl;
}

#ifdef FRAMESRV_NUMPY
/* One plane as a numpy array made here (no buffer-protocol round trip: the per-frame path).
 * Its base is the Plane, which counts as one export until the array (and every view of it)
 * is gone: the same rule as a buffer export. */
/* numpy's type of a sample format's samples. */
static int sample_npy_type(int sample_fmt)
{
    switch (sample_fmt) {
    case FRAMESRV_SAMPLE_U8: case FRAMESRV_SAMPLE_U8P: return NPY_UINT8;
    case FRAMESRV_SAMPLE_S16: case FRAMESRV_SAMPLE_S16P: return NPY_INT16;
    case FRAMESRV_SAMPLE_S32: case FRAMESRV_SAMPLE_S32P: return NPY_INT32;
    case FRAMESRV_SAMPLE_FLT: case FRAMESRV_SAMPLE_FLTP: return NPY_FLOAT32;
    case FRAMESRV_SAMPLE_DBL: case FRAMESRV_SAMPLE_DBLP: return NPY_FLOAT64;
    default: return NPY_INT64;
    }
}

static PyObject *plane_array(FrameObject *f, PyObject *index, int readonly)
{
    PlaneObject *pl = (PlaneObject *)frame_plane(f, index);
    if (!pl) return NULL;
    const framesrv_frame_info *in = framesrv_frame_info_of(f->frame);
    const framesrv_plane *p = &in->planes[pl->index];
    PyArray_Descr *descr = PyArray_DescrFromType(in->media == FRAMESRV_MEDIA_AUDIO ? sample_npy_type(in->sample_fmt)
                                                 : p->sample_bytes == 2 ? NPY_UINT16 : NPY_UINT8);
    npy_intp shape[3] = {pl->shape[0], pl->shape[1], pl->shape[2]}, strides[3] = {pl->strides[0], pl->strides[1], pl->strides[2]};
    PyObject *a = PyArray_NewFromDescr(&PyArray_Type, descr, pl->ndim, shape, strides, p->data,
                                       readonly ? NPY_ARRAY_ALIGNED : NPY_ARRAY_ALIGNED | NPY_ARRAY_WRITEABLE, NULL);
    if (!a) { Py_DECREF(pl); return NULL; }
    pl->counted = 1;
    f->exports++;
    if (PyArray_SetBaseObject((PyArrayObject *)a, (PyObject *)pl) < 0) { Py_DECREF(a); return NULL; }
    return a;
}

/* arrays(): every plane as a numpy array viewing the pool (read-only unless reserved). */
static PyObject *frame_arrays(FrameObject *f, PyObject *unused)
{
    (void)unused;
    if (!frame_check(f)) return NULL;
    if (f->state == FRAME_ABANDONED) { PyErr_SetString(StateError, "the frame was released"); return NULL; }
    if (f->memory == FRAMESRV_MEMORY_CUDA) return frame_planes(f, NULL);   /* DevicePlanes: no numpy view of device memory */
    int readonly = !f->owner->is_producer || f->state != FRAME_LIVE;
    uint32_t n = framesrv_frame_info_of(f->frame)->plane_count;
    PyObject *t = PyTuple_New(n);
    for (uint32_t i = 0; t && i < n; i++) {
        PyObject *index = PyLong_FromUnsignedLong(i), *a = index ? plane_array(f, index, readonly) : NULL;
        Py_XDECREF(index);
        if (!a) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, a);
    }
    return t;
}
#endif

static PyObject *frame_planes(FrameObject *f, PyObject *unused)
{
    (void)unused;
    if (!frame_check(f)) return NULL;
    uint32_t n = framesrv_frame_info_of(f->frame)->plane_count;
    PyObject *t = PyTuple_New(n);
    for (uint32_t i = 0; t && i < n; i++) {
        PyObject *index = PyLong_FromUnsignedLong(i), *pl = index ? frame_plane(f, index) : NULL;
        Py_XDECREF(index);
        if (!pl) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, pl);
    }
    return t;
}

static int plane_getbuffer(PlaneObject *pl, Py_buffer *view, int flags)
{
    FrameObject *f = pl->frame;
    if (f->state == FRAME_DONE || f->state == FRAME_ABANDONED || !f->frame) {
        PyErr_SetString(PyExc_BufferError, "the frame was released");
        return -1;
    }
    int readonly = !f->owner->is_producer || f->state != FRAME_LIVE;
    if ((flags & PyBUF_WRITABLE) == PyBUF_WRITABLE && readonly) {
        PyErr_SetString(PyExc_BufferError, "the frame is read-only");
        return -1;
    }
    if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES) {
        PyErr_SetString(PyExc_BufferError, "a plane needs strides (its rows are padded)");
        return -1;
    }
    const framesrv_plane *p = &framesrv_frame_info_of(f->frame)->planes[pl->index];
    Py_ssize_t item = (Py_ssize_t)p->sample_bytes;
    view->buf = p->data;
    Py_INCREF(pl);
    view->obj = (PyObject *)pl;
    view->len = pl->shape[0] * pl->shape[1] * (pl->ndim == 3 ? pl->shape[2] : 1) * item;
    view->readonly = readonly;
    view->itemsize = item;
    view->format = (flags & PyBUF_FORMAT) ? pl->format : NULL;
    view->ndim = pl->ndim;
    view->shape = pl->shape;
    view->strides = pl->strides;
    view->suboffsets = NULL;
    view->internal = NULL;
    f->exports++;
    return 0;
}

static void plane_releasebuffer(PlaneObject *pl, Py_buffer *view)
{
    (void)view;
    pl->frame->exports--;
    frame_settle(pl->frame);
}

static void plane_dealloc(PlaneObject *pl)
{
    if (pl->counted) plane_releasebuffer(pl, NULL);
    Py_XDECREF(pl->frame);
    PyObject_Free(pl);
}

static PyBufferProcs plane_as_buffer = {
    .bf_getbuffer = (getbufferproc)plane_getbuffer,
    .bf_releasebuffer = (releasebufferproc)plane_releasebuffer,
};

static PyTypeObject PlaneType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "framesrv._framesrv.Plane",
    .tp_basicsize = sizeof(PlaneObject),
    .tp_dealloc = (destructor)plane_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One plane of a frame, exported through the buffer protocol (shape and strides from the header).",
    .tp_as_buffer = &plane_as_buffer,
};

/* ------------------------------------------------------------------------- */
/* Consumer                                                                   */
/* ------------------------------------------------------------------------- */

static PyTypeObject ConsumerType, ProducerType;

/* A lossless open waits for the producer's admission only within its own timeout (so
 * that frames published right after it are ours), at most this long in the library. */
#define ADMISSION_MS 2000

struct open_ctx {
    framesrv_consumer **out;       /* open; NULL: reopen of `consumer` */
    framesrv_consumer *consumer;
    const char *name;
    framesrv_consumer_options *options;
    uint64_t deadline;             /* now_ms() based; UINT64_MAX: forever */
    PyThread_type_lock lock;       /* reopen: the owner's release lock, held too */
};

/* How long one try may wait: the slice while the stream is not there (signals are checked
 * between slices), up to ADMISSION_MS (within the deadline) once its control segment
 * exists, so that a slice never cuts the admission short. */
static int attach_ms(const struct open_ctx *c, int ms)
{
    char dir[4096], path[4096];
    if (fsi_runtime_dir(dir, sizeof dir, false) != FRAMESRV_OK ||
        fsi_path(path, sizeof path, dir, c->name, ".ctl") != FRAMESRV_OK || access(path, F_OK) != 0)
        return ms;
    uint64_t now = now_ms(), left = c->deadline == UINT64_MAX ? ADMISSION_MS : c->deadline > now ? c->deadline - now : 0;
    int admission = left < ADMISSION_MS ? (int)left : ADMISSION_MS;
    return admission > ms ? admission : ms;
}

static int open_try(void *ctx, int ms)
{
    struct open_ctx *c = ctx;
    ms = attach_ms(c, ms);
    if (!c->out) {
        PyThread_acquire_lock(c->lock, WAIT_LOCK);
        int status = framesrv_consumer_reopen(c->consumer, ms);
        PyThread_release_lock(c->lock);
        return status;
    }
    c->options->attach_timeout_ms = ms;
    return framesrv_consumer_open(c->out, c->name, c->options);
}

static uint64_t deadline_of(int timeout_ms)
{
    return timeout_ms < 0 ? UINT64_MAX : now_ms() + (uint64_t)timeout_ms;
}

/* What the held-frames line (framesrv_consumer_set_held_timeout) tells a Python stage. */
#define HELD_ADVICE "copy what you keep (frame.copy() / np.array(f.array())), release frames, or give the producer more --slots"

/* held_timeout: None keeps libframesrv's default ($FRAMESRV_HELD_TIMEOUT, else 10 s),
 * math.inf never fails, else seconds >= 0. */
static int held_timeout_ms_of(PyObject *held_timeout, int *out)
{
    if (held_timeout == Py_None) { *out = FRAMESRV_HELD_KEEP; return 0; }
    double s = PyFloat_AsDouble(held_timeout);
    if (s == -1.0 && PyErr_Occurred()) return -1;
    if (s == Py_HUGE_VAL) { *out = -1; return 0; }
    return timeout_ms_of(held_timeout, out);
}

/* The attached stream's memory and device (after open and reopen). */
static void note_device(OwnerObject *o)
{
    framesrv_stream_info si;
    if (framesrv_consumer_stream_info(o->consumer, &si) != FRAMESRV_OK) return;
    o->memory = si.memory;
    o->device = si.device_ordinal;
}

/* Consumer(name, mode, timeout, client_name, poll_us, held_timeout, memory): attaches, waiting
 * up to timeout seconds; a stream of the other memory kind is refused (MemoryKindError). */

static PyObject *consumer_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "live", "timeout", "client_name", "poll_us", "held_timeout", "memory", "media", NULL};
    const char *name, *client = NULL;
    int live = 0, timeout_ms, held_ms, memory = FRAMESRV_MEMORY_HOST, media = FRAMESRV_MEDIA_VIDEO;
    long poll_us = 0;
    PyObject *timeout = Py_None, *held_timeout = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|pOzlOii", kwlist, &name, &live, &timeout, &client, &poll_us, &held_timeout,
                                     &memory, &media))
        return NULL;
    if (timeout_ms_of(timeout, &timeout_ms) < 0 || held_timeout_ms_of(held_timeout, &held_ms) < 0) return NULL;
    if (poll_us < 0 || poll_us > 1000000)
        return raise_error(InvalidArgument, FRAMESRV_E_INVALID, "poll_us must be 0..1000000 microseconds, not %ld", poll_us);
    OwnerObject *o = owner_new(type);
    if (!o) return NULL;
    framesrv_consumer_options opts = {.mode = live ? FRAMESRV_LIVE : FRAMESRV_LOSSLESS, .client_name = client,
                                      .poll_us = (uint32_t)poll_us, .memory = memory, .media = media};
    struct open_ctx ctx = {&o->consumer, NULL, name, &opts, deadline_of(timeout_ms), NULL};
    int status = wait_sliced(open_try, &ctx, NULL, timeout_ms, FRAMESRV_E_NOT_FOUND);
    if (status == INT32_MIN) { o->closed = 1; Py_DECREF(o); return NULL; }
    if (status < 0) { o->closed = 1; Py_DECREF(o); return raise_status(status); }
    if ((status = framesrv_consumer_set_held_timeout(o->consumer, held_ms, HELD_ADVICE)) < 0) {
        raise_status(status);
        Py_DECREF(o);   /* closes it */
        return NULL;
    }
    note_device(o);
    return (PyObject *)o;
}

/* A status of next_try: the consumer was closed (from another thread) meanwhile. */
#define NEXT_CLOSED (INT32_MIN + 1)

struct next_ctx {
    OwnerObject *owner;
    framesrv_frame *frame;
    int on_stream;                 /* CUDA: framesrv_consumer_next_on(stream) */
    void *stream;
};

static int next_call(struct next_ctx *c, int ms)
{
    OwnerObject *o = c->owner;
    if (c->on_stream) return framesrv_consumer_next_on(o->consumer, c->stream, ms, &c->frame);
    return framesrv_consumer_next(o->consumer, ms, &c->frame);
}

/* One slice: libframesrv's next sleeps on the stream's frame_wake (no descriptor, no poll)
 * for up to `ms`, without the GIL, holding only wait_lock: releases from other threads
 * (arrays dropped there) never wait for the slice to end. */
static int next_try(void *ctx, int ms)
{
    struct next_ctx *c = ctx;
    OwnerObject *o = c->owner;
    PyThread_acquire_lock(o->wait_lock, WAIT_LOCK);
    int status = __atomic_load_n(&o->closed, __ATOMIC_ACQUIRE) ? NEXT_CLOSED : next_call(c, ms);
    PyThread_release_lock(o->wait_lock);
    return status;
}

/* A frame that is there already, without letting go of the GIL (the per-frame path of a
 * consumer that keeps up): TIMEOUT if none is, or wait_lock is busy in another thread. */
static int next_now(struct next_ctx *c)
{
    OwnerObject *o = c->owner;
    if (!PyThread_acquire_lock(o->wait_lock, NOWAIT_LOCK)) return FRAMESRV_TIMEOUT;
    int status = next_call(c, 0);
    PyThread_release_lock(o->wait_lock);
    return status;
}

/* A delivered frame: a CUDA frame taken on a stream is ready there (else the CPU waited). */
static PyObject *wrap_next(OwnerObject *o, const struct next_ctx *c)
{
    FrameObject *f = frame_wrap(o, c->frame);
    if (f && c->on_stream) {
        f->ready = READY_ON;
        f->ready_on = f->stream = (uint64_t)(uintptr_t)c->stream;
        f->has_stream = 1;
    }
    return (PyObject *)f;
}

/* next(timeout=None, stream=None): a Frame, or the status int TIMEOUT (1), END (2), GONE (3).
 * With a stream (an int CUstream) a CUDA frame's ready wait is queued on it. */
static PyObject *consumer_next(OwnerObject *o, PyObject *const *args, Py_ssize_t nargs)
{
    int timeout_ms = -1;
    uint64_t stream = 0;
    if (nargs > 2) { PyErr_SetString(PyExc_TypeError, "next(timeout=None, stream=None)"); return NULL; }
    struct next_ctx ctx = {o, NULL, 0, NULL};
    if ((nargs >= 1 && timeout_ms_of(args[0], &timeout_ms) < 0) || (nargs == 2 && stream_arg(args[1], &stream, &ctx.on_stream) < 0) ||
        !owner_usable(o))
        return NULL;
    ctx.stream = (void *)(uintptr_t)stream;
    int status = next_now(&ctx);
    if (status == FRAMESRV_TIMEOUT && timeout_ms != 0)
        status = wait_sliced(next_try, &ctx, NULL, timeout_ms, FRAMESRV_TIMEOUT);
    if (status == FRAMESRV_OK) return wrap_next(o, &ctx);
    if (status == INT32_MIN) return NULL;
    if (status == NEXT_CLOSED) { PyErr_SetString(StateError, "closed"); return NULL; }
    if (status < 0) return raise_status(status);
    return PyLong_FromLong(status);
}

/* reopen(timeout): attaches to the next producer of the same name. */
static PyObject *consumer_reopen(OwnerObject *o, PyObject *args)
{
    PyObject *timeout = Py_None;
    int timeout_ms;
    if (!PyArg_ParseTuple(args, "|O", &timeout)) return NULL;
    if (timeout_ms_of(timeout, &timeout_ms) < 0 || !owner_usable(o)) return NULL;
    framesrv_stream_info si;
    int status = framesrv_consumer_stream_info(o->consumer, &si);
    if (status < 0) return raise_status(status);
    struct open_ctx ctx = {NULL, o->consumer, si.name, NULL, deadline_of(timeout_ms), o->lock};
    status = wait_sliced(open_try, &ctx, o->wait_lock, timeout_ms, FRAMESRV_E_NOT_FOUND);
    if (status == INT32_MIN) return NULL;
    if (status < 0) return raise_status(status);
    note_device(o);   /* the next producer's device may be another */
    return PyLong_FromLong(status);
}

static PyObject *consumer_stream_info(OwnerObject *o, PyObject *unused)
{
    (void)unused;
    if (!owner_usable(o)) return NULL;
    framesrv_stream_info si;
    int status = framesrv_consumer_stream_info(o->consumer, &si);
    if (status < 0) return raise_status(status);
    return Py_BuildValue("{s:s,s:I,s:N,s:i,s:O,s:K,s:s,s:s,s:i,s:O,s:s}", "name", si.name, "slot_count", si.slot_count,
                         "rate", pair(si.rate_num, si.rate_den), "producer_pid", si.producer_pid,
                         "live_source", si.live_source ? Py_True : Py_False, "epoch", (unsigned long long)si.epoch,
                         "memory", si.memory == FRAMESRV_MEMORY_CUDA ? "cuda" : "host", "device_uuid", si.device_uuid,
                         "device_ordinal", si.device_ordinal, "device_read_only", si.device_read_only ? Py_True : Py_False,
                         "media", si.media == FRAMESRV_MEDIA_AUDIO ? "audio" : "video");
}

static PyObject *consumer_stats(OwnerObject *o, PyObject *unused)
{
    (void)unused;
    if (!owner_usable(o)) return NULL;
    framesrv_consumer_stats st;
    int status = framesrv_consumer_stats_of(o->consumer, &st);
    if (status < 0) return raise_status(status);
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K}", "delivered", (unsigned long long)st.delivered,
                         "missed", (unsigned long long)st.missed, "bad_frames", (unsigned long long)st.bad_frames,
                         "held", (unsigned long long)st.held, "restarts", (unsigned long long)st.restarts,
                         "first_unready", (unsigned long long)st.first_unready);
}

static PyObject *consumer_fileno(OwnerObject *o, PyObject *unused)
{
    (void)unused;
    if (!owner_usable(o)) return NULL;
    int fd;
    Py_BEGIN_ALLOW_THREADS   /* the first call connects (lazily), and a next may be sleeping */
    PyThread_acquire_lock(o->wait_lock, WAIT_LOCK);
    fd = framesrv_consumer_fd(o->consumer);
    PyThread_release_lock(o->wait_lock);
    Py_END_ALLOW_THREADS
    if (fd < 0) return raise_status(FRAMESRV_E_ZMQ);
    return PyLong_FromLong(fd);
}

static PyMethodDef consumer_methods[] = {
    {"next", (PyCFunction)(void (*)(void))consumer_next, METH_FASTCALL,
     "next(timeout=None, stream=None): a Frame, or the status 1 (timeout), 2 (end), 3 (gone)."},
    {"reopen", (PyCFunction)consumer_reopen, METH_VARARGS, "reopen(timeout=None): attaches to the next producer."},
    {"stream_info", (PyCFunction)consumer_stream_info, METH_NOARGS, "The stream's facts, as a dict."},
    {"stats", (PyCFunction)consumer_stats, METH_NOARGS, "This consumer's counters, as a dict."},
    {"fileno", (PyCFunction)consumer_fileno, METH_NOARGS, "A descriptor readable when next may have something."},
    {"close", (PyCFunction)owner_close, METH_NOARGS, "Closes now (True) or when the last held frame goes (False)."},
    {"_forked", (PyCFunction)owner_mark_forked, METH_NOARGS, "This process is a forked child: refuse every call."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef owner_getset[] = {
    {"held", (getter)owner_held, NULL, "frames not given back yet", NULL},
    {"closed", (getter)owner_closed, NULL, "the handle is closed", NULL},
    {"forked", (getter)owner_get_forked, NULL, "marked as a forked child's (every call refused)", NULL},
    {"device", (getter)owner_get_device, NULL, "CUDA: the device's ordinal in this process, else -1", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ConsumerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "framesrv._framesrv.Consumer",
    .tp_basicsize = sizeof(OwnerObject),
    .tp_dealloc = (destructor)owner_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Consumer(name, live=False, timeout=None, client_name=None, poll_us=0, held_timeout=None, memory=0): "
               "libframesrv's consumer.",
    .tp_methods = consumer_methods,
    .tp_getset = owner_getset,
    .tp_new = consumer_new,
};

/* ------------------------------------------------------------------------- */
/* Producer                                                                   */
/* ------------------------------------------------------------------------- */

static int producer_options_of(PyObject *args, PyObject *kw, const char **name, framesrv_producer_options *o,
                               const char **shown)
{
    static char *kwlist[] = {"name", "width", "height", "pix_fmt", "slots", "rate_num", "rate_den",
                             "live_source", "live_max_held", "color_matrix", "color_range",
                             "color_primaries", "color_transfer", "producer_name", "memory", "cuda_device",
                             "media", "sample_fmt", "sample_rate", "channels", "channel_mask", "max_samples", NULL};
    int live = 0;
    memset(o, 0, sizeof *o);
    *shown = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "sIIi|ILLpIIIIIziiiiIIKI", kwlist, name, &o->width, &o->height,
                                     &o->pix_fmt, &o->slots, &o->rate_num, &o->rate_den, &live,
                                     &o->live_max_held, &o->color_matrix, &o->color_range,
                                     &o->color_primaries, &o->color_transfer, shown, &o->memory, &o->cuda_device,
                                     &o->media, &o->sample_fmt, &o->sample_rate, &o->channels, &o->channel_mask,
                                     &o->max_samples))
        return -1;
    o->live_source = (uint32_t)live;
    return 0;
}

static PyObject *producer_new(PyTypeObject *type, PyObject *args, PyObject *kw)
{
    const char *name, *shown;
    framesrv_producer_options opts;
    if (producer_options_of(args, kw, &name, &opts, &shown) < 0) return NULL;
    OwnerObject *o = owner_new(type);
    if (!o) return NULL;
    o->is_producer = 1;
    o->memory = opts.memory;
    o->device = opts.memory == FRAMESRV_MEMORY_CUDA ? opts.cuda_device : -1;
    int status = framesrv_producer_open_as(&o->producer, name, &opts, shown);
    if (status < 0) { o->closed = 1; Py_DECREF(o); return raise_status(status); }
    return (PyObject *)o;
}

struct reserve_ctx {
    framesrv_producer *producer;
    framesrv_frame *frame;
    int on_stream;                 /* CUDA: framesrv_producer_reserve_on(stream) */
    void *stream;
};

static int reserve_try(void *ctx, int ms)
{
    struct reserve_ctx *c = ctx;
    if (c->on_stream) return framesrv_producer_reserve_on(c->producer, c->stream, ms, &c->frame);
    return framesrv_producer_reserve(c->producer, ms, &c->frame);
}

/* A slot that is free already, without letting go of the GIL (the per-frame path of a producer
 * its consumers keep up with): TIMEOUT if none is, or the lock is busy in another thread. Host
 * frames only: a CUDA frame's reserve may wait for the GPU. */
static int reserve_now(OwnerObject *o, struct reserve_ctx *c)
{
    if (o->memory == FRAMESRV_MEMORY_CUDA || !PyThread_acquire_lock(o->lock, NOWAIT_LOCK)) return FRAMESRV_TIMEOUT;
    int status = reserve_try(c, 0);
    PyThread_release_lock(o->lock);
    return status;
}

/* reserve(timeout=None, stream=None): a Frame, or None when no slot became free in time (or a
 * live source dropped). With a stream a CUDA frame's waits for its slot's readers are queued on it. */
static PyObject *producer_reserve(OwnerObject *o, PyObject *const *args, Py_ssize_t nargs)
{
    int timeout_ms;
    uint64_t stream;
    struct reserve_ctx ctx = {o->producer, NULL, 0, NULL};
    if (nargs > 2) { PyErr_SetString(PyExc_TypeError, "reserve(timeout=None, stream=None)"); return NULL; }
    if (stream_arg(nargs > 1 ? args[1] : Py_None, &stream, &ctx.on_stream) < 0) return NULL;
    if (timeout_ms_of(nargs > 0 ? args[0] : Py_None, &timeout_ms) < 0 || !owner_usable(o)) return NULL;
    if (o->ended) { PyErr_SetString(StateError, "the stream was ended"); return NULL; }
    ctx.stream = (void *)(uintptr_t)stream;
    int status = reserve_now(o, &ctx);
    if (status == FRAMESRV_TIMEOUT && timeout_ms != 0) status = wait_sliced(reserve_try, &ctx, o->lock, timeout_ms, FRAMESRV_TIMEOUT);
    if (status == INT32_MIN) return NULL;
    if (status < 0) return raise_status(status);
    if (status != FRAMESRV_OK) Py_RETURN_NONE;
    FrameObject *f = frame_wrap(o, ctx.frame);
    if (f && ctx.on_stream) {
        f->ready = READY_ON;
        f->ready_on = f->stream = stream;
        f->has_stream = 1;
    }
    return (PyObject *)f;
}

struct wait_ctx {
    framesrv_producer *producer;
    uint32_t count;
};

static int wait_try(void *ctx, int ms)
{
    struct wait_ctx *c = ctx;
    return framesrv_producer_wait_for_consumers(c->producer, c->count, ms);
}

static PyObject *producer_wait(OwnerObject *o, PyObject *args)
{
    unsigned int count;
    PyObject *timeout = Py_None;
    int timeout_ms;
    if (!PyArg_ParseTuple(args, "I|O", &count, &timeout)) return NULL;
    if (timeout_ms_of(timeout, &timeout_ms) < 0 || !owner_usable(o)) return NULL;
    struct wait_ctx ctx = {o->producer, count};
    int status = wait_sliced(wait_try, &ctx, o->lock, timeout_ms, FRAMESRV_TIMEOUT);
    if (status == INT32_MIN) return NULL;
    if (status < 0) return raise_status(status);
    return PyBool_FromLong(status == FRAMESRV_OK);
}

static PyObject *producer_change_format(OwnerObject *o, PyObject *args)
{
    unsigned int w, h;
    int fmt, status;
    if (!PyArg_ParseTuple(args, "IIi", &w, &h, &fmt) || !owner_usable(o)) return NULL;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(o->lock, WAIT_LOCK);
    status = framesrv_producer_change_format(o->producer, w, h, fmt);
    PyThread_release_lock(o->lock);
    Py_END_ALLOW_THREADS
    if (status < 0) return raise_status(status);
    Py_RETURN_NONE;
}

static PyObject *producer_end(OwnerObject *o, PyObject *args)
{
    int failed = 0, status;
    if (!PyArg_ParseTuple(args, "|p", &failed) || !owner_usable(o)) return NULL;
    if (o->ended) Py_RETURN_NONE;
    o->ended = 1;
    Py_BEGIN_ALLOW_THREADS
    PyThread_acquire_lock(o->lock, WAIT_LOCK);
    status = framesrv_producer_end(o->producer, failed);
    PyThread_release_lock(o->lock);
    Py_END_ALLOW_THREADS
    if (status < 0) return raise_status(status);
    Py_RETURN_NONE;
}

static PyObject *producer_stats(OwnerObject *o, PyObject *unused)
{
    (void)unused;
    if (o->forked) return owner_usable(o), NULL;
    if (o->closed) { PyErr_SetString(StateError, "closed"); return NULL; }
    framesrv_producer_stats st;
    int status = framesrv_producer_stats_of(o->producer, &st);
    if (status < 0) return raise_status(status);
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K}", "published", (unsigned long long)st.published,
                         "dropped", (unsigned long long)st.dropped, "abandoned", (unsigned long long)st.abandoned,
                         "consumers", (unsigned long long)st.consumers, "reclaimed", (unsigned long long)st.reclaimed,
                         "blocked_ns", (unsigned long long)st.blocked_ns);
}

static PyMethodDef producer_methods[] = {
    {"reserve", (PyCFunction)(void (*)(void))producer_reserve, METH_FASTCALL, "reserve(timeout=None, stream=None): a Frame, or None on timeout/drop."},
    {"wait_for_consumers", (PyCFunction)producer_wait, METH_VARARGS, "wait_for_consumers(n, timeout=None) -> bool."},
    {"change_format", (PyCFunction)producer_change_format, METH_VARARGS, "change_format(width, height, pix_fmt_code)."},
    {"end", (PyCFunction)producer_end, METH_VARARGS, "end(failed=False): ends the stream."},
    {"stats", (PyCFunction)producer_stats, METH_NOARGS, "This producer's counters, as a dict."},
    {"close", (PyCFunction)owner_close, METH_NOARGS, "Ends the stream; closes now (True) or when the last kept frame goes (False)."},
    {"_forked", (PyCFunction)owner_mark_forked, METH_NOARGS, "This process is a forked child: refuse every call."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ProducerType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "framesrv._framesrv.Producer",
    .tp_basicsize = sizeof(OwnerObject),
    .tp_dealloc = (destructor)owner_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Producer(name, width, height, pix_fmt, slots=0, rate_num=0, rate_den=0, ..., memory=0, cuda_device=0): "
               "libframesrv's producer.",
    .tp_methods = producer_methods,
    .tp_getset = owner_getset,
    .tp_new = producer_new,
};

/* ------------------------------------------------------------------------- */
/* Module                                                                     */
/* ------------------------------------------------------------------------- */

static PyObject *mod_pix_fmt_name(PyObject *m, PyObject *arg)
{
    (void)m;
    long code = PyLong_AsLong(arg);
    if (code == -1 && PyErr_Occurred()) return NULL;
    const char *name = framesrv_pix_fmt_name((int)code);
    if (!name) Py_RETURN_NONE;
    return PyUnicode_FromString(name);
}

static PyObject *mod_pix_fmt_from_name(PyObject *m, PyObject *arg)
{
    (void)m;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    return PyLong_FromLong(framesrv_pix_fmt_from_name(name));
}

static PyObject *mod_version(PyObject *m, PyObject *unused)
{
    (void)m;
    (void)unused;
    return PyUnicode_FromString(framesrv_version());
}

static PyMethodDef module_methods[] = {
    {"pix_fmt_name", mod_pix_fmt_name, METH_O, "FFmpeg's name of a pixel-format code, None if unknown."},
    {"pix_fmt_from_name", mod_pix_fmt_from_name, METH_O, "The code of an FFmpeg name, 0 if unknown."},
    {"version", mod_version, METH_NOARGS, "libframesrv's version."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "framesrv._framesrv", "libframesrv, compiled in (see framesrv).", -1, module_methods,
    NULL, NULL, NULL, NULL,
};

/* Error's str() is its message (args[0]), and its status is `code` (args[1]). */
static PyObject *error_str(PyObject *unused, PyObject *self)
{
    (void)unused;
    PyObject *args = PyObject_GetAttrString(self, "args"), *s;
    if (!args) return NULL;
    s = PyTuple_Check(args) && PyTuple_GET_SIZE(args) > 0 ? PyObject_Str(PyTuple_GET_ITEM(args, 0)) : PyUnicode_FromString("");
    Py_DECREF(args);
    return s;
}

static PyObject *error_code(PyObject *unused, PyObject *self)
{
    (void)unused;
    PyObject *args = PyObject_GetAttrString(self, "args"), *code = Py_None;
    if (!args) return NULL;
    if (PyTuple_Check(args) && PyTuple_GET_SIZE(args) > 1) code = PyTuple_GET_ITEM(args, 1);
    Py_INCREF(code);
    Py_DECREF(args);
    return code;
}

static PyMethodDef error_defs[] = {
    {"__str__", error_str, METH_O, "The message."},
    {"code", error_code, METH_O, "libframesrv's status (a negative FRAMESRV_E_* code), None if not given."},
};

/* Error's class dict: __str__ (a method) and code (a property). */
static PyObject *error_dict(void)
{
    PyObject *d = PyDict_New(), *str = PyCFunction_New(&error_defs[0], NULL), *code = PyCFunction_New(&error_defs[1], NULL);
    PyObject *method = str ? PyInstanceMethod_New(str) : NULL;
    PyObject *prop = code ? PyObject_CallFunctionObjArgs((PyObject *)&PyProperty_Type, code, NULL) : NULL;
    if (!d || !method || !prop || PyDict_SetItemString(d, "__str__", method) < 0 || PyDict_SetItemString(d, "code", prop) < 0)
        Py_CLEAR(d);
    Py_XDECREF(str);
    Py_XDECREF(code);
    Py_XDECREF(method);
    Py_XDECREF(prop);
    return d;
}

static int add_error(PyObject *m, PyObject **slot, const char *name, PyObject *base, const char *doc)
{
    char full[64];
    snprintf(full, sizeof full, "framesrv.%s", name);
    PyObject *dict = base ? NULL : error_dict();
    if (!base && !dict) return -1;
    *slot = PyErr_NewExceptionWithDoc(full, doc, base, dict);
    Py_XDECREF(dict);
    if (!*slot) return -1;
    Py_INCREF(*slot);
    return PyModule_AddObject(m, name, *slot);
}

static int add_errors(PyObject *m)
{
    if (add_error(m, &Error, "Error", NULL, "A libframesrv error: str() is its one-line message, code its status (args = (message, status)).") < 0) return -1;
    struct { PyObject **slot; const char *name, *doc; } subs[] = {
        {&InvalidArgument, "InvalidArgument", "A bad argument (name, size, format, state)."},
        {&NotFound, "NotFound", "No such stream (or no running producer) within the timeout."},
        {&BadData, "BadData", "Shared memory failed validation."},
        {&SystemCallError, "SystemCallError", "A system call failed."},
        {&Busy, "Busy", "The name is taken by a live producer, or no consumer entry is free."},
        {&StateError, "StateError", "Not valid now (closed, released, too many frames held, ...)."},
        {&NoMemory, "NoMemory", "Out of memory."},
        {&Detached, "Detached", "This consumer was detached by the producer (stall timeout)."},
        {&ZMQError, "ZMQError", "ZeroMQ failed."},
    };
    for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++)
        if (add_error(m, subs[i].slot, subs[i].name, Error, subs[i].doc) < 0) return -1;
    if (add_error(m, &MediaKindError, "MediaKindError", Error,
                  "The stream carries another kind of frames (video or audio) than this Consumer reads "
                  "(Consumer(..., media='audio')).") < 0 ||
        add_error(m, &MemoryKindError, "MemoryKindError", Error,
                  "The stream's frames are in another kind of memory (host or CUDA) than asked for, or this process "
                  "cannot use the stream's CUDA device.") < 0 ||
        add_error(m, &ForkedError, "ForkedError", StateError,
                  "This Consumer or Producer was opened by the parent of this forked process: open your own.") < 0)
        return -1;
    return add_error(m, &HeldFramesError, "HeldFramesError", StateError,
                     "A lossless consumer's own held frames (or arrays still referenced) keep the producer from "
                     "publishing the frame it waits for (Consumer held_timeout).");
}

static int add_type(PyObject *m, PyTypeObject *type, const char *name)
{
    if (PyType_Ready(type) < 0) return -1;
    Py_INCREF(type);
    return PyModule_AddObject(m, name, (PyObject *)type);
}

PyMODINIT_FUNC PyInit__framesrv(void)
{
#ifdef FRAMESRV_NUMPY
    import_array();
#endif
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    if (add_errors(m) < 0 || add_type(m, &FrameType, "Frame") < 0 || add_type(m, &PlaneType, "Plane") < 0 ||
        add_type(m, &ConsumerType, "Consumer") < 0 || add_type(m, &ProducerType, "Producer") < 0 || cuda_add_types(m) < 0 ||
        PyModule_AddIntConstant(m, "TIMEOUT", FRAMESRV_TIMEOUT) < 0 ||
        PyModule_AddIntConstant(m, "END", FRAMESRV_END) < 0 || PyModule_AddIntConstant(m, "GONE", FRAMESRV_GONE) < 0 ||
        PyModule_AddIntConstant(m, "MEMORY_HOST", FRAMESRV_MEMORY_HOST) < 0 ||
        PyModule_AddIntConstant(m, "MEMORY_CUDA", FRAMESRV_MEMORY_CUDA) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
