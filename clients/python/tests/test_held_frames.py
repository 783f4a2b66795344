"""A lossless consumer whose own kept frames fill the producer's slots: it says so on stderr
in one line and then raises HeldFramesError instead of hanging; a window that copies what it
keeps (examples/python/frame_window.py) runs with fewer slots than its window."""
import os
import textwrap
import threading
import time

import numpy as np

import framesrv
from conftest import REPO, expected_pattern

EXAMPLES = REPO / "examples" / "python"

# The user report: a temporal window of the last 20 arrays; the stream has 12 slots.
DEQUE_OF_ARRAYS = textwrap.dedent("""
    import collections, sys, time, framesrv
    window = collections.deque(maxlen=20)
    kwargs = {} if sys.argv[1] == "env" else {"held_timeout": float(sys.argv[1])}
    try:
        with framesrv.Consumer("cam", timeout=60, **kwargs) as c:
            for f in c:
                window.append(f.array())
                last = time.monotonic()
    except framesrv.HeldFramesError as e:
        print(f"kept {len(window)} after {time.monotonic() - last:.1f} s: {e}", flush=True)
        sys.exit(3)
    print("completed", len(window))
""")


def pattern_producer(procs, framesrv_bin, slots, frames, size="64x48", pix_fmt="gray"):
    return procs.start(framesrv_bin, "produce", "--pattern", "--out", "cam", "--pix-fmt", pix_fmt, "--size", size,
                       "--frames", str(frames), "--rate", "max", "--slots", str(slots), "--wait-for", "1")


def read_stderr_line(p):
    """The first line p writes on stderr, and when it came (time.monotonic())."""
    got = {}

    def read():
        got["line"] = p.stderr.readline()
        got["at"] = time.monotonic()
    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(60)
    assert "line" in got, "no line on stderr within 60 s"
    return got["line"], got["at"]


def test_deque_of_arrays_says_why_then_raises(fsdir, framesrv_bin, procs):
    prod = pattern_producer(procs, framesrv_bin, slots=12, frames=100)
    start = time.monotonic()
    p = procs.python("-c", DEQUE_OF_ARRAYS, "4")
    line, at = read_stderr_line(p)
    assert p.poll() is None, "the line must come while the consumer still waits, before the exception"
    assert at - start < 4, f"the line came {at - start:.1f} s after the start (the wait is 4 s)"
    assert line.startswith("framesrv: consumer 'python' holds 12 of 12 slots of stream 'cam' "
                           "(frames or arrays still referenced); the producer cannot publish until one is "
                           "released: copy what you keep (frame.copy() / np.array(f.array())), release frames, "
                           "or give the producer more --slots"), line
    rc, out, err = procs.finish(p)
    assert rc == 3, (out, err)
    assert err == "", f"one line only, then the exception: {err!r}"
    assert out.startswith("kept 12 after "), out
    waited = float(out.split()[3])
    assert 3.5 <= waited < 8, out
    assert "holds 12 of 12 slots of stream 'cam'" in out and "(waited " in out
    prod.kill()


def test_held_timeout_from_the_environment(fsdir, framesrv_bin, procs, monkeypatch):
    monkeypatch.setenv("FRAMESRV_HELD_TIMEOUT", "1.5")
    prod = pattern_producer(procs, framesrv_bin, slots=4, frames=100)
    t0 = time.monotonic()
    rc, out, err = procs.finish(procs.python("-c", DEQUE_OF_ARRAYS, "env"))
    assert rc == 3 and out.startswith("kept 4 after "), (out, err)
    assert time.monotonic() - t0 < 20
    assert err.count("\n") == 1 and "holds 4 of 4 slots" in err
    prod.kill()


def test_bad_held_timeout_environment_is_one_line(fsdir, framesrv_bin, procs, monkeypatch):
    prod = pattern_producer(procs, framesrv_bin, slots=4, frames=5)
    monkeypatch.setenv("FRAMESRV_HELD_TIMEOUT", "soon")
    try:
        framesrv.Consumer("cam", timeout=30)
        raise AssertionError("a bad FRAMESRV_HELD_TIMEOUT must be refused")
    except framesrv.InvalidArgument as e:
        assert str(e) == "FRAMESRV_HELD_TIMEOUT is 'soon': use seconds (0..2000000, e.g. 10 or 2.5) or 'never'"
    monkeypatch.delenv("FRAMESRV_HELD_TIMEOUT")
    with framesrv.Consumer("cam", timeout=30) as c:
        assert len(list(c)) == 5
    procs.finish(prod)


def test_holds_released_from_another_thread_in_time_are_no_error(fsdir, framesrv_bin, procs):
    """Holding every slot for a while is fine when a release comes before held_timeout."""
    prod = pattern_producer(procs, framesrv_bin, slots=2, frames=6)
    kept = []
    with framesrv.Consumer("cam", timeout=30, held_timeout=5) as c:
        for f in c:
            kept.append(f.array())
            if len(kept) == 2:   # both slots: the next frame waits for this release
                threading.Timer(1.0, kept.clear).start()
        assert c.stats["delivered"] == 6
    procs.finish(prod)


def window_mean(seq, n, plane, shape):
    seqs = range(max(1, seq - n + 1), seq + 1)
    total = sum(expected_pattern(s, plane, *shape).astype(np.int64) for s in seqs)
    return (total // len(seqs)).astype(np.uint8)


def test_frame_window_example_with_fewer_slots_than_its_window(fsdir, framesrv_bin, procs):
    prod = pattern_producer(procs, framesrv_bin, slots=4, frames=30, size="96x64", pix_fmt="yuv420p")
    stage = procs.python(EXAMPLES / "frame_window.py", "--in", "cam", "--out", "mean", "--frames", "8",
                         "--wait-for", "1", env={**os.environ, "FRAMESRV_HELD_TIMEOUT": "3"})
    seqs = []
    with framesrv.Consumer("mean", timeout=60) as c:
        for f in c:
            for i, plane in enumerate(f.planes):
                assert np.array_equal(plane, window_mean(f.seq, 8, i, plane.shape)), f"frame {f.seq} plane {i}"
            seqs.append(f.seq)
    assert seqs == list(range(1, 31))
    rc, out, err = procs.finish(stage)
    assert (rc, out.strip(), err) == (0, "frame_window: 30 frames", "")
    assert procs.finish(prod)[0] == 0
