"""A Python stage that fails mid-stream ends its output stream as failed, so that a
`framesrv sink` below exits non-zero instead of 0 with a truncated recording; a stop
(SIGTERM, KeyboardInterrupt) or a normal end still ends it cleanly."""
import signal
import textwrap

import pytest

FILTER_RAISES = textwrap.dedent("""
    import sys, framesrv
    def fn(a):
        if fn.n == 5:
            raise RuntimeError("model crashed")
        fn.n += 1
        return 255 - a
    fn.n = 0
    framesrv.filter("in", "out", fn, wait_for=1)
""")

PRODUCER = textwrap.dedent("""
    import sys, framesrv
    how = sys.argv[1]
    def publish(p, n):
        for i in range(n):
            with p.reserve() as f:
                f.fill_pattern()
    if how == "uncaught":          # no with: the exception ends the script
        p = framesrv.Producer("out", 64, 48, "gray", rate=25)
        p.wait_for_consumers(1, timeout=30)
        publish(p, 5)
        raise RuntimeError("source read failed")
    with framesrv.Producer("out", 64, 48, "gray", rate=25) as p:
        p.wait_for_consumers(1, timeout=30)
        publish(p, 5)
        if how == "raise":
            raise RuntimeError("source read failed")
        if how == "interrupt":
            raise KeyboardInterrupt
        if how == "exit":
            sys.exit(int(sys.argv[2]))
""")


def sink(procs, framesrv_bin):
    return procs.start(framesrv_bin, "sink", "--in", "out", "--null")


def test_filter_that_raises_fails_the_sink(fsdir, framesrv_bin, procs):
    s = sink(procs, framesrv_bin)
    prod = procs.start(framesrv_bin, "produce", "--pattern", "--out", "in", "--pix-fmt", "gray", "--size", "64x48",
                       "--frames", "20", "--rate", "max", "--wait-for", "1")
    rc, out, err = procs.finish(procs.python("-c", FILTER_RAISES))
    assert rc == 1 and "RuntimeError: model crashed" in err, err
    rc, out, err = procs.finish(s)
    assert rc != 0 and "ended the stream after its input failed" in err, (out, err)
    prod.kill()


def test_filter_whose_input_producer_died_fails_the_sink(fsdir, framesrv_bin, procs):
    s = sink(procs, framesrv_bin)
    prod = procs.start(framesrv_bin, "produce", "--pattern", "--out", "in", "--pix-fmt", "gray", "--size", "64x48",
                       "--rate", "50", "--wait-for", "1")
    f = procs.python("-c", "import framesrv; framesrv.filter('in', 'out', lambda a: a, wait_for=1)")
    import framesrv
    with framesrv.Consumer("out", timeout=60, mode="live") as c:
        assert c.next(timeout=60) is not None   # the filter runs
    prod.send_signal(signal.SIGKILL)
    assert procs.finish(f)[0] == 0
    rc, out, err = procs.finish(s)
    assert rc != 0 and "ended the stream after its input failed" in err, (out, err)


@pytest.mark.parametrize("how,sink_ok", [("raise", False), ("uncaught", False), ("exit 2", False),
                                         ("clean", True), ("interrupt", True), ("exit 0", True)])
def test_producer_exception_fails_the_sink(fsdir, framesrv_bin, procs, how, sink_ok):
    s = sink(procs, framesrv_bin)
    p = procs.python("-c", PRODUCER, *how.split())
    procs.finish(p)
    rc, out, err = procs.finish(s)
    assert (rc == 0) == sink_ok, (rc, out, err)
    assert "received 5 frames" in out
    assert ("ended the stream after its input failed" in err) == (not sink_ok), err
