"""framesrv: consume and publish framesrv video streams from Python, with numpy arrays
that view the shared memory without a copy.

    import framesrv

    with framesrv.Consumer("cam", mode="lossless") as c:    # or mode="live"
        for frame in c:                                     # ends at the end of the stream
            y, u, v = frame.planes                          # read-only numpy views, zero copy
            print(frame.seq, frame.pts * frame.time_base, c.rate)   # rate: a Fraction

    with framesrv.Producer("out", 1280, 720, "rgb24", rate=30) as p:
        with p.reserve() as frame:                          # writable arrays
            frame.array()[:] = img                          # published at the end of the block
            frame.pts = 0                                   # (abandoned on an exception)

    framesrv.filter("in", "out", lambda a: 255 - a)         # a stage between two streams

Safety (the rule, see Frame): an array keeps its frame held. The slot goes back only
when no array of the frame is alive, so a kept array always shows its own frame and
never crashes the interpreter; a lossless producer waits meanwhile. Copy what you keep
for long (frame.copy()): a consumer whose kept frames fill every slot says so on stderr
and raises HeldFramesError (Consumer held_timeout) instead of waiting forever.

CUDA streams: Consumer(name, device="cuda") and Producer(..., device="cuda:0") read and write
frames in GPU memory; a frame's planes are DevicePlanes that torch.from_dlpack and
cupy.from_dlpack view without a copy, ordered on CUDA streams (Consumer stream=, next(stream=),
frame.release(stream=), Producer reserve(stream=) and publish(stream=)).

Fork: a Consumer or Producer belongs to the process that opened it; in a forked child every
call raises ForkedError and its close leaves the parent's as it was.

OpenCV: frame.i420() is a yuv420p frame as the (h*3/2, w) buffer of COLOR_YUV2BGR_I420
(a view when the slot's planes are back to back, else a copy: see Frame.i420).

The protocol is libframesrv's (compiled into framesrv._framesrv); errors raise
framesrv.Error subclasses: str(e) is its one-line message, e.code its status.
"""
from ._framesrv import (  # noqa: F401
    BadData,
    Busy,
    Detached,
    DevicePlane,
    Error,
    ForkedError,
    HeldFramesError,
    InvalidArgument,
    MediaKindError,
    MemoryKindError,
    NoMemory,
    NotFound,
    StateError,
    SystemCallError,
    ZMQError,
    pix_fmt_from_name,
    pix_fmt_name,
)
from ._framesrv import version as library_version  # noqa: F401
from ._frame import (  # noqa: F401
    FLAG_DISCONTINUITY, FLAG_END_OF_STREAM, FLAG_KEY, ChromaLocation, FieldOrder, Frame, I420CopyWarning,
)
from ._stream import Consumer, EndOfStream, Producer, default_client_name  # noqa: F401
from ._filter import filter, stop_on_signals  # noqa: F401

__version__ = "2.0.0"   # 1.0: framesrv protocol version 2; 1.1: version 3 and 4; 2.0: version 5 (audio)

__all__ = [
    "Consumer", "Producer", "Frame", "I420CopyWarning", "FieldOrder", "ChromaLocation", "filter", "stop_on_signals",
    "EndOfStream", "default_client_name",
    "Error", "InvalidArgument", "NotFound", "BadData", "SystemCallError", "Busy", "StateError",
    "NoMemory", "Detached", "ZMQError", "HeldFramesError", "MediaKindError", "MemoryKindError", "ForkedError", "DevicePlane",
    "FLAG_KEY", "FLAG_END_OF_STREAM", "FLAG_DISCONTINUITY",
    "pix_fmt_name", "pix_fmt_from_name", "library_version",
]
