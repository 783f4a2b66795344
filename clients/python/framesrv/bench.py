"""python -m framesrv.bench: the Python package's figures at one size (default 1080p).

  python -m framesrv.bench [--size WxH] [--pix-fmt F] [--frames N] [--producer FRAMESRV]
                           [--latency [--poll-us N]]

Prints one line per figure, each measured in this run:
  - consumer: frames/s of a Python consumer (iterating, arrays taken, not copied) of a
    Python producer in another process publishing as fast as it can (C pattern fill), or
    with --producer, of `FRAMESRV produce --pattern --fill once` (the transport alone);
  - consumer per frame: the consumer's own time per frame (next, the Frame, its arrays,
    the release), its producer in the same process and not timed;
  - producer, fill excluded: frames/s of reserve + publish to one lossless consumer in
    another process (the pixels are not written);
  - producer, numpy fill: the same with every plane written by numpy (np.copyto of a
    prepared picture);
  - zero copy: whether a consumer's array data pointer lies inside the pool mapping;
  - with --latency, first: publish -> acquire of a sleeping Python consumer (spinning up
    to --poll-us first) of a Python producer at 200 frames/s (p50, p99 over 3 s).
"""
import argparse
import subprocess
import sys
import time

import numpy as np

import framesrv


def _spawn(*argv):
    return subprocess.Popen([sys.executable, "-m", "framesrv", *argv], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def consumer_rate(name, args):
    """A Python consumer of a producer process: frames/s and the zero-copy check."""
    argv = ["produce", "--out", name, "--size", args.size, "--pix-fmt", args.pix_fmt,
            "--frames", str(args.frames), "--rate", "max", "--wait-for", "1"]
    if args.producer:
        p = subprocess.Popen([args.producer, *argv[:1], "--pattern", "--fill", "once", "--slots", "8", *argv[1:]],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    else:
        p = _spawn(*argv)
    inside = False
    with framesrv.Consumer(name, timeout=30) as c:
        start, n = None, 0
        for frame in c:
            planes = frame.planes
            if start is None:
                start = time.perf_counter()
                base, size = frame._pool_range()
                inside = all(base <= a.ctypes.data < base + size for a in planes)
            n += 1
        elapsed = time.perf_counter() - start
    p.wait()
    return (n - 1) / elapsed, inside


def consumer_cost(name, args):
    """Seconds per frame of the consumer's own work: next, the Frame, its arrays, the
    release of the previous one (each frame is published in this process, untimed)."""
    w, h = (int(x) for x in args.size.split("x"))
    clock, spent = time.perf_counter, 0.0
    with framesrv.Producer(name, w, h, args.pix_fmt, slots=8) as p, framesrv.Consumer(name, timeout=30) as c:
        frames = iter(c)
        for _ in range(args.frames):
            with p.reserve():
                pass
            start = clock()
            planes = next(frames).planes
            spent += clock() - start
        del planes
    return spent / args.frames


def wake_latency(name, args):
    """Microseconds from publish_ns to the consumer holding the frame: (p50, p99)."""
    p = _spawn("produce", "--out", name, "--size", args.size, "--pix-fmt", args.pix_fmt,
               "--frames", "650", "--rate", "200", "--wait-for", "1")
    micros = []
    with framesrv.Consumer(name, timeout=30, poll_us=args.poll_us) as c:
        for frame in c:
            micros.append((time.monotonic_ns() - frame.publish_ns) / 1000)   # the clock is read first
    p.wait()
    micros = sorted(micros[50:])   # the first frames meet a cold consumer
    return micros[len(micros) // 2], micros[len(micros) * 99 // 100]


def producer_rate(name, args, fill):
    """A Python producer to a Python consumer process: frames/s, with or without a numpy fill."""
    w, h = (int(x) for x in args.size.split("x"))
    c = _spawn("consume", "--in", name, "--wait", "30")
    with framesrv.Producer(name, w, h, args.pix_fmt, slots=8) as p:
        p.wait_for_consumers(1, 30)
        pictures = None
        start = time.perf_counter()
        for _ in range(args.frames):
            with p.reserve() as frame:
                if fill:
                    if pictures is None:
                        pictures = [np.full_like(a, 100) for a in frame.planes]
                    for dst, src in zip(frame.planes, pictures):
                        np.copyto(dst, src)
        elapsed = time.perf_counter() - start
    c.wait()
    return args.frames / elapsed


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m framesrv.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--pix-fmt", default="yuv420p")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--producer", help="a framesrv binary: the consumer figure reads its --fill once pattern")
    ap.add_argument("--latency", action="store_true", help="also measure publish -> acquire at 200 frames/s")
    ap.add_argument("--poll-us", type=int, default=0, help="with --latency: the consumer's poll_us")
    args = ap.parse_args(argv)
    tag = f"{args.size} {args.pix_fmt}, {args.frames} frames"
    if args.latency:
        p50, p99 = wake_latency("bench-py-wake", args)
        print(f"python consumer wake at 200 fps: p50 {p50:.1f} us, p99 {p99:.1f} us "
              f"({args.size} {args.pix_fmt}, poll_us {args.poll_us})")
    fps, inside = consumer_rate("bench-py-consume", args)
    print(f"python consumer: {fps:.0f} frames/s ({tag}{', framesrv produce --fill once' if args.producer else ''})")
    print(f"python consumer per frame: {consumer_cost('bench-py-cost', args) * 1e6:.2f} us ({tag})")
    print(f"python producer, fill excluded: {producer_rate('bench-py-produce', args, False):.0f} frames/s ({tag})")
    print(f"python producer, numpy fill: {producer_rate('bench-py-fill', args, True):.0f} frames/s ({tag})")
    print(f"zero copy: numpy data pointer inside the pool mapping: {'yes' if inside else 'NO'}")
    return 0 if inside else 1


if __name__ == "__main__":
    sys.exit(main())
