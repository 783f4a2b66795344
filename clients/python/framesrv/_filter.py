"""framesrv.filter: a stage between two streams, and the stop-signal helper."""
import inspect
import signal
import threading

import numpy as np

from . import _framesrv
from ._stream import Consumer, Producer, _ends_failed, _pix_fmt_code

_RGB = {"rgb24", "bgr24", "bgra", "rgba", "gbrp"}


def stop_on_signals(signals=(signal.SIGINT, signal.SIGTERM)):
    """Makes SIGINT and SIGTERM raise KeyboardInterrupt (SIGINT does by default), so a
    stage written as ``with Producer(...) as p:`` ends its stream cleanly when it is
    stopped: the reserved frame is abandoned, consumers get every frame published and
    then the end. Waits inside framesrv (next, reserve) notice a signal within 100 ms.
    Call it from the main thread."""
    def handler(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)
    for s in signals:
        signal.signal(s, handler)
    # A parent may have spawned us with them blocked (the mask is inherited): unblock.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)


def _wants_two(fn, in_place):
    if in_place is not None:
        return bool(in_place)
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    except (TypeError, ValueError):
        return False
    return len(params) >= 2


def _store(out_frame, result, in_frame):
    """Copies fn's result into the output frame: one array fills plane 0 (the planes after
    it are copied from the input when they have the same shape: a luma-only function on
    yuv420p keeps the chroma), a sequence of arrays fills plane by plane."""
    planes = out_frame.planes
    results = list(result) if isinstance(result, (list, tuple)) else [result]
    if len(results) > len(planes):
        raise ValueError(f"fn returned {len(results)} planes, the output has {len(planes)}")
    for dst, src in zip(planes, results):
        src = np.asarray(src)
        if src.shape != dst.shape and src.size == dst.size:
            src = src.reshape(dst.shape)
        np.copyto(dst, src, casting="unsafe")
    for dst, src in zip(planes[len(results):], in_frame.planes[len(results):]):
        if dst.shape == src.shape and dst.dtype == src.dtype:
            np.copyto(dst, src)


def _output_format(first, out_pix_fmt, out_size):
    fmt = out_pix_fmt or first.pix_fmt
    w, h = out_size or (first.width, first.height)
    return int(w), int(h), _framesrv.pix_fmt_name(_pix_fmt_code(fmt))


def _open_output(out, first, fmt, rate, slots):
    w, h, pix_fmt = fmt
    colour = {}
    if (pix_fmt in _RGB) == (first.pix_fmt in _RGB):
        colour = dict(color_matrix=first.color_matrix, color_range=first.color_range,
                      color_primaries=first.color_primaries, color_transfer=first.color_transfer)
    return Producer(out, w, h, pix_fmt, rate=rate, slots=slots, **colour)


def _process(frame, producer, fn, two):
    with producer.reserve() as out_frame:
        out_frame.copy_header_from(frame)
        if producer.pix_fmt in _RGB and frame.pix_fmt not in _RGB:
            out_frame.color_matrix = 0
        if two:
            fn(frame, out_frame)
        else:
            _store(out_frame, fn(frame.array()), frame)


def filter(input, output, fn, *, out_pix_fmt=None, out_size=None, mode="lossless",
           in_place=None, slots=8, timeout=None, wait_for=0, client_name=None):
    """Runs a stage from stream `input` to a new stream `output`, one output frame per
    input frame, until the input ends (then the output ends too). Returns the number of
    frames published.

    fn(array_in) -> array_out: array_in is the input's ``frame.array()`` (read-only; plane 0
    of planar formats), the result is copied into the output frame (a sequence of arrays
    fills plane by plane; planes it does not fill are copied from the input when they
    have the same shape).
    fn(frame_in, frame_out): with in_place=True, or when fn takes two arguments: fn
    writes into ``frame_out.planes`` itself (no copy of the result).

    The output has the input's size and format unless out_size=(w, h) / out_pix_fmt say
    otherwise (then it keeps them when the input changes format; else it follows the
    input). Timestamps, time base, duration, colour, sar, flags and capture time pass
    through; the output's rate is the input's.

    wait_for: publish nothing until that many lossless consumers are attached to the
    output (as ``produce --wait-for``). timeout: seconds to wait for the input to appear
    (NotFound after). Called from the main thread, filter installs stop_on_signals(), so
    SIGINT/SIGTERM end the output stream cleanly and it returns. An exception (in fn, or
    reading the input) ends the output as failed (``framesrv sink`` below exits 1) and is
    raised; so does an input whose producer died (the output is cut short).
    client_name: the input consumer's name in monitors (default: the script's name).
    """
    two = _wants_two(fn, in_place)
    if threading.current_thread() is threading.main_thread():
        stop_on_signals()
    count = 0
    producer = None
    failed = True   # until the loop ends without an exception
    try:
        with Consumer(input, mode=mode, timeout=timeout, client_name=client_name) as consumer:
            for frame in consumer:
                fmt = _output_format(frame, out_pix_fmt, out_size)
                if producer is None:
                    producer = _open_output(output, frame, fmt, consumer.rate, slots)
                    producer.wait_for_consumers(wait_for)
                elif fmt != (producer.width, producer.height, producer.pix_fmt):
                    producer.change_format(*fmt)
                _process(frame, producer, fn, two)
                count += 1
            failed = consumer.gone
    except KeyboardInterrupt:
        failed = False
    except BaseException as e:
        failed = _ends_failed(type(e), e)
        raise
    finally:
        if producer is not None:
            if failed:
                producer._end_failed()
            producer.close()
    return count
