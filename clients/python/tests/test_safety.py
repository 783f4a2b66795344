"""The documented safety rule: an array keeps its frame held. Arrays kept after release,
after close, across a format change, and a producer's arrays after publish, always show
their own frame; nothing crashes."""
import gc
import os
import signal
import sys
import textwrap

import numpy as np
import pytest

import framesrv
from conftest import assert_pattern, wait_for_file


def pattern_producer(procs, framesrv_bin, name, *extra):
    return procs.start(framesrv_bin, "produce", "--pattern", "--out", name, "--rate", "max", *extra)


def test_arrays_kept_after_release_show_their_frame(fsdir, framesrv_bin, procs):
    """The issue's use-after-release: numpy views of frame k kept while 20 more frames are
    read still show frame k's pattern (the slot stays held until they die)."""
    p = pattern_producer(procs, framesrv_bin, "s", "--frames", "40", "--slots", "4", "--wait-for", "1",
                         "--size", "64x48")
    with framesrv.Consumer("s", timeout=30) as c:
        kept_seq, kept = None, None
        for frame in c:
            if frame.seq == 5:
                kept_seq, kept = frame.seq, [np.asarray(a) for a in frame.planes]
                assert frame.release() is False          # arrays alive: deferred
            if frame.seq == 25:
                break
        assert c.stats["delivered"] == 25
        assert_pattern(kept, kept_seq)
        assert kept[0].flags.writeable is False
        with pytest.raises(ValueError):
            kept[0][0, 0] = 1
        del kept
        gc.collect()
        rest = [f.seq for f in c]
    assert rest == list(range(26, 41))
    assert procs.finish(p)[0] == 0


def test_released_frame_refuses_new_arrays(fsdir, framesrv_bin, procs):
    p = pattern_producer(procs, framesrv_bin, "s", "--frames", "3", "--wait-for", "1")
    with framesrv.Consumer("s", timeout=30) as c:
        frame = c.next(timeout=30)
        frame.release()
        with pytest.raises(framesrv.StateError):
            frame.planes
        list(c)
    procs.finish(p)


def test_arrays_kept_after_close(fsdir, framesrv_bin, procs):
    p = pattern_producer(procs, framesrv_bin, "s", "--frames", "20", "--slots", "4", "--wait-for", "1")
    c = framesrv.Consumer("s", timeout=30)
    frame = c.next(timeout=30)
    frame = c.next(timeout=30)
    kept = frame.planes
    assert c.close() is False                      # deferred: an array is alive
    del frame
    gc.collect()
    assert_pattern(kept, 2)
    del kept
    gc.collect()
    assert c._c.closed
    # The producer sees the consumer gone and ends.
    assert procs.finish(p)[0] == 0


def test_arrays_kept_across_an_epoch_change(fsdir, framesrv_bin, procs):
    """Arrays of frame 5 kept while the producer moves to a larger size (a new pool
    epoch, the old pool retired): they still show frame 5, after close too."""
    p = pattern_producer(procs, framesrv_bin, "s", "--frames", "30", "--slots", "3", "--wait-for", "1",
                         "--size", "96x64", "--size-change-at", "10:200x150")
    pools = set()
    with framesrv.Consumer("s", timeout=30) as c:
        for frame in c:
            if frame.seq == 5:
                kept, kept_pool = frame.planes, frame._pool_range()
            pools.add((frame.width, frame.height, frame.epoch, frame._pool_range()))
            assert frame.pattern_check() == 0
        assert c.stats["delivered"] == 30
        assert {(w, h, e) for w, h, e, _ in pools} == {(96, 64, 1), (200, 150, 2)}
        assert len({r for *_, r in pools}) == 2
        assert kept[0].shape == (64, 96) and kept_pool in {r for *_, r in pools}
        assert_pattern(kept, 5)
    assert_pattern(kept, 5)                        # after close, too
    assert procs.finish(p)[0] == 0


def test_producer_array_kept_after_publish(fsdir):
    with framesrv.Producer("k", 32, 16, "gray", slots=2) as p:
        with framesrv.Consumer("k", timeout=10) as c:
            with p.reserve() as f:
                a = f.array()
                a[:] = 7
            assert a.flags.writeable is False          # read-only at publish
            assert f._f.state == "kept"                # the slot is held for `a`
            with pytest.raises(ValueError):
                a[0, 0] = 1
            for i in range(6):                         # the other slot is recycled
                g = c.next(timeout=10)
                g.release()
                with p.reserve(timeout=10) as f2:
                    f2.array()[:] = i
            g = c.next(timeout=10)
            g.release()
            assert (a == 7).all()                      # never recycled
            assert p._reserved is None
            del a, f
            gc.collect()
            with p.reserve(timeout=10) as f3:          # both slots usable again
                f3.array()[:] = 1
            with p.reserve(timeout=10) as f3:
                f3.array()[:] = 2


def test_producer_abandons_on_exception(fsdir):
    with framesrv.Producer("x", 32, 16, "gray", slots=2) as p:
        with pytest.raises(RuntimeError):
            with p.reserve() as f:
                f.array()[:] = 3
                raise RuntimeError("boom")
        assert p.stats["abandoned"] == 1 and p.stats["published"] == 0


def test_zero_copy_array_lies_in_the_pool(fsdir, framesrv_bin, procs):
    p = pattern_producer(procs, framesrv_bin, "s", "--frames", "3", "--wait-for", "1", "--pix-fmt", "rgb24")
    with framesrv.Consumer("s", timeout=30) as c:
        for frame in c:
            base, size = frame._pool_range()
            for a in frame.planes:
                ptr = a.__array_interface__["data"][0]
                assert base <= ptr and ptr + a.strides[0] * (a.shape[0] - 1) < base + size
                assert a.ctypes.data == ptr and a.base is not None
    procs.finish(p)


SHAPES = {
    "rgb24": [((48, 64, 3), np.uint8)],
    "yuv420p": [((48, 64), np.uint8), ((24, 32), np.uint8), ((24, 32), np.uint8)],
    "nv12": [((48, 64), np.uint8), ((24, 32, 2), np.uint8)],
    "yuv420p10le": [((48, 64), np.dtype("<u2")), ((24, 32), np.dtype("<u2")), ((24, 32), np.dtype("<u2"))],
    "gray16le": [((48, 64), np.dtype("<u2"))],
    "bgra": [((48, 64, 4), np.uint8)],
}


@pytest.mark.parametrize("pix_fmt", sorted(SHAPES))
def test_shapes_and_dtypes(fsdir, pix_fmt):
    with framesrv.Producer("f", 64, 48, pix_fmt, slots=2) as p:
        with framesrv.Consumer("f", timeout=10) as c:
            with p.reserve() as f:
                assert [(a.shape, a.dtype) for a in f.planes] == SHAPES[pix_fmt]
                assert all(a.flags.writeable for a in f.planes)
                f.fill_pattern()
            g = c.next(timeout=10)
            assert [(a.shape, a.dtype) for a in g.planes] == SHAPES[pix_fmt]
            assert not any(a.flags.writeable for a in g.planes)
            assert g.array() is g.planes[0] and g.pattern_check() == 0
            assert_pattern(g.planes, g.seq)
            g.release()


def test_errors(fsdir):
    with pytest.raises(framesrv.InvalidArgument):
        framesrv.Consumer("bad/name", timeout=0.2)
    with pytest.raises(framesrv.NotFound) as e:
        framesrv.Consumer("missing", timeout=0.3)
    assert "missing" in e.value.args[0] and "within 0.3 s" in e.value.args[0]
    with pytest.raises(framesrv.InvalidArgument):
        framesrv.Producer("p", 64, 48, "yuv999")
    with pytest.raises(framesrv.InvalidArgument):
        framesrv.Producer("p", 0, 48, "gray")
    with pytest.raises(framesrv.InvalidArgument):
        framesrv.Consumer("x", mode="fast")
    with framesrv.Producer("p", 64, 48, "gray"):
        with pytest.raises(framesrv.Busy):
            framesrv.Producer("p", 64, 48, "gray")


HOLDER = textwrap.dedent("""
    import sys, time, framesrv
    c = framesrv.Consumer(sys.argv[1], timeout=30)
    kept = [c.next(timeout=30).planes for _ in range(3)]
    open(sys.argv[2], "w").write("holding")
    time.sleep(600)
""")


def test_python_consumer_killed_holding_frames(fsdir, framesrv_bin, procs, tmp_path):
    """A Python consumer killed with SIGKILL while holding frames: the producer reclaims
    its slots and the stream goes on for the other consumer."""
    ready = tmp_path / "ready"
    holder = procs.python("-c", HOLDER, "s", ready)
    sink = procs.start(framesrv_bin, "sink", "--in", "s", "--null", "--verify", "--wait", "30")
    p = pattern_producer(procs, framesrv_bin, "s", "--frames", "60", "--slots", "4", "--wait-for", "2")
    wait_for_file(ready)
    os.kill(holder.pid, signal.SIGKILL)
    assert procs.finish(p)[0] == 0
    rc, out, err = procs.finish(sink)
    assert rc == 0 and "received 60 frames (first 1, last 60), missed 0, corrupt 0" in out + err


def test_live_consumer_keeping_arrays_hits_the_hold_limit(fsdir):
    """Documented trade-off: a live consumer may hold live_max_held frames; arrays kept
    beyond that make next raise StateError; dropping them lets it go on."""
    with framesrv.Producer("l", 32, 16, "gray", slots=4, live_max_held=1) as p:
        with framesrv.Consumer("l", mode="live", timeout=10) as c:
            with p.reserve() as f:
                f.fill_pattern()
            kept = c.next(timeout=10).array()
            with p.reserve() as f:
                f.fill_pattern()
            with pytest.raises(framesrv.StateError):
                c.next(timeout=10)
            assert_pattern([kept], 1)
            del kept
            gc.collect()
            g = c.next(timeout=10)
            assert g.seq == 2 and g.pattern_check() == 0
            g.release()


def test_arrays_released_from_another_thread(fsdir, framesrv_bin, procs):
    """Arrays handed to a worker thread and dropped there give their slots back, while
    the main thread waits in next (the library never sees a release during next)."""
    import queue
    import threading
    p = pattern_producer(procs, framesrv_bin, "t", "--frames", "200", "--slots", "3", "--wait-for", "1",
                         "--size", "64x48")
    work, bad = queue.Queue(maxsize=2), []

    def worker():
        while (item := work.get()) is not None:
            seq, arrays = item
            try:
                assert_pattern(arrays, seq)
            except AssertionError as e:
                bad.append(e)
            del item, arrays

    t = threading.Thread(target=worker)
    t.start()
    with framesrv.Consumer("t", timeout=30) as c:
        for frame in c:
            work.put((frame.seq, frame.planes))
        work.put(None)
        t.join()
        assert c.stats["delivered"] == 200 and c.stats["held"] == 0
    assert not bad
    assert procs.finish(p)[0] == 0


def test_arrays_kept_by_a_consumer_the_producer_gives_up_on(fsdir, framesrv_bin, procs):
    """A consumer that stalls while keeping arrays is demoted or detached by the producer
    (--stall-timeout); its kept arrays still show their frame, and nothing crashes."""
    import time
    p = pattern_producer(procs, framesrv_bin, "d", "--frames", "50", "--slots", "3", "--wait-for", "1",
                         "--stall-timeout", "1", "--size", "64x48")
    c = framesrv.Consumer("d", timeout=30)
    kept = c.next(timeout=30).planes
    assert procs.finish(p)[0] == 0                 # the producer went on without us
    time.sleep(0.2)
    try:
        for frame in c:
            assert frame.pattern_check() == 0
    except framesrv.Detached:
        pass
    assert_pattern(kept, 1)
    c.close()
    assert_pattern(kept, 1)
