"""framesrv.filter and the examples, run as processes between a Swift producer and a
consumer: every output frame is checked against the same operation applied to the input
pattern, and timestamps pass through."""
import importlib.util
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import framesrv
from conftest import REPO, expected_pattern

EXAMPLES = REPO / "examples" / "python"


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pattern_planes(frame, shapes=None):
    """The input test pattern of frame.seq, shaped like frame's planes (or like shapes,
    a list of (shape, dtype))."""
    out = []
    for i, (shape, dtype) in enumerate(shapes or [(a.shape, a.dtype) for a in frame.planes]):
        row_bytes = int(np.prod(shape[1:])) * np.dtype(dtype).itemsize
        out.append(expected_pattern(frame.seq, i, shape[0], row_bytes).view(dtype).reshape(shape))
    return out


def swift_pattern(procs, framesrv_bin, name, pix_fmt, frames, size="96x64"):
    return procs.start(framesrv_bin, "produce", "--pattern", "--out", name, "--pix-fmt", pix_fmt,
                       "--frames", str(frames), "--rate", "25", "--size", size, "--slots", "4", "--wait-for", "1")


def collect(name, check):
    """Reads stream name to its end, calling check(frame) for each; returns the seqs and pts."""
    seqs = []
    with framesrv.Consumer(name, timeout=60) as c:
        rate = c.rate
        for frame in c:
            check(frame)
            seqs.append((frame.seq, frame.pts, frame.time_base))
    return seqs, rate


INVERT = textwrap.dedent("""
    import sys, framesrv
    n = framesrv.filter(sys.argv[1], sys.argv[2], lambda a: 255 - a, wait_for=1)
    print(f"filtered {n}")
""")


def test_filter_function_result_copied(fsdir, framesrv_bin, procs):
    p = swift_pattern(procs, framesrv_bin, "in", "rgb24", 30)
    f = procs.python("-c", INVERT, "in", "out")

    def check(frame):
        assert np.array_equal(frame.array(), 255 - pattern_planes(frame)[0])

    seqs, rate = collect("out", check)
    assert [s for s, _, _ in seqs] == list(range(1, 31))
    assert [(pts, tb) for _, pts, tb in seqs] == [(i, Fraction(1, 25)) for i in range(30)]
    assert rate == 25
    assert procs.finish(f)[1].strip() == "filtered 30"
    assert procs.finish(p)[0] == 0


@pytest.mark.parametrize("pix_fmt", ["rgb24", "yuv420p", "nv12"])
def test_numpy_overlay_example(fsdir, framesrv_bin, procs, pix_fmt):
    overlay = load_example("numpy_overlay")
    p = swift_pattern(procs, framesrv_bin, "cam", pix_fmt, 20, size="320x240")
    f = procs.python(EXAMPLES / "numpy_overlay.py", "--in", "cam", "--out", "boxed", "--wait-for", "1")

    def check(frame):
        want = pattern_planes(frame)
        overlay.overlay(want[0], frame.seq)
        for got, w in zip(frame.planes, want):
            assert np.array_equal(got, w)
        assert (frame.array() != pattern_planes(frame)[0]).any()      # something was drawn

    seqs, _ = collect("boxed", check)
    assert [s for s, _, _ in seqs] == list(range(1, 21))
    rc, out, err = procs.finish(f)
    assert (rc, out.strip()) == (0, "numpy_overlay: 20 frames"), err
    assert procs.finish(p)[0] == 0


@pytest.mark.parametrize("pix_fmt", ["rgb24", "yuv420p"])
def test_opencv_edges_example(fsdir, framesrv_bin, procs, pix_fmt):
    cv2 = pytest.importorskip("cv2")
    edges = load_example("opencv_edges")
    p = swift_pattern(procs, framesrv_bin, "cam", pix_fmt, 15, size="160x120")
    f = procs.python(EXAMPLES / "opencv_edges.py", "--in", "cam", "--out", "edges", "--wait-for", "1")

    def check(frame):
        assert frame.pix_fmt == "gray" and frame.array().shape == (120, 160)
        shape = (120, 160, 3) if pix_fmt == "rgb24" else (120, 160)
        src = pattern_planes(frame, [(shape, np.uint8)])[0]
        luma = cv2.cvtColor(src, cv2.COLOR_RGB2GRAY) if pix_fmt == "rgb24" else src
        want = cv2.Canny(cv2.GaussianBlur(luma, (3, 3), 0), 50, 150)
        assert np.array_equal(frame.array(), want)

    seqs, _ = collect("edges", check)
    assert [s for s, _, _ in seqs] == list(range(1, 16))
    rc, out, err = procs.finish(f)
    assert (rc, out.strip()) == (0, "opencv_edges: 15 frames"), err
    assert procs.finish(p)[0] == 0


def test_filter_ends_cleanly_on_sigterm(fsdir, framesrv_bin, procs):
    import signal
    p = procs.start(framesrv_bin, "produce", "--pattern", "--out", "in", "--rate", "50", "--size", "64x48")
    f = procs.python("-c", INVERT, "in", "out")
    with framesrv.Consumer("out", timeout=60) as c:
        first = c.next(timeout=60)
        first.release()
        f.send_signal(signal.SIGTERM)
        rest = list(c)                                 # ends: the filter ended its stream
    assert procs.finish(f)[0] == 0
    assert rest == [] or rest[-1].seq >= first.seq
    p.send_signal(signal.SIGINT)
    procs.finish(p)
