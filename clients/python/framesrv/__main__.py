"""python -m framesrv consume|produce: the test programs, with the C tools' flags and lines.

  python -m framesrv consume --in NAME [--audio] [--live] [--verify-pattern] [--seq-log FILE]
                             [--count N] [--wait SECONDS] [--poll-us N] [-v]
      prints "py: received N frames, first F, last L, corrupt C" (--audio: a sound stream,
      and ", samples S" after it); exit 0, 1 if a frame failed the pattern, 2 on an error.
  python -m framesrv produce --out NAME [--size WxH] [--pix-fmt F] [--frames N]
                             [--rate N|N/D|DECIMAL|max] [--slots K] [--wait-for C] [--live-source]
      publishes the test pattern, prints "py: published N frames"; SIGINT/SIGTERM end the
      stream cleanly.
"""
import argparse
import sys
import time
from fractions import Fraction

import framesrv

_RGB = {"rgb24", "bgr24", "bgra", "rgba", "gbrp"}


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write(f"py: error: {message}\n")
        sys.exit(2)


def _size(text):
    try:
        w, h = text.lower().split("x")
        return int(w), int(h)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad size (WxH): {text!r}") from None


def _rate(text):
    """max (None), or an exact Fraction: N, N/D, or a decimal (av_d2q, as framesrv produce)."""
    if text == "max":
        return None
    try:
        value = Fraction(text) if "/" in text else Fraction(float(text)).limit_denominator(1001000)
    except (ValueError, ZeroDivisionError, OverflowError):
        value = 0
    # The frames' time base is 1/rate: a header's time base has 32-bit terms.
    if not 0 < value <= 1000000 or value.numerator >= 2**31 or value.denominator >= 2**31:
        raise argparse.ArgumentTypeError(f"bad rate (N, N/D up to 1000000 with terms below 2^31, "
                                         f"a decimal or max): {text!r}")
    return value


def _poll_us(text):
    if not text.isdigit() or int(text) > 1000000:
        raise argparse.ArgumentTypeError(f"bad --poll-us (0..1000000 microseconds): {text!r}")
    return int(text)


def _positive(text):
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"not a positive count: {text!r}")
    return int(text)


def _parser():
    p = _Parser(prog="python -m framesrv", description="framesrv test programs on the Python package")
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("consume", help="read a stream (and verify the test pattern)")
    c.add_argument("--in", dest="name", required=True)
    c.add_argument("--audio", action="store_true", help="read a sound stream (samples counted)")
    c.add_argument("--live", action="store_true")
    c.add_argument("--verify-pattern", action="store_true")
    c.add_argument("--touch", action="store_true",
                   help="take every frame's planes (numpy views) and its publish_ns, as a stage would")
    c.add_argument("--seq-log")
    c.add_argument("--count", type=_positive)
    c.add_argument("--wait", type=float, help="seconds to wait for the stream (default: forever)")
    c.add_argument("--poll-us", type=_poll_us, default=0, help="busy-poll up to N us per frame (centred on when a paced frame is due)")
    c.add_argument("-v", "--verbose", action="store_true")
    o = sub.add_parser("produce", help="publish the test pattern")
    o.add_argument("--out", dest="name", required=True)
    o.add_argument("--size", type=_size, default=(640, 360))
    o.add_argument("--pix-fmt", default="yuv420p")
    o.add_argument("--frames", type=_positive)
    o.add_argument("--rate", type=_rate, default=Fraction(30))
    o.add_argument("--slots", type=int, default=8)
    o.add_argument("--wait-for", type=int, default=0)
    o.add_argument("--live-source", action="store_true")
    return p


def _take(frame, args, log):
    """Checks one frame; returns 1 if it failed the pattern."""
    if log:
        log.write(f"{frame.seq}\n")
    if args.audio:
        if args.verbose:
            print(f"py: frame {frame.seq} slot-epoch {frame.epoch} {frame.sample_rate} Hz {frame.channels} ch "
                  f"{frame.sample_format} {frame.nb_samples} samples pts {frame.pts}", file=sys.stderr)
        return 0
    if args.touch:
        planes, published = frame.planes, frame.publish_ns
        del planes, published
    bad = frame.pattern_check() if args.verify_pattern else 0
    if args.verbose or bad:
        print(f"py: frame {frame.seq} slot-epoch {frame.epoch} {frame.width}x{frame.height} {frame.pix_fmt}"
              + (" CORRUPT" if bad else ""), file=sys.stderr)
    return 1 if bad else 0


def consume(args):
    """Like framesrv-consume: exit 0; 1 if a frame failed the pattern; 2 on an error
    (the producer died without ending the stream, no stream, ...)."""
    framesrv.stop_on_signals()
    received = corrupt = first = last = samples = 0
    rc = 0
    log = open(args.seq_log, "w") if args.seq_log else None
    try:
        with framesrv.Consumer(args.name, mode="live" if args.live else "lossless",
                               timeout=args.wait, client_name="python-consume", poll_us=args.poll_us,
                               media="audio" if args.audio else "video") as c:
            for frame in c:
                corrupt += _take(frame, args, log)
                samples += frame.nb_samples if args.audio else 0
                received += 1
                first, last = first or frame.seq, frame.seq
                if args.count and received >= args.count:
                    break
            if c.gone:
                print("py: error: the producer died without ending the stream", file=sys.stderr)
                rc = 2
    except framesrv.Error as e:
        print(f"py: error: {e.args[0]}", file=sys.stderr)
        rc = 2
    except KeyboardInterrupt:
        pass
    finally:
        if log:
            log.close()
        print(f"py: received {received} frames, first {first}, last {last}, corrupt {corrupt}"
              + (f", samples {samples}" if args.audio else ""), flush=True)
    return rc or (1 if corrupt else 0)


def _describe(frame, args, index, rate):
    """The header of `framesrv produce --pattern`'s frames."""
    rgb = args.pix_fmt in _RGB
    frame.color_matrix, frame.color_range = (0, 2) if rgb else (1, 1)
    frame.color_primaries = frame.color_transfer = 1
    frame.sar = Fraction(1, 1)
    if rate:
        frame.time_base, frame.pts, frame.duration = 1 / rate, index - 1, 1
    else:
        frame.time_base, frame.pts, frame.duration = Fraction(1, 1000000), index - 1, 0
    frame.field_order = framesrv.FieldOrder.PROGRESSIVE
    end = framesrv.FLAG_END_OF_STREAM if args.frames and index == args.frames else 0
    frame.flags = framesrv.FLAG_KEY | end


def _sleep_until(start, index, rate):
    delay = start + float(index / rate) - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def _run_producer(p, args):
    while args.wait_for and not p.wait_for_consumers(args.wait_for, 0.5):
        pass
    start = time.monotonic()
    index = 0
    while not args.frames or index < args.frames:
        if args.rate:
            _sleep_until(start, index, args.rate)
        index += 1
        frame = p.try_reserve(None if not args.live_source else 0)
        if frame is None:
            continue
        with frame:
            frame.fill_pattern()
            _describe(frame, args, index, args.rate)


def produce(args):
    framesrv.stop_on_signals()
    p = framesrv.Producer(args.name, args.size[0], args.size[1], args.pix_fmt, rate=args.rate,
                          slots=args.slots, live_source=args.live_source, live_max_held=2)
    try:
        _run_producer(p, args)
    except KeyboardInterrupt:
        pass
    finally:
        published = p.stats["published"]
        p.close()
        print(f"py: published {published} frames", flush=True)
    return 0


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "consume" and args.audio and args.verify_pattern:
        parser.error("--verify-pattern checks pictures: not with --audio")
    try:
        return consume(args) if args.command == "consume" else produce(args)
    except framesrv.Error as e:
        print(f"py: error: {e.args[0]}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
