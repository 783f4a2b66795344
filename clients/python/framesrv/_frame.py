"""Frames: numpy views of one frame's planes in the shared pool (DevicePlanes for a CUDA
stream's frames), and its header."""
import enum
import warnings
import weakref
from fractions import Fraction
from operator import attrgetter

import numpy as np

from . import _framesrv

FLAG_KEY = 1
FLAG_END_OF_STREAM = 2
FLAG_DISCONTINUITY = 4

_asarray = np.asarray
_C_ARRAYS = hasattr(_framesrv.Frame, "arrays")   # built with numpy's headers (setup.py)

#: the header fields copy_header_from copies (and flags, but END_OF_STREAM)
_COPIED = ("color_matrix", "color_range", "color_primaries", "color_transfer", "duration", "capture_ns", "pts",
           "time_base", "sar", "field_order", "chroma_location", "source_dropped")


class I420CopyWarning(UserWarning):
    """frame.i420() had to copy: the slot's planes are not back to back without padding."""


class FieldOrder(enum.IntEnum):
    """A frame's field order: FFmpeg's AVFieldOrder values (the header's field_order)."""
    UNKNOWN = 0
    PROGRESSIVE = 1
    TT = 2   # top field first, top coded first
    BB = 3   # bottom field first, bottom coded first
    TB = 4   # top field first, bottom coded first
    BT = 5   # bottom field first, top coded first


class ChromaLocation(enum.IntEnum):
    """Where chroma samples sit: FFmpeg's AVChromaLocation values (the header's chroma_location)."""
    UNSPECIFIED = 0
    LEFT = 1       # MPEG-2/4 4:2:0, H.264 default for 4:2:0
    CENTER = 2     # MPEG-1 4:2:0, JPEG 4:2:0
    TOPLEFT = 3    # ITU-R 601, SMPTE 274M 296M S314M(DV 4:1:1), mpeg2 4:2:2
    TOP = 4
    BOTTOMLEFT = 5
    BOTTOM = 6


def _stream_handle(stream):
    """A CUDA stream argument as its CUstream handle (an int), None for None: an int as it is
    (0 and 1: the legacy default stream, 2: the per-thread one), or a stream object of torch or
    CuPy (``__cuda_stream__``, ``.cuda_stream``, ``.ptr``)."""
    if stream is None or type(stream) is int:
        return stream
    proto = getattr(stream, "__cuda_stream__", None)
    if proto is not None:
        value = proto() if callable(proto) else proto
        return int(value[1] if isinstance(value, tuple) else value)
    for attr in ("cuda_stream", "ptr"):
        value = getattr(stream, attr, None)
        if isinstance(value, int):
            return value
    if isinstance(stream, int):
        return int(stream)
    raise TypeError(f"stream: an int CUstream handle or a stream object with __cuda_stream__, .cuda_stream or .ptr "
                    f"(torch.cuda.Stream, cupy.cuda.Stream), not {type(stream).__name__}")


def _plane_views(handle):
    """The planes as numpy arrays through the buffer protocol (an extension built without numpy's
    headers), or a CUDA frame's DevicePlanes."""
    planes = handle.planes()
    return planes if handle.memory == _framesrv.MEMORY_CUDA else tuple(map(_asarray, planes))


def _ratio(pair):
    num, den = pair
    return Fraction(num, den) if num > 0 and den > 0 else None


#: FFmpeg's names of the common channel layouts by their AV_CH_* mask (native order).
LAYOUTS = {0x4: "mono", 0x3: "stereo", 0x3F: "5.1", 0x60F: "5.1(side)", 0x63F: "7.1", 0x7: "2.1", 0x107: "4.0"}


class Frame:
    """One frame of a stream: its planes as numpy arrays that view shared memory without
    a copy, and every field of its header.

    Safety: an array keeps its frame held. Every array of the frame counts on it;
    ``release()`` (or leaving ``with frame:``, or the consumer's loop moving on) gives
    the slot back only when no array of the frame is alive any more, else the slot goes
    back when the last array is garbage-collected. So a kept array always shows its own
    frame, never a recycled slot, and never crashes the interpreter (numpy#23305), even
    after the consumer was closed or the producer changed the format. The price: a
    lossless producer waits for a frame whose arrays you keep, and a live consumer may
    hold only a few frames at once (``StateError`` beyond). Keep a copy instead when you
    need the pixels for long: ``frame.copy()`` or ``np.array(arr, copy=True)``. (A lossless
    consumer whose kept frames fill the producer's slots says so on stderr and raises
    ``HeldFramesError``: see Consumer's held_timeout.)

    A CUDA stream's frame (``Consumer(..., device="cuda")``) has no host bytes: its planes are
    DevicePlanes, which ``torch.from_dlpack``, ``cupy.from_dlpack`` or any consumer of DLPack or
    the CUDA Array Interface views without a copy, keeping the frame held in the same way (see
    ``release`` for the stream its release is ordered on).

    A consumer's arrays are read-only (exported read-only; the pool is mapped read-only).
    A producer's arrays are writable until the frame is published; at publish they are
    made read-only (``arr.flags.writeable = False``) and the frame's slot is not reused
    while any of them is alive. Views you derived from them before the publish (slices,
    ``arr[..., ::-1]``) keep their writeable flag: never write through them after the
    publish. The arrays of an abandoned frame stay valid memory but may show a later
    frame.
    """

    __slots__ = ("_f", "_arrays", "_tracked", "_producer", "__weakref__")

    def __init__(self, handle, producer=None):
        # The per-frame path: nothing but these stores. The header is never copied into a dict:
        # each field is read from the frame's header when asked for (one C getter, see below),
        # and a producer's fields are written into it when set.
        self._f = handle
        self._arrays = None
        self._producer = producer
        if producer is not None:
            self._tracked = None   # weak references to the arrays handed out (made read-only at publish)

    @property
    def _info(self):
        """Every header field (a dict, made anew on each call)."""
        return self._f.info()

    # ---- arrays ---------------------------------------------------------------------
    @property
    def planes(self):
        """The planes as numpy arrays: (h, w) for one component, (h, w, C) for interleaved
        ones (rgb24 (h, w, 3), bgra (h, w, 4), nv12's plane 1 (h/2, w/2, 2)); dtype uint8,
        or '<u2' for 16-bit formats. Shape and strides come from the header (row padding is
        in the strides, not the shape). Zero copy: they view the pool. A CUDA frame's planes are
        DevicePlanes of the same shape and strides (``__dlpack__``, ``__cuda_array_interface__``)."""
        arrays = self._arrays
        if arrays is None:
            f = self._f
            arrays = f.arrays() if _C_ARRAYS else _plane_views(f)
            if self._producer is not None:
                self._track(arrays)
            self._arrays = arrays
        return arrays

    def array(self):
        """The picture as one array: packed formats (rgb24, bgra, gray ...) as (h, w[, C]);
        planar formats give plane 0 (the luma)."""
        return self.planes[0]

    def copy(self):
        """Owned copies of the planes (a tuple of numpy arrays): keep these, not the views,
        when the pixels must outlive the frame without holding its slot. (A CUDA frame: copy its
        tensors instead, ``torch.from_dlpack(p).clone()``.)"""
        self._host_only("copy()", "torch.from_dlpack(plane).clone() or .cpu()")
        return tuple(np.array(p, copy=True) for p in self.planes)

    def _host_only(self, what, instead):
        if self._f.memory == _framesrv.MEMORY_CUDA:
            raise _framesrv.MemoryKindError(f"{what}: frame {self.seq} is in CUDA memory (cuda:{self._f.device}): use "
                                            f"{instead}", -12)

    def i420(self, copy=None):
        """A yuv420p (or yuv420p10le) frame as one (h*3/2, w) array: Y's h rows, then U's
        and V's (w/2 * h/2 samples each, two to a row), the buffer OpenCV's
        ``cv2.cvtColor(a, cv2.COLOR_YUV2BGR_I420)`` wants. Width and height must be even.

        copy=None: a view of the slot (zero copy, it keeps the frame held like any array)
        when the slot's planes lie back to back without padding (Y at stride w, then U and
        V at stride w/2: the canonical layout does that when w is a multiple of 128),
        else a copy, with a one-time warning (``I420CopyWarning``). copy=False: a view, or
        ValueError; copy=True: always a copy (holds no slot). ``frame.i420_is_view`` says
        which copy=None gives. A producer's view is writable until the publish, so
        ``cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420, dst=frame.i420(copy=False))`` fills
        the frame in place.
        """
        y, u, v = self._i420_planes()
        if copy is not True and self._i420_contiguous(y, u, v):
            return self._i420_view(y)
        if copy is False:
            raise ValueError(f"i420(copy=False): the planes of this {self.width}x{self.height} frame are not "
                             "back to back without padding (strides " f"{y.strides[0]}, {u.strides[0]}, "
                             f"{v.strides[0]}): use i420() for a copy")
        if copy is None:
            warnings.warn(f"frame.i420(): the slot's planes are padded ({self.width}x{self.height}, strides "
                          f"{y.strides[0]}/{u.strides[0]}), so this is a copy; widths that are multiples of "
                          "128 give a zero-copy view", I420CopyWarning, stacklevel=2)
        out = np.empty((self.height * 3 // 2, self.width), dtype=y.dtype)
        flat, n = out.reshape(-1), y.size
        flat[:n] = y.reshape(-1)
        flat[n:n + u.size] = u.reshape(-1)
        flat[n + u.size:] = v.reshape(-1)
        return out

    @property
    def i420_is_view(self):
        """Whether i420() (copy=None) views the slot (True) or copies (False)."""
        return self._i420_contiguous(*self._i420_planes())

    def _i420_planes(self):
        self._host_only("i420()", "its planes through DLPack")
        if self.pix_fmt not in ("yuv420p", "yuv420p10le"):
            raise ValueError(f"i420() needs a yuv420p frame, this one is {self.pix_fmt} (use frame.planes)")
        if self.width % 2 or self.height % 2:
            raise ValueError(f"i420() needs an even width and height, this frame is {self.width}x{self.height} "
                             "(use frame.planes)")
        return self.planes

    def _i420_contiguous(self, y, u, v):
        item = y.itemsize
        w, h = self.width, self.height
        y0 = y.__array_interface__["data"][0]
        return (y.strides[0] == w * item and u.strides[0] == v.strides[0] == w // 2 * item
                and u.__array_interface__["data"][0] == y0 + w * h * item
                and v.__array_interface__["data"][0] == y0 + w * h * item * 5 // 4)

    def _i420_view(self, y):
        """Y's array stretched over the three planes (they are back to back): its base chain
        keeps the frame held; a producer's joins the arrays made read-only at publish."""
        w, h = self.width, self.height
        view = np.lib.stride_tricks.as_strided(y, shape=(h * 3 // 2, w), strides=(w * y.itemsize, y.itemsize),
                                               writeable=y.flags.writeable)
        if self._producer is not None:
            self._track((view,))
        return view

    def _track(self, arrays):
        """A producer's arrays: made read-only at the publish (see _drop_arrays)."""
        if self._tracked is None:
            self._tracked = []
        self._tracked.extend(weakref.ref(a) for a in arrays)

    def dlpack(self, plane=0):
        """The plane as an object for ``torch.from_dlpack`` (or any DLPack consumer): the
        array itself (a CUDA frame's DevicePlane, see Frame); numpy exports read-only arrays through DLPack 1.0
        (``__dlpack__(max_version=(1, 0))``, the read-only flag set; numpy >= 2.1), which
        torch asks for. No copy is made, and the tensor keeps the frame held. torch has no
        read-only tensors: never write into the tensor of a consumer's frame (its pages
        are mapped read-only; a write kills the process); write into a clone."""
        return self.planes[plane]

    def _drop_arrays(self):
        """Forgets the frame's own references to its arrays; producer arrays still alive
        are made read-only."""
        self._arrays = None
        tracked = getattr(self, "_tracked", None)
        if tracked:
            for ref in tracked:
                a = ref()
                if a is not None and hasattr(a, "flags"):   # DevicePlanes turn read-only by themselves
                    a.flags.writeable = False
            self._tracked = None

    # ---- life -----------------------------------------------------------------------
    def release(self, stream=None):
        """Gives the frame back (consumer frames). Returns True if the slot went back now,
        False if arrays of the frame are still alive (it goes back when the last dies).

        A CUDA frame goes back once the work queued on a stream so far is done (the stream
        writes the frame's release fence; the CPU does not wait): on ``stream`` (an int
        CUstream, a torch or CuPy stream), else on the stream the frame was last given (to
        ``next``, to ``__dlpack__``, as ``torch.from_dlpack`` does with its current stream,
        or to an earlier ``release``), else on the legacy default stream. A release deferred
        by live tensors uses the stream last given when the last of them goes."""
        self._arrays = None
        if stream is None:
            return self._f.release()
        return self._f.release(_stream_handle(stream))

    @property
    def memory(self):
        """Where the planes are: "host" (numpy views) or "cuda" (DevicePlanes)."""
        return "cuda" if self._f.memory == _framesrv.MEMORY_CUDA else "host"

    @property
    def device(self):
        """"cpu", or "cuda:N" (N: the device's ordinal in this process)."""
        return f"cuda:{self._f.device}" if self._f.memory == _framesrv.MEMORY_CUDA else "cpu"

    def device_plane(self, plane=0):
        """A CUDA frame's plane as libframesrv describes it (framesrv_frame_device_plane): ptr
        (the CUdeviceptr of row 0), pitch, size, row_bytes, width, height, components and
        sample_bytes. MemoryKindError for a host frame."""
        return self._f.device_plane(plane)

    @property
    def released(self):
        """True once release() (or publish/abandon) was called."""
        return self._f.state != "live"

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._producer is None:
            self.release()
        else:
            self._producer._finish(self, exc_type is None)
        return False

    # ---- the header -----------------------------------------------------------------
    # Each field reads the frame's header in C (a consumer's is the copy libframesrv validated
    # at the acquire; it stays readable after the release); a setter writes a reserved producer
    # frame's header at once (range-checked), which publish sends.
    seq = property(attrgetter("_f.seq"), doc="sequence number: 1, 2, ... per stream")
    epoch = property(attrgetter("_f.epoch"), doc="the pool epoch (changes with the format)")
    width = property(attrgetter("_f.width"))
    height = property(attrgetter("_f.height"))
    pix_fmt = property(attrgetter("_f.pix_fmt"), doc="FFmpeg's name of the pixel format")
    publish_ns = property(attrgetter("_f.publish_ns"), doc="CLOCK_MONOTONIC at publish")
    # Audio frames (PROTOCOL.md 4.6): width and height are 0, pix_fmt names the sample format.
    media = property(lambda self: "audio" if self._f.media == 1 else "video", doc="'video' or 'audio'")
    sample_rate = property(attrgetter("_f.sample_rate"), doc="audio: samples per second per channel")
    channels = property(attrgetter("_f.channels"), doc="audio: channels")
    channel_mask = property(attrgetter("_f.channel_mask"), doc="audio, native order: FFmpeg's AV_CH_* bits")
    sample_format = property(attrgetter("_f.pix_fmt"), doc="audio: FFmpeg's name of the sample format ('fltp', 's16')")

    @property
    def layout(self):
        """audio: the channel layout as FFmpeg names the common ones ('mono', 'stereo', '5.1',
        '5.1(side)'), else 'N channels'."""
        f = self._f
        return LAYOUTS.get(f.channel_mask, f"{f.channels} channels") if f.channel_order == 1 else f"{f.channels} channels"

    @property
    def samples(self):
        """audio: the samples as one numpy array viewing the slot (zero copy, held as planes are):
        (nb_samples, channels) for a packed format (and mono), (channels, nb_samples) for a planar
        one (one row per channel); dtype from the sample format (uint8, int16, int32, float32,
        float64, int64)."""
        if self._f.media != 1:
            raise _framesrv.MediaKindError(f"frame {self.seq} is a picture: read its planes", -14)
        return self.planes[0]

    def _field(key, doc):  # noqa: N805 - a property factory
        return property(attrgetter("_f." + key), lambda self, v: setattr(self._f, key, int(v)), doc=doc)

    color_matrix = _field("color_matrix", "H.273 MatrixCoefficients (2: unspecified)")
    color_range = _field("color_range", "0 unspecified, 1 limited, 2 full")
    color_primaries = _field("color_primaries", "H.273 ColourPrimaries")
    color_transfer = _field("color_transfer", "H.273 TransferCharacteristics")
    duration = _field("duration", "in time_base units, 0 unknown")
    capture_ns = _field("capture_ns", "CLOCK_MONOTONIC at capture or decode (0: publish time)")
    flags = _field("flags", "FLAG_KEY | FLAG_END_OF_STREAM | FLAG_DISCONTINUITY")
    source_dropped = _field("source_dropped", "frames a live source dropped just before this one "
                            "(0: none; the frame then carries FLAG_DISCONTINUITY)")
    nb_samples = _field("nb_samples", "audio: samples per channel in this frame. A producer's frame: preset to "
                        "max_samples (``samples`` views that many); set 1..max_samples before the publish to publish "
                        "the first nb_samples of each channel")
    del _field

    def _enum_field(key, kind, doc):  # noqa: N805 - a property factory
        get = attrgetter("_f." + key)
        return property(lambda self: kind(get(self)), lambda self, v: setattr(self._f, key, int(kind(v))), doc=doc)

    field_order = _enum_field("field_order", FieldOrder, "a FieldOrder (FFmpeg's AVFieldOrder: 0 unknown, "
                              "1 progressive, 2 tt, 3 bb, 4 tb, 5 bt)")
    chroma_location = _enum_field("chroma_location", ChromaLocation, "a ChromaLocation (FFmpeg's AVChromaLocation: "
                                  "0 unspecified, 1 left, 2 center, 3 topleft, 4 top, 5 bottomleft, 6 bottom)")
    del _enum_field

    @property
    def pts(self):
        """Presentation timestamp in time_base units, None if unknown."""
        return self._f.pts

    @pts.setter
    def pts(self, value):
        self._f.pts = None if value is None else int(value)

    @property
    def time_base(self):
        """The time base of pts and duration (a Fraction), None if unknown."""
        return _ratio(self._f.time_base)

    @time_base.setter
    def time_base(self, value):
        value = Fraction(value)
        self._f.time_base = (value.numerator, value.denominator)

    @property
    def sar(self):
        """Sample aspect ratio (a Fraction), None if unknown."""
        return _ratio(self._f.sar)

    @sar.setter
    def sar(self, value):
        value = Fraction(value) if value else Fraction(0, 1)
        self._f.sar = (value.numerator, value.denominator) if value else (0, 1)

    @property
    def key(self):
        """A keyframe."""
        return bool(self._f.flags & FLAG_KEY)

    @key.setter
    def key(self, value):
        flags = self._f.flags
        self._f.flags = (flags | FLAG_KEY) if value else (flags & ~FLAG_KEY)

    def copy_header_from(self, other):
        """Copies pts, time base, duration, colour, sar, field order, chroma location, flags
        (but END_OF_STREAM) and capture time from another frame (a filter's pass-through)."""
        mine, theirs = self._f, other._f
        for k in _COPIED:
            setattr(mine, k, getattr(theirs, k))
        mine.flags = theirs.flags & ~FLAG_END_OF_STREAM

    # ---- checks -----------------------------------------------------------------------
    def pattern_check(self):
        """Bytes of the frame that differ from the test pattern of its seq (0: intact)."""
        return self._f.pattern_check()

    def fill_pattern(self):
        """Fills a reserved frame with the test pattern of its seq (PROTOCOL.md 21)."""
        self._f.pattern_fill()

    def _pool_range(self):
        """(address, bytes) of the pool mapping this frame lives in (zero-copy checks)."""
        return self._f._pool_range()

    def _device_range(self):
        """(CUdeviceptr, bytes) of the device allocation a CUDA frame lives in (zero-copy checks)."""
        return self._f._device_range()

    def __repr__(self):
        f = self._f
        return f"<framesrv.Frame seq={f.seq} {f.width}x{f.height} {f.pix_fmt} pts={f.pts} {f.state}>"
