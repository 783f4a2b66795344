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

  python -m framesrv.bench --versus-iceoryx2 [--rounds N] [--seconds S] [--c-tools DIR]
                           [--iceoryx2-pair PY]

The Python rows of `framesrv bench transport`/`bench clients` next to iceoryx2's Python pair
(Sources/FrameBench/peers/iceoryx2_pair.py, run by this python), without Swift; each row
alternates framesrv and iceoryx2 --rounds times and prints the medians:
  - consumer + publish_ns at 1920x1080 and 64x64: a Python consumer process taking each
    frame's planes and frame.publish_ns, of `framesrv-produce --fill once --rate max`
    (clients/c/build); iceoryx2: one Python subscriber of its Python publisher;
  - producer: a Python Producer's reserve -> publish (no fill) at 1080p into
    `framesrv-consume`; iceoryx2: its Python publisher (one Python subscriber);
  - four consumers: four such Python consumer processes of one 1080p stream, frames/s each;
    iceoryx2: four Python subscribers.
Each line also says how much of the machine other processes used while it ran.
"""
import argparse
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
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


def consume_child(name):
    """--consume-child NAME: one consumer process of the versus rows (planes and publish_ns of
    each frame); prints {"n", "first_ns", "end_ns"} (end: the end of the stream)."""
    n, first, stamp = 0, 0, 0
    with framesrv.Consumer(name, timeout=30) as c:
        for frame in c:
            planes = frame.planes
            stamp = frame.publish_ns
            if not n:
                first = time.monotonic_ns()
            n += 1
        end = time.monotonic_ns()
    del planes
    print(json.dumps({"n": n, "first_ns": first, "end_ns": end, "publish_ns": stamp}), flush=True)


def _cpu_seconds():
    """(seconds the machine's cores were busy, seconds this process and its waited-for children ran)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    busy = sum(fields) - fields[3] - fields[4]   # all but idle and iowait
    ours = sum(getattr(resource.getrusage(who), k) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for k in ("ru_utime", "ru_stime"))
    return busy / os.sysconf("SC_CLK_TCK"), ours


class _Others:
    """The cores other processes used while a measurement ran (the machine's busy time less ours)."""

    def __enter__(self):
        self.start, self.t = _cpu_seconds(), time.monotonic()
        return self

    def __exit__(self, *exc):
        (busy, ours), (busy0, ours0) = _cpu_seconds(), self.start
        self.cores = max(0.0, (busy - busy0) - (ours - ours0)) / max(time.monotonic() - self.t, 1e-9)
        return False


def _versus_consumers(args, name, size, count):
    """`count` Python consumer processes of framesrv-produce --fill once: frames/s each."""
    w, h = size
    frames = int(args.seconds * (400000 if w * h <= 4096 else 200000) / count)
    children = [subprocess.Popen([sys.executable, "-m", "framesrv.bench", "--consume-child", name],
                                 stdout=subprocess.PIPE, text=True) for _ in range(count)]
    producer = subprocess.run([os.path.join(args.c_tools, "framesrv-produce"), "--out", name, "--size", f"{w}x{h}",
                               "--frames", str(frames), "--rate", "max", "--fill", "once", "--slots", "8",
                               "--wait-for", str(count)], stdout=subprocess.DEVNULL, check=True, timeout=300)
    del producer
    results = [json.loads(c.communicate(timeout=60)[0].strip().splitlines()[-1]) for c in children]
    if any(r["n"] != frames for r in results):
        raise RuntimeError(f"a framesrv consumer did not receive the {frames} frames: {results}")
    first, end = min(r["first_ns"] for r in results), max(r["end_ns"] for r in results)
    return (frames - 1) / ((end - first) / 1e9)


def _versus_producer(args, name):
    """A Python Producer's reserve -> publish (no fill) at 1080p into framesrv-consume: frames/s."""
    c = subprocess.Popen([os.path.join(args.c_tools, "framesrv-consume"), "--in", name, "--wait", "30"],
                         stdout=subprocess.PIPE, text=True)
    with framesrv.Producer(name, 1920, 1080, "yuv420p", slots=8) as p:
        p.wait_for_consumers(1, 30)
        n, clock = 0, time.monotonic
        start = clock()
        while clock() - start < args.seconds:
            with p.reserve():
                pass
            n += 1
        elapsed = clock() - start
    out = c.communicate(timeout=60)[0]
    if f"received {n} frames" not in out:
        raise RuntimeError(f"framesrv-consume did not receive the {n} frames: {out.strip()}")
    return n / elapsed


def _versus_iceoryx2(args, size, subscribers):
    """iceoryx2_pair.py throughput: frames/s, or None when it did not end within a minute (the
    pair and its subscribers, in a session of their own, are then killed)."""
    w, h = size
    pair = subprocess.Popen([sys.executable, args.iceoryx2_pair, "throughput", "--bytes", str(w * h * 3 // 2),
                             "--subscribers", str(subscribers), "--seconds", str(args.seconds)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out = pair.communicate(timeout=60 + 10 * args.seconds)[0]
    except subprocess.TimeoutExpired:
        os.killpg(pair.pid, signal.SIGKILL)
        pair.communicate()
        return None
    line = json.loads(out.strip().splitlines()[-1])
    if pair.returncode != 0 or any(x != line["sent"] for x in line["received"]):
        raise RuntimeError(f"iceoryx2 lost frames or failed: {line}")
    return line["fps"]


def versus_iceoryx2(args):
    """The rows of issue 27 item 5, each framesrv's and iceoryx2's alternated, medians of --rounds."""
    os.environ["FRAMESRV_DIR"] = tempfile.mkdtemp(prefix="framesrv-bench-py-")
    hd, small = (1920, 1080), (64, 64)
    rows = [
        ("consumer + publish_ns, 1920x1080", lambda: _versus_consumers(args, "vs-hd", hd, 1), lambda: _versus_iceoryx2(args, hd, 1)),
        ("consumer + publish_ns, 64x64", lambda: _versus_consumers(args, "vs-small", small, 1),
         lambda: _versus_iceoryx2(args, small, 1)),
        ("producer reserve -> publish, 1920x1080", lambda: _versus_producer(args, "vs-produce"),
         lambda: _versus_iceoryx2(args, hd, 1)),
        ("4 consumers, each, 1920x1080", lambda: _versus_consumers(args, "vs-four", hd, 4), lambda: _versus_iceoryx2(args, hd, 4)),
    ]
    print(f"python -m framesrv.bench --versus-iceoryx2: {args.rounds} rounds of {args.seconds} s, framesrv and iceoryx2 "
          f"alternated; {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f} at the start")
    for label, ours, theirs in rows:
        fs, ix, others = [], [], []
        for r in range(args.rounds):
            for run, out in ((ours, fs), (theirs, ix)) if r % 2 == 0 else ((theirs, ix), (ours, fs)):
                with _Others() as o:
                    out.append(run())
                others.append(o.cores)
        hung = ix.count(None)
        ix = [x for x in ix if x is not None]
        f, i = statistics.median(fs), statistics.median(ix) if ix else float("nan")
        print(f"  {label:40} framesrv {f:9.0f}  iceoryx2 {i:9.0f} frames/s  ratio {f / i:.2f}   "
              f"(framesrv {' '.join(f'{x:.0f}' for x in fs)}; iceoryx2 {' '.join(f'{x:.0f}' for x in ix)}"
              f"{f', {hung} run(s) hung and killed' if hung else ''}; others used {max(others):.2f} cores at most)",
              flush=True)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m framesrv.bench", description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1920x1080")
    ap.add_argument("--pix-fmt", default="yuv420p")
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--producer", help="a framesrv binary: the consumer figure reads its --fill once pattern")
    ap.add_argument("--latency", action="store_true", help="also measure publish -> acquire at 200 frames/s")
    ap.add_argument("--poll-us", type=int, default=0, help="with --latency: the consumer's poll_us")
    ap.add_argument("--versus-iceoryx2", action="store_true", help="the Python rows against iceoryx2's Python pair")
    ap.add_argument("--rounds", type=int, default=3, help="with --versus-iceoryx2: rounds (medians)")
    ap.add_argument("--seconds", type=float, default=1.5, help="with --versus-iceoryx2: about how long each run")
    ap.add_argument("--c-tools", default="clients/c/build", help="with --versus-iceoryx2: framesrv-produce/-consume's directory")
    ap.add_argument("--iceoryx2-pair", default="Sources/FrameBench/peers/iceoryx2_pair.py")
    ap.add_argument("--consume-child", metavar="NAME", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.consume_child:
        consume_child(args.consume_child)
        return 0
    if args.versus_iceoryx2:
        return versus_iceoryx2(args)
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
