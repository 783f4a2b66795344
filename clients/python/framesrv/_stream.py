"""Consumer and Producer: framesrv streams through libframesrv."""
import os
import re
import sys
import weakref
from fractions import Fraction

from . import _framesrv
from ._frame import LAYOUTS, Frame, _ratio, _stream_handle

_TIMEOUT, _END, _GONE = _framesrv.TIMEOUT, _framesrv.END, _framesrv.GONE
_CFrame = _framesrv.Frame

#: Consumers and Producers of this process not closed yet: a forked child marks them (below).
_open_handles = weakref.WeakSet()


def _after_fork_in_child():
    """os.register_at_fork(after_in_child=...): every Consumer and Producer of the parent refuses
    from now on (ForkedError, one line), with no system call per call and no lock taken; their
    close and garbage collection free the child's copy only, so the parent's go on unaffected."""
    for handle in list(_open_handles):
        handle._forked_in_child()
    _open_producers.clear()   # an uncaught exception here does not end the parent's streams


os.register_at_fork(after_in_child=_after_fork_in_child)


def _device(device):
    """(memory, ordinal) of a device argument: None, "cpu" or "host": host memory; "cuda" (the
    stream's device), "cuda:N", an int N or a torch.device: CUDA memory."""
    if device is None:
        return _framesrv.MEMORY_HOST, None
    if isinstance(device, int) and not isinstance(device, bool):
        return _framesrv.MEMORY_CUDA, device
    m = re.fullmatch(r"(cpu|host)|cuda(?::(\d+))?", str(device))
    if not m:
        raise _framesrv.InvalidArgument(f"device {device!r}: use None or 'cpu' (host memory), 'cuda' or 'cuda:N'", -1)
    if m.group(1):
        return _framesrv.MEMORY_HOST, None
    return _framesrv.MEMORY_CUDA, int(m.group(2)) if m.group(2) else None


def _memory_hint(e, memory):
    """The library's line for a stream of the other memory kind, with the Python way to open it."""
    hint = ("; from Python: framesrv.Consumer(name, device='cuda')" if memory == _framesrv.MEMORY_HOST
            else "; from Python: framesrv.Consumer(name) (no device)")
    return _framesrv.MemoryKindError(e.args[0] + hint, *e.args[1:])


class EndOfStream(Exception):
    """The stream ended (every frame was delivered), or its producer died (``gone``)."""

    def __init__(self, gone=False):
        super().__init__("the producer died" if gone else "the stream ended")
        self.gone = gone


def _pix_fmt_code(pix_fmt):
    if isinstance(pix_fmt, int):
        code = pix_fmt if _framesrv.pix_fmt_name(pix_fmt) else 0
    else:
        code = _framesrv.pix_fmt_from_name(str(pix_fmt))
    if not code:
        raise _framesrv.InvalidArgument(f"unknown pixel format: {pix_fmt!r}", -1)
    return code


#: FFmpeg's names of the sample formats, by code - 1 (PROTOCOL.md 4.6).
_SAMPLE_FORMATS = ("u8", "s16", "s32", "flt", "dbl", "u8p", "s16p", "s32p", "fltp", "dblp", "s64", "s64p")


def _audio_options(sample_format, sample_rate, channels, layout, max_samples):
    """(sample_fmt code, sample_rate, channels, channel_mask, max_samples) of Producer's audio
    arguments; the library checks their ranges."""
    if sample_format not in _SAMPLE_FORMATS:
        raise _framesrv.InvalidArgument(f"sample_format {sample_format!r}: one of {', '.join(_SAMPLE_FORMATS)}", -1)
    if sample_rate is None:
        raise _framesrv.InvalidArgument("an audio Producer needs sample_rate (samples per second, e.g. 48000)", -1)
    names = {name: mask for mask, name in LAYOUTS.items()}
    if isinstance(layout, str) and layout not in names:
        raise _framesrv.InvalidArgument(f"layout {layout!r}: one of {', '.join(names)}, an AV_CH_* mask, or None", -1)
    mask = names[layout] if isinstance(layout, str) else int(layout or 0)
    if channels is None and not mask:
        raise _framesrv.InvalidArgument("an audio Producer needs channels or a layout", -1)
    channels = bin(mask).count("1") if channels is None else int(channels)
    return _SAMPLE_FORMATS.index(sample_format) + 1, int(sample_rate), channels, mask, int(max_samples)


def _rate_fraction(rate):
    """A nominal rate (int, Fraction, "30000/1001", "29.97", a float or None) as a Fraction
    or None. Exact except for floats, which are approximated as FFmpeg's av_d2q(x, 1001000)
    does (29.97 -> 2997/100)."""
    if rate is None or rate == 0:
        return None
    try:
        if isinstance(rate, float):
            rate = Fraction(rate).limit_denominator(1001000)
        rate = Fraction(rate)
    except (ValueError, TypeError, ZeroDivisionError, OverflowError):
        raise _framesrv.InvalidArgument(f"bad rate (N, N/D or a decimal): {rate!r}", -1) from None
    if rate <= 0 or rate.numerator >= 2**63 or rate.denominator >= 2**63:
        raise _framesrv.InvalidArgument(f"bad rate: {rate}", -1)
    return rate


def default_client_name():
    """What monitors (framesrv ls/top/web) call this process: the script's name without
    .py (``python3 edges.py`` -> "edges"; ``python -m pkg`` -> "pkg"), "python" for
    ``python -c`` and the REPL."""
    path = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-") else ""
    base = os.path.basename(path)
    if base == "__main__.py":
        base = os.path.basename(os.path.dirname(path))
    if base.endswith(".py"):
        base = base[:-3]
    return base[:31] or "python"


def _ends_failed(exc_type, exc):
    """Whether leaving a stage with this exception ends its output stream as failed (sinks
    exit non-zero): any exception but a stop (KeyboardInterrupt, as stop_on_signals raises
    for SIGINT/SIGTERM, GeneratorExit) or ``sys.exit(0)``."""
    if exc_type is None or issubclass(exc_type, (KeyboardInterrupt, GeneratorExit)):
        return False
    if issubclass(exc_type, SystemExit):
        return exc is not None and exc.code not in (None, 0)
    return True


class Consumer:
    """Reads stream NAME: ``for frame in Consumer("cam"):`` ... until the stream ends.

    mode: "lossless" (every frame, in order, exactly once; the producer waits for this
    consumer) or "live" (the newest frame; frames it could not keep up with are skipped
    and counted). timeout: seconds to wait for the stream to appear (None: forever), then
    ``NotFound``. reattach: when the producer dies, wait for the next producer of the same
    name instead of ending the iteration. poll_us: next() busy-polls up to this many
    microseconds (0..1000000) per frame, trading a core for latency; on a paced stream the
    window is centred on when the next frame is due, and next() sleeps until it opens; 0
    (the default) spins only on a stream faster than 20,000 frames/s (PROTOCOL.md 11.3).
    client_name: what monitors show (default: the script's name, see default_client_name).

    held_timeout: a lossless consumer whose own held frames (or arrays still referenced)
    fill the slots the producer needs waits for a frame that cannot come. next() then says
    so on stderr within 0.5 s (one line: how many slots it holds and the ways out), and
    raises ``HeldFramesError`` once that has lasted held_timeout seconds (None: the
    default, $FRAMESRV_HELD_TIMEOUT or 10 s; math.inf: never). Copy what you keep.

    Iteration gives the previous frame back when it moves on (see Frame for arrays you
    keep). close() (or leaving ``with``) detaches; with arrays still alive, the detach
    (and the unmapping) happens when the last of them is garbage-collected.

    media: "video" (the default) or "audio": the kind of stream it reads (a stream of the other
    kind is refused in one line, MediaKindError). An audio frame has ``samples`` (a numpy view
    of the slot: (nb_samples, channels) packed or mono, (channels, nb_samples) planar),
    ``sample_rate``, ``channels``, ``layout``, ``sample_format`` and ``nb_samples``.

    device: None (host memory, numpy views) or "cuda" / "cuda:N" for a stream whose frames are
    in CUDA memory: frames then have DevicePlanes (DLPack, CUDA Array Interface; see Frame). A
    stream of the other kind is refused in one line (MemoryKindError), as is "cuda:N" for a
    stream on another device. stream: the CUDA stream next() and iteration queue each frame's
    ready wait on (an int CUstream, a torch or CuPy stream; settable as ``consumer.stream``);
    None waits on the CPU.

    A Consumer belongs to the process that opened it: in a forked child every call raises
    ForkedError (one line), and its close or garbage collection leaves the parent's consumer
    as it was.
    """

    def __init__(self, name, mode="lossless", timeout=None, client_name=None, reattach=False, poll_us=0,
                 held_timeout=None, device=None, stream=None, media="video"):
        if mode not in ("lossless", "live"):
            raise _framesrv.InvalidArgument(f"mode must be 'lossless' or 'live', not {mode!r}", -1)
        if media not in ("video", "audio"):
            raise _framesrv.InvalidArgument(f"media must be 'video' or 'audio', not {media!r}", -1)
        memory, ordinal = _device(device)
        self.name = name
        self.mode = mode
        self.reattach = reattach
        self.gone = False
        self.stream = stream
        self._last = None
        self._stats = None
        try:
            self._c = _framesrv.Consumer(name, mode == "live", timeout, client_name or default_client_name(),
                                         int(poll_us), held_timeout, memory, 1 if media == "audio" else 0)
        except _framesrv.NotFound as e:
            # The wait ran in slices (for Ctrl-C): name the whole wait, not the last slice.
            msg = re.sub(r"within \d+ ms", f"within {timeout} s", e.args[0])
            raise _framesrv.NotFound(msg, *e.args[1:]) from None
        except _framesrv.MemoryKindError as e:
            raise _memory_hint(e, memory) from None
        self._info = self._c.stream_info()
        _open_handles.add(self)
        if ordinal is not None and self._info["device_ordinal"] != ordinal:
            self.close()
            raise _framesrv.MemoryKindError(
                f"stream '{name}' holds its frames on CUDA device {self._info['device_uuid']}, which is "
                f"cuda:{self._info['device_ordinal']} in this process, not cuda:{ordinal}: open it with "
                f"device='cuda:{self._info['device_ordinal']}' (or 'cuda')", -12)

    def _forked_in_child(self):
        self._c._forked()

    @property
    def stream(self):
        """The CUDA stream next() and iteration queue the ready wait on (a CUstream handle), None: the CPU waits."""
        return self._stream

    @stream.setter
    def stream(self, stream):
        self._stream = _stream_handle(stream)

    @property
    def memory(self):
        """The stream's memory: "host" or "cuda"."""
        return self._info["memory"]

    @property
    def device(self):
        """"cpu", or the stream's CUDA device as "cuda:N" (its ordinal in this process)."""
        return "cpu" if self._info["memory"] == "host" else f"cuda:{self._info['device_ordinal']}"

    def next(self, timeout=None, stream=None):
        """The next frame, or None if none came within timeout seconds (None: wait).
        Raises EndOfStream at the end of the stream (``gone``: the producer died).
        stream (CUDA): queue the frame's ready wait on this stream instead of consumer.stream."""
        s = self._stream if stream is None else _stream_handle(stream)
        while True:
            r = self._c.next(timeout) if s is None else self._c.next(timeout, s)
            if r.__class__ is _CFrame:
                return Frame(r)
            if r == _TIMEOUT:
                return None
            self._ended(r)

    def _ended(self, status):
        """After END or GONE: raises EndOfStream, or (GONE with reattach) attaches to the
        next producer and returns."""
        self.gone = status == _GONE
        if not (self.gone and self.reattach):
            raise EndOfStream(gone=self.gone)
        self._c.reopen(None)
        self._info = self._c.stream_info()

    def __iter__(self):
        return self

    def __next__(self):
        last = self._last
        if last is not None:   # last.release(), inlined (the per-frame path)
            self._last = None
            last._arrays = None
            last._f.release()
        s = self._stream
        while True:
            # the per-frame path: a frame is there, or next waits for it
            r = self._c.next() if s is None else self._c.next(None, s)
            if r.__class__ is _CFrame:
                frame = self._last = Frame(r)
                return frame
            if r != _TIMEOUT:
                try:
                    self._ended(r)   # the end, or the producer gone (reattach: go on)
                except EndOfStream:
                    raise StopIteration from None

    @property
    def rate(self):
        """The stream's nominal frame rate (a Fraction), None if unknown."""
        return _ratio(self._info["rate"])

    @property
    def time_base(self):
        """The stream's default time base, 1/rate (a Fraction), None if unknown. Frames
        carry their own (frame.time_base)."""
        rate = self.rate
        return 1 / rate if rate else None

    @property
    def stream_info(self):
        """The stream's facts: name, slot_count, rate, producer_pid, live_source, epoch,
        memory ("host" or "cuda"), device_uuid, device_ordinal, device_read_only."""
        if not self._c.closed:
            self._info = self._c.stream_info()
        return dict(self._info)

    @property
    def stats(self):
        """Counters: delivered, missed, bad_frames, held, restarts. After close(): the last
        ones (held as they were just before the close)."""
        if self._c.closed or self._stats is not None:
            return dict(self._stats or {})
        return self._c.stats()

    def fileno(self):
        """A descriptor that becomes readable when next may have something (edge-triggered:
        call next(timeout=0) until it returns None), for event loops. The first call
        subscribes to the stream's ZeroMQ announcements; a consumer that never asks for
        it sleeps on shared memory only."""
        return self._c.fileno()

    def close(self):
        """Gives the current frame back and detaches (deferred while arrays are alive)."""
        if self._last is not None:
            self._last.release()
            self._last = None
        if self._stats is None and not self._c.closed and not self._c.forked:
            self._stats = self._c.stats()
        _open_handles.discard(self)
        return self._c.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


#: Producers not closed yet: an uncaught exception ends their streams as failed.
_open_producers = weakref.WeakSet()
_previous_excepthook = None


def _excepthook(exc_type, exc, tb):
    """sys.excepthook while producers are open: a script that dies of an exception ends
    every stream it still publishes as failed (not cleanly, as the exit would), then the
    previous hook prints the traceback."""
    if _ends_failed(exc_type, exc):
        for producer in list(_open_producers):
            producer._end_failed()
    (_previous_excepthook or sys.__excepthook__)(exc_type, exc, tb)


def _watch_uncaught(producer):
    global _previous_excepthook
    _open_producers.add(producer)
    if sys.excepthook is not _excepthook:
        _previous_excepthook = sys.excepthook
        sys.excepthook = _excepthook


class Producer:
    """Publishes stream NAME: ``with producer.reserve() as frame:`` fills writable arrays;
    the frame is published at the end of the block, abandoned on an exception.

    rate: nominal frame rate, exact (int, Fraction, "30000/1001", a decimal string or float
    approximated as av_d2q does; None: unknown); the default time base is 1/rate and pts
    counts frames (pts = seq - 1) unless you set them. slots: pool
    slots (1..64). live_source: reserve never waits for consumers (a frame with no free
    slot is dropped: try_reserve returns None). close() (or leaving ``with``) ends the
    stream; consumers get every frame published, then the end. producer_name: what
    monitors show as its producer (default: the script's name, see default_client_name).
    Leaving ``with`` on an
    exception, or the script dying of an uncaught one, ends it as failed
    (``end(failed=True)``: ``framesrv sink`` exits 1, a recording is known to be cut
    short); KeyboardInterrupt (a stop, see stop_on_signals) and sys.exit(0) end it cleanly.

    device: None (host memory) or "cuda" / "cuda:N": frames in the memory of that CUDA device,
    whose planes are writable DevicePlanes until the publish (``torch.from_dlpack``, see
    Frame). reserve(stream=S) queues the waits for the slot's previous readers on S, and
    publish(stream=S) the frame's ready fence after S's work (default: the stream the frame
    was last given, else the legacy default stream). In a forked child every call raises
    ForkedError and the close leaves the parent's stream as it was.

    media="audio" publishes sound (PROTOCOL.md 4.6): no width, height or pix_fmt, but
    sample_format (FFmpeg's name: u8, s16, s32, flt, dbl, s64, or planar u8p ... s64p),
    sample_rate (1..768000), channels (1..64) and/or layout ('mono', 'stereo', '5.1', ...
    or an AV_CH_* mask; None: the order is unspecified) and max_samples (1..2^20, the most
    samples per channel of one frame; slots are sized for it). reserve() gives a frame whose
    ``samples`` is a writable numpy view of max_samples samples: (max_samples, channels) packed
    (and mono), (channels, max_samples) planar. Set ``frame.nb_samples`` (1..max_samples)
    before the publish to publish only the first nb_samples of each channel. The time base is
    1/sample_rate, pts counts the samples published before the frame and duration is its
    nb_samples, unless you set them. (A planar frame shorter than max_samples has its rows
    moved together at the publish: a view kept past it no longer shows the frame.)
    """

    def __init__(self, name, width=None, height=None, pix_fmt="yuv420p", rate=None, slots=8,
                 live_source=False, live_max_held=1, color_matrix=0, color_range=0,
                 color_primaries=0, color_transfer=0, producer_name=None, device=None, media="video",
                 sample_format=None, sample_rate=None, channels=None, layout=None, max_samples=1024):
        memory, ordinal = _device(device)
        self.name = name
        r = _rate_fraction(rate)
        self.rate = r
        if media not in ("video", "audio"):
            raise _framesrv.InvalidArgument(f"media must be 'video' or 'audio', not {media!r}", -1)
        self.media = media
        audio = (0, 0, 0, 0, 0)
        if media == "audio":
            if width is not None or height is not None:
                raise _framesrv.InvalidArgument("an audio Producer has no width or height", -1)
            audio = _audio_options(sample_format, sample_rate, channels, layout, max_samples)
            self.sample_format, self.sample_rate, self.channels, self.channel_mask, self.max_samples = (
                sample_format, *audio[1:])
            self.pix_fmt, self.width, self.height, code = sample_format, 0, 0, 0
        elif width is None or height is None or sample_format or sample_rate or channels or layout:
            raise _framesrv.InvalidArgument("a video Producer needs width and height; sample_format, sample_rate, "
                                            "channels and layout are for media='audio'", -1)
        else:
            code = _pix_fmt_code(pix_fmt)
            self.pix_fmt = _framesrv.pix_fmt_name(code)
            self.width, self.height = int(width), int(height)
        self._p = _framesrv.Producer(
            name, self.width, self.height, code, int(slots),
            r.numerator if r else 0, r.denominator if r else 0, bool(live_source), int(live_max_held),
            color_matrix, color_range, color_primaries, color_transfer, producer_name or default_client_name(),
            memory, ordinal or 0, 1 if media == "audio" else 0, *audio)
        self._reserved = None
        self.device = "cpu" if memory == _framesrv.MEMORY_HOST else f"cuda:{ordinal or 0}"
        _open_handles.add(self)
        _watch_uncaught(self)

    def _forked_in_child(self):
        self._p._forked()

    @property
    def time_base(self):
        """The default time base, 1/rate (a Fraction), None if the rate is unknown; audio: 1/sample_rate."""
        if self.media == "audio":
            return Fraction(1, self.sample_rate)
        return 1 / self.rate if self.rate else None

    def try_reserve(self, timeout=None, stream=None):
        """A free slot as a writable Frame, or None if none became free within timeout
        seconds (a live source never waits: None means the frame was dropped). stream (CUDA):
        the waits for the slot's previous readers are queued on it (else the CPU waits)."""
        if self._reserved is not None:
            raise _framesrv.StateError("a frame is reserved already: publish or abandon it first", -6)
        handle = self._p.reserve(timeout) if stream is None else self._p.reserve(timeout, _stream_handle(stream))
        if handle is None:
            return None
        frame = self._reserved = Frame(handle, self)
        return frame

    def reserve(self, timeout=None, stream=None):
        """A free slot as a writable Frame (use it with ``with``); raises TimeoutError if
        none became free within timeout seconds, or a live source dropped the frame."""
        frame = self.try_reserve(timeout, stream)
        if frame is None:
            raise TimeoutError("no free slot (a live source drops the frame)")
        return frame

    def publish(self, frame, stream=None):
        """Publishes a reserved frame (its header fields as set on it). A CUDA frame's ready
        fence follows the work queued on ``stream``, else on the frame's stream (the one last
        given to reserve or to a plane's __dlpack__), else on the legacy default stream."""
        self._finish(frame, True, stream)

    def abandon(self, frame):
        """Gives a reserved frame back unpublished."""
        self._finish(frame, False)

    def _finish(self, frame, publish, stream=None):
        f = frame._f
        if f.state != "live":
            return
        if frame._arrays is not None or getattr(frame, "_tracked", None) is not None:   # arrays were taken
            frame._drop_arrays()
        if not publish:
            f.abandon()
        elif stream is None:
            f.publish()   # the header fields were written into the frame as they were set
        else:
            f.publish(_stream_handle(stream))
        self._reserved = None   # a refused publish (InvalidArgument) leaves it reserved: fix a field, publish again

    def wait_for_consumers(self, count, timeout=None):
        """Blocks until `count` lossless consumers are attached: True, or False after
        timeout seconds."""
        return self._p.wait_for_consumers(int(count), timeout)

    def change_format(self, width, height, pix_fmt):
        """A mid-stream format change (a new pool epoch). Frames consumers hold stay valid."""
        self._p.change_format(int(width), int(height), _pix_fmt_code(pix_fmt))
        self.width, self.height = int(width), int(height)
        self.pix_fmt = _framesrv.pix_fmt_name(_pix_fmt_code(pix_fmt))

    def end(self, failed=False):
        """Ends the stream (failed: the source failed); no frame may follow."""
        self._abandon_reserved()
        self._p.end(bool(failed))

    def _end_failed(self):
        """Ends the stream as failed, unless it was ended or closed already."""
        try:
            self.end(failed=True)
        except _framesrv.StateError:
            pass   # closed: it has ended

    @property
    def stats(self):
        """Counters: published, dropped, abandoned, consumers, reclaimed, blocked_ns."""
        return self._p.stats()

    def _abandon_reserved(self):
        if self._reserved is not None:
            self._finish(self._reserved, False)

    def close(self):
        """Ends the stream and closes (the close itself is deferred while arrays of
        published frames are alive)."""
        self._abandon_reserved()
        _open_producers.discard(self)
        _open_handles.discard(self)
        return self._p.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if _ends_failed(exc_type, exc):
            self._end_failed()
        self.close()
        return False
