"""Streams between the Python package and the Swift framesrv, and Python to Python:
lossless exactly once with every byte checked against the test pattern, and live."""
import sys

import numpy as np
import pytest

import framesrv
from conftest import assert_pattern


def produce_pattern(procs, framesrv_bin, name, *extra):
    return procs.start(framesrv_bin, "produce", "--pattern", "--out", name, *extra)


@pytest.mark.parametrize("pix_fmt", ["yuv420p", "rgb24", "nv12", "yuv420p10le", "gray16le"])
def test_swift_producer_python_consumer_lossless(fsdir, framesrv_bin, procs, pix_fmt):
    p = produce_pattern(procs, framesrv_bin, "s", "--size", "322x242", "--pix-fmt", pix_fmt,
                        "--frames", "40", "--rate", "max", "--slots", "4", "--wait-for", "1")
    seqs = []
    with framesrv.Consumer("s", timeout=30) as c:
        for frame in c:
            assert frame.pattern_check() == 0
            assert_pattern(frame.planes, frame.seq)
            seqs.append(frame.seq)
    assert seqs == list(range(1, 41))
    assert procs.finish(p)[0] == 0


def test_python_consume_tool_verifies(fsdir, framesrv_bin, procs, tmp_path):
    log = tmp_path / "seq.log"
    c = procs.python("-m", "framesrv", "consume", "--in", "s", "--verify-pattern", "--seq-log", log, "--wait", "30")
    p = produce_pattern(procs, framesrv_bin, "s", "--frames", "50", "--rate", "max", "--wait-for", "1")
    rc, out, err = procs.finish(c)
    assert rc == 0, err
    assert out.strip() == "py: received 50 frames, first 1, last 50, corrupt 0"
    assert log.read_text().split() == [str(i) for i in range(1, 51)]
    assert procs.finish(p)[0] == 0


def test_python_consume_tool_touches_planes_and_header(fsdir, framesrv_bin, procs):
    """--touch (the benchmark's Python stage) takes every frame's planes and publish_ns, and
    still verifies and releases every frame."""
    c = procs.python("-m", "framesrv", "consume", "--in", "t", "--touch", "--verify-pattern", "--wait", "30")
    p = produce_pattern(procs, framesrv_bin, "t", "--frames", "60", "--rate", "max", "--slots", "4", "--wait-for", "1")
    rc, out, err = procs.finish(c)
    assert rc == 0, err
    assert out.strip() == "py: received 60 frames, first 1, last 60, corrupt 0"
    assert procs.finish(p)[0] == 0


def test_live_consumer(fsdir, framesrv_bin, procs):
    p = produce_pattern(procs, framesrv_bin, "s", "--frames", "150", "--rate", "300", "--size", "160x120")
    seqs = []
    with framesrv.Consumer("s", mode="live", timeout=30) as c:
        for frame in c:
            assert frame.pattern_check() == 0
            seqs.append(frame.seq)
    assert seqs and seqs == sorted(set(seqs))
    assert procs.finish(p)[0] == 0


@pytest.mark.parametrize("pix_fmt", ["yuv420p", "rgb24", "nv12", "yuv420p10le", "gray16le", "bgra"])
def test_python_producer_swift_sink_verifies(fsdir, framesrv_bin, procs, pix_fmt):
    s = procs.start(framesrv_bin, "sink", "--in", "py", "--null", "--verify", "--wait", "30")
    p = procs.python("-m", "framesrv", "produce", "--out", "py", "--frames", "30", "--rate", "max",
                     "--wait-for", "1", "--size", "322x242", "--pix-fmt", pix_fmt)
    rc, out, err = procs.finish(p)
    assert (rc, out.strip()) == (0, "py: published 30 frames"), err
    rc, out, err = procs.finish(s)
    assert rc == 0, err
    assert "received 30 frames (first 1, last 30), missed 0, corrupt 0" in out + err


def test_python_producer_python_consumer(fsdir, procs):
    c = procs.python("-m", "framesrv", "consume", "--in", "pp", "--verify-pattern", "--wait", "30")
    p = procs.python("-m", "framesrv", "produce", "--out", "pp", "--frames", "40", "--rate", "max",
                     "--wait-for", "1", "--pix-fmt", "rgb24")
    assert procs.finish(p)[1].strip() == "py: published 40 frames"
    rc, out, err = procs.finish(c)
    assert (rc, out.strip()) == (0, "py: received 40 frames, first 1, last 40, corrupt 0"), err


def test_producer_api_header_round_trip(fsdir):
    """What a Python producer sets (pts, time base, colour, sar, key, arrays) is what a
    Python consumer reads; the rate is the stream's."""
    from fractions import Fraction
    with framesrv.Producer("h", 64, 48, "rgb24", rate=Fraction(50, 2), slots=2) as p:
        with framesrv.Consumer("h", timeout=10) as c:
            assert c.rate == 25 and c.time_base == Fraction(1, 25)
            with p.reserve(timeout=10) as f:
                img = np.arange(48 * 64 * 3, dtype=np.uint32).astype(np.uint8).reshape(48, 64, 3)
                f.array()[:] = img
                f.pts, f.time_base, f.duration = 1234, Fraction(1, 90000), 3003
                f.color_matrix, f.color_range, f.sar, f.key = 0, 2, Fraction(4, 3), True
            g = c.next(timeout=10)
            assert (g.pts, g.time_base, g.duration, g.sar, g.key) == (1234, Fraction(1, 90000), 3003, Fraction(4, 3), True)
            assert (g.color_matrix, g.color_range, g.width, g.height, g.pix_fmt) == (0, 2, 64, 48, "rgb24")
            assert np.array_equal(g.array(), img)
            g.release()


def test_consume_tool_producer_killed_is_an_error(fsdir, framesrv_bin, procs):
    import signal
    c = procs.python("-m", "framesrv", "consume", "--in", "g", "--verify-pattern", "--wait", "30")
    # --wait-for 2: nothing is published before the tool has attached too (a slow start of
    # its interpreter must not miss the stream's short life).
    p = produce_pattern(procs, framesrv_bin, "g", "--rate", "50", "--size", "64x48", "--wait-for", "2")
    with framesrv.Consumer("g", timeout=30) as watcher:      # a second consumer: frames flow
        for frame in watcher:
            if frame.seq == 10:
                break
        p.send_signal(signal.SIGKILL)
        p.wait()
    rc, out, err = procs.finish(c)
    assert rc == 2 and "the producer died without ending the stream" in err
    assert out.startswith("py: received ") and ", corrupt 0" in out


WAITER = """
import framesrv
framesrv.stop_on_signals()
print("ready", flush=True)
try:
    framesrv.Consumer("never")          # waits forever for a stream that never appears
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def test_ctrl_c_while_waiting(fsdir, procs):
    """A wait inside the library (here: for a stream that never appears) notices SIGINT."""
    import signal
    import time
    c = procs.python("-c", WAITER)
    assert c.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    c.send_signal(signal.SIGINT)
    rc, out, err = procs.finish(c, timeout=30)
    assert (rc, out.strip()) == (0, "interrupted"), err


def test_reattach_to_the_next_producer(fsdir, framesrv_bin, procs):
    import signal
    p1 = produce_pattern(procs, framesrv_bin, "r", "--rate", "50", "--size", "64x48", "--wait-for", "1")
    seen = []
    with framesrv.Consumer("r", timeout=30, reattach=True) as c:
        for frame in c:
            seen.append((c.stream_info["producer_pid"], frame.seq))
            assert frame.pattern_check() == 0
            if len(seen) == 5:
                p1.send_signal(signal.SIGKILL)
                p1.wait()
                p2 = produce_pattern(procs, framesrv_bin, "r", "--frames", "5", "--size", "64x48", "--wait-for", "1")
    assert procs.finish(p2)[0] == 0
    pids = [pid for pid, _ in seen]
    assert pids[0] == p1.pid and pids[-1] == p2.pid
    assert [s for pid, s in seen if pid == p2.pid] == [1, 2, 3, 4, 5]


def test_bench_script_runs(fsdir, procs):
    b = procs.python("-m", "framesrv.bench", "--size", "64x48", "--frames", "20")
    rc, out, err = procs.finish(b, timeout=120)
    assert rc == 0, err
    lines = out.splitlines()
    assert [l.split(":")[0] for l in lines] == ["python consumer", "python consumer per frame", "python producer, fill excluded",
                                               "python producer, numpy fill", "zero copy"]
    assert lines[-1].endswith("yes")


def test_python_producer_killed_consumers_reattach(fsdir, framesrv_bin, procs, tmp_path):
    """A Python producer killed with SIGKILL: the Swift sink sees it gone, attaches to the
    next producer of the same name and verifies its frames."""
    import signal
    import time
    log = tmp_path / "seq.log"
    sink = procs.start(framesrv_bin, "sink", "--in", "k", "--null", "--verify", "--seq-log", log, "--wait", "30")
    p1 = procs.python("-m", "framesrv", "produce", "--out", "k", "--rate", "100", "--size", "64x48", "--wait-for", "1")
    deadline = time.monotonic() + 60
    while not (log.exists() and log.read_text().count("frame ") >= 5):
        assert time.monotonic() < deadline, "the sink received no frames"
        time.sleep(0.05)
    p1.send_signal(signal.SIGKILL)
    p1.wait()
    p2 = procs.python("-m", "framesrv", "produce", "--out", "k", "--frames", "10", "--rate", "max", "--size", "64x48",
                      "--wait-for", "1")
    assert procs.finish(p2)[1].strip() == "py: published 10 frames"
    rc, out, err = procs.finish(sink)
    assert rc == 0, err
    events = log.read_text().split("\n")
    assert "corrupt" not in log.read_text() and any(e.startswith("gone ") for e in events)
    after = events[[i for i, e in enumerate(events) if e.startswith("gone ")][-1]:]
    assert [e for e in after if e.startswith("frame ")] == [f"frame {i}" for i in range(1, 11)]


def _next_in_thread(consumer, timeout):
    """Starts consumer.next(timeout) in a thread; returns (result dict, thread) once it runs."""
    import threading
    started, result = threading.Event(), {}

    def run():
        started.set()
        try:
            result["frame"] = consumer.next(timeout=timeout)
        except Exception as e:  # reported by the test's assertion
            result["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    started.wait()
    return result, t


def _publish_and_take(producer, waiter, seq, why):
    """Publishes a pattern frame; returns what the thread of _next_in_thread got: frame seq."""
    result, t = waiter
    with producer.reserve(timeout=30) as f:
        f.fill_pattern()
    t.join(60)
    frame = result.get("frame")
    assert frame is not None, result.get("error", why)
    assert frame.seq == seq and frame.pattern_check() == 0
    frame.release()


def test_wake_without_doorbell(fsdir):
    """A consumer asleep (in next) for >= 2 s gets a frame published after its sleep began.
    The producer (this package) has no ZeroMQ subscriber: the consumer never asked for a
    descriptor, so only the shared-memory wake (frame_wake) can wake it."""
    import time
    with framesrv.Producer("w", 64, 48, "gray", slots=2) as p:
        with framesrv.Consumer("w", timeout=10) as c:
            assert p.wait_for_consumers(1, 10)
            waiter = _next_in_thread(c, 60)
            time.sleep(2.2)
            assert not waiter[0], "next returned before anything was published"
            _publish_and_take(p, waiter, 1, "no frame within next's timeout")
            p.end()
            with pytest.raises(framesrv.EndOfStream):
                c.next(timeout=10)


def test_release_from_another_thread_while_next_sleeps(fsdir):
    """A frame released in one thread while another sleeps in next() goes back at once:
    the producer (one slot) reuses it, and the sleeping next gets the frame published in
    it (if the release waited for next, next would time out instead)."""
    with framesrv.Producer("t", 64, 48, "gray", slots=1) as p:
        with framesrv.Consumer("t", timeout=10) as c:
            assert p.wait_for_consumers(1, 10)
            with p.reserve(timeout=10) as f:
                f.fill_pattern()
            first = c.next(timeout=10)
            assert first.seq == 1
            waiter = _next_in_thread(c, 60)
            assert first.release() is True
            # The only slot is free again: reserve gets it, next gets frame 2.
            _publish_and_take(p, waiter, 2, "next timed out: the release waited for it")


@pytest.mark.parametrize("poll_us", [1, 200, 100000])
def test_poll_us_delivers_the_same_frames(fsdir, framesrv_bin, procs, poll_us):
    p = produce_pattern(procs, framesrv_bin, "b", "--size", "64x48", "--frames", "40", "--rate", "max",
                        "--slots", "2", "--wait-for", "1")
    seqs = []
    with framesrv.Consumer("b", timeout=30, poll_us=poll_us) as c:
        for frame in c:
            assert frame.pattern_check() == 0
            seqs.append(frame.seq)
    assert seqs == list(range(1, 41))
    assert procs.finish(p)[0] == 0


def test_consume_tool_poll_us(fsdir, procs):
    c = procs.python("-m", "framesrv", "consume", "--in", "pu", "--verify-pattern", "--poll-us", "100", "--wait", "30")
    p = procs.python("-m", "framesrv", "produce", "--out", "pu", "--frames", "30", "--rate", "1000",
                     "--size", "64x48", "--wait-for", "1")
    assert procs.finish(p)[1].strip() == "py: published 30 frames"
    rc, out, err = procs.finish(c)
    assert (rc, out.strip()) == (0, "py: received 30 frames, first 1, last 30, corrupt 0"), err


@pytest.mark.parametrize("argv", [["consume", "--in", "x", "--poll-us", "1000001"],
                                  ["consume", "--in", "x", "--poll-us", "-1"],
                                  ["produce", "--out", "x", "--rate", "1/0"],
                                  ["produce", "--out", "x", "--rate", "-30000/1001"],
                                  ["produce", "--out", "x", "--rate", "fast"],
                                  ["produce", "--out", "x", "--rate", "999999999999/1000000"]])
def test_tools_refuse_bad_poll_us_and_rate(fsdir, procs, argv):
    rc, out, err = procs.finish(procs.python("-m", "framesrv", *argv))
    assert rc == 2 and err.count("\n") == 1 and err.startswith("py: error: "), err


def test_consumer_refuses_bad_poll_us(fsdir):
    for bad in (-1, 1000001):
        with pytest.raises(framesrv.InvalidArgument, match="poll_us"):
            framesrv.Consumer("nothing", timeout=0, poll_us=bad)
    with pytest.raises(framesrv.NotFound):    # the bounds are accepted: only the stream is missing
        framesrv.Consumer("nothing", timeout=0, poll_us=1000000)
    with pytest.raises(framesrv.NotFound):
        framesrv.Consumer("nothing", timeout=0, poll_us=0)


def test_fileno_for_an_event_loop(fsdir):
    """fileno() subscribes lazily; the descriptor becomes readable after a publish, and
    next(timeout=0) then drains what is there (edge-triggered)."""
    import select
    with framesrv.Producer("e", 64, 48, "gray", slots=4) as p:
        with framesrv.Consumer("e", timeout=10) as c:
            fd = c.fileno()
            assert fd >= 0 and c.fileno() == fd
            seqs, readable = [], False
            for _ in range(20):   # the subscription reaches the producer asynchronously
                with p.reserve(timeout=10) as f:
                    f.fill_pattern()
                if select.select([fd], [], [], 1.0)[0]:
                    readable = True
                while (frame := c.next(timeout=0)) is not None:
                    seqs.append(frame.seq)
                    frame.release()
                if readable:
                    break
            assert readable, "the descriptor never became readable"
            assert seqs == list(range(1, len(seqs) + 1)) and seqs


def test_ctrl_c_while_next_sleeps(fsdir, procs):
    """A consumer asleep in next (on the stream's wake word, no frame coming) notices SIGINT."""
    import signal
    import time
    with framesrv.Producer("z", 64, 48, "gray", slots=2) as p:
        c = procs.python("-m", "framesrv", "consume", "--in", "z", "--wait", "30")
        assert p.wait_for_consumers(1, 30)
        time.sleep(0.3)
        c.send_signal(signal.SIGINT)
        rc, out, err = procs.finish(c, timeout=30)
    assert (rc, out.strip()) == (0, "py: received 0 frames, first 0, last 0, corrupt 0"), err
