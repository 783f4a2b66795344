/*
 * _framesrv.h: what the extension's two files share: _framesrv.c (the module, Consumer,
 * Producer, Frame and the host planes numpy views) and _framesrv_cuda.c (a CUDA frame's
 * planes: DLPack and the CUDA Array Interface).
 */
#ifndef FRAMESRV_PY_H
#define FRAMESRV_PY_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>

#include "framesrv.h"

#include <stdint.h>

/* The exceptions: Error and its subclasses (module init makes them). */
extern PyObject *Error, *InvalidArgument, *NotFound, *BadData, *SystemCallError, *Busy, *StateError, *NoMemory,
    *Detached, *ZMQError, *HeldFramesError, *MemoryKindError, *ForkedError, *MediaKindError;

/* Raises the exception of a negative status with framesrv_last_error()'s line; NULL. */
PyObject *raise_status(int status);
/* Raises `type` with args (the formatted message, status); NULL. */
PyObject *raise_error(PyObject *type, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Consumer and Producer share this head: the locks and the deferred close. */
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock;
    PyThread_type_lock wait_lock; /* consumer: next, reopen, fileno, close (not releases) */
    Py_ssize_t held;           /* frames not given back yet                      */
    int closing;               /* close() was called; done when held reaches 0    */
    int closed;
    int is_producer;
    framesrv_consumer *consumer;
    framesrv_producer *producer;
    int ended;                 /* producer: framesrv_producer_end was called      */
    int forked;                /* this is a forked child (os.register_at_fork): every call refused, no lock taken */
    int memory;                /* FRAMESRV_MEMORY_HOST or FRAMESRV_MEMORY_CUDA     */
    int device;                /* CUDA: the device's ordinal in this process, else -1 */
} OwnerObject;

/* Whether the owner may be used now, else an exception (closed, or a forked child's). */
int owner_usable(OwnerObject *o);

enum frame_state {
    FRAME_LIVE = 0,            /* held (consumer) or reserved (producer)                    */
    FRAME_RELEASING,           /* consumer: release requested, buffers still exported        */
    FRAME_KEPT,                /* producer: published with publish_keep, buffers exported    */
    FRAME_ABANDONED,           /* producer: abandoned while buffers were exported            */
    FRAME_DONE,                /* given back: no new buffer may be exported                  */
};

/* Where a CUDA frame's planes may be used without another wait (FrameObject.ready). */
enum frame_ready {
    READY_NOWHERE = 0,
    READY_ANYWHERE,            /* the CPU waited for the fences (next or reserve without a stream) */
    READY_ON,                  /* their waits were queued on ready_on                        */
};

typedef struct {
    PyObject_HEAD
    framesrv_frame *frame;
    OwnerObject *owner;
    int state;
    Py_ssize_t exports;        /* buffers, numpy arrays and device planes alive right now */
    const framesrv_frame_info *in;  /* consumer: &header (readable after the release); producer: the library's */
    framesrv_frame_info header;     /* consumer: the header as delivered */
    int memory;                /* FRAMESRV_MEMORY_* of the frame                  */
    int device;                /* CUDA: its device's ordinal in this process      */
    int ready;                 /* CUDA: enum frame_ready                          */
    uint64_t ready_on;         /* CUDA: the stream of READY_ON                    */
    uint64_t stream;           /* CUDA: the stream last given (next, reserve, release, publish, __dlpack__) */
    int has_stream;            /* ... else the legacy default stream (0) orders the release and publish */
} FrameObject;

/* After the last exported buffer or plane went: completes a deferred release. */
void frame_settle(FrameObject *f);
/* Whether the frame is live (not released), else StateError (ForkedError in a forked child). */
int frame_check(FrameObject *f);

/* _framesrv_cuda.c */
/* Plane i of a CUDA frame as a DevicePlane (DLPack, __cuda_array_interface__); counts as one
 * export while it is alive, as a numpy array's base does. */
PyObject *device_plane_new(FrameObject *f, uint32_t i);
/* Frame.device_plane(i): framesrv_frame_device_plane as a dict. */
PyObject *frame_device_plane(FrameObject *f, PyObject *arg);
/* Work queued on `stream` is made safe on the frame's planes (unless it is already), and
 * `stream` becomes the frame's stream. -1 with an exception on a failure. */
int frame_order_on(FrameObject *f, uint64_t stream);
/* A stream argument: None (*given 0), or an int CUstream handle >= 0. -1 with TypeError. */
int stream_arg(PyObject *arg, uint64_t *stream, int *given);
int cuda_add_types(PyObject *module);

#endif /* FRAMESRV_PY_H */
