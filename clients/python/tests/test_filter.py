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


CHAIN_FILTER = textwrap.dedent("""
    import sys, numpy as np, framesrv

    def invert(frame_in, frame_out):
        for dst, src in zip(frame_out.planes, frame_in.planes):
            np.subtract(255, src, out=dst)

    print("filtered", framesrv.filter(sys.argv[1], sys.argv[2], invert, wait_for=1))
""")


def test_python_filter_in_a_framesrv_chain(fsdir, framesrv_bin, procs, tmp_path):
    """produce -i FILE -> Python numpy filter -> sink --framemd5: every output frame is the
    same numpy operation applied to ffmpeg's own decode of FILE."""
    import hashlib
    import shutil
    import subprocess
    if not shutil.which("ffmpeg"):
        pytest.skip("no ffmpeg")
    w, h, n = 160, 120, 20
    media = tmp_path / "in.mkv"
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", f"testsrc2=size={w}x{h}:rate=25",
                    "-frames:v", str(n), "-pix_fmt", "yuv420p", "-c:v", "ffv1", str(media)], check=True)
    raw = subprocess.run(["ffmpeg", "-v", "error", "-i", str(media), "-f", "rawvideo", "-pix_fmt", "yuv420p", "-"],
                         check=True, capture_output=True).stdout
    size = w * h * 3 // 2
    want = [hashlib.md5((255 - np.frombuffer(raw[i * size:(i + 1) * size], np.uint8)).tobytes()).hexdigest()
            for i in range(n)]
    md5 = tmp_path / "out.framemd5"
    sink = procs.start(framesrv_bin, "sink", "--in", "inv", "--framemd5", md5)
    f = procs.python("-c", CHAIN_FILTER, "src", "inv")
    p = procs.start(framesrv_bin, "produce", "-i", media, "--out", "src", "--wait-for", "1")
    assert procs.finish(p)[0] == 0
    assert procs.finish(f)[1].strip() == f"filtered {n}"
    rc, out, err = procs.finish(sink)
    assert rc == 0, err
    lines = [l for l in md5.read_text().splitlines() if l and not l.startswith("#")]
    assert [l.split(",")[-1].strip() for l in lines] == want
    assert [int(l.split(",")[2]) for l in lines] == list(range(n))       # pts passed through


def test_filter_luma_function_keeps_chroma(fsdir, framesrv_bin, procs):
    p = swift_pattern(procs, framesrv_bin, "in", "yuv420p", 10)
    f = procs.python("-c", INVERT, "in", "out")

    def check(frame):
        want = pattern_planes(frame)
        assert np.array_equal(frame.planes[0], 255 - want[0])
        assert np.array_equal(frame.planes[1], want[1]) and np.array_equal(frame.planes[2], want[2])

    seqs, _ = collect("out", check)
    assert len(seqs) == 10
    procs.finish(f)
    procs.finish(p)


def test_filter_follows_a_format_change(fsdir, framesrv_bin, procs):
    p = procs.start(framesrv_bin, "produce", "--pattern", "--out", "in", "--pix-fmt", "gray", "--frames", "12",
                    "--rate", "max", "--size", "96x64", "--size-change-at", "6:200x150", "--wait-for", "1")
    f = procs.python("-c", INVERT, "in", "out")
    sizes = []

    def check(frame):
        assert np.array_equal(frame.array(), 255 - pattern_planes(frame)[0])
        sizes.append((frame.seq, frame.width, frame.height))

    seqs, _ = collect("out", check)
    assert [s for s, _, _ in seqs] == list(range(1, 13))
    assert sizes[4][1:] == (96, 64) and sizes[5][1:] == (200, 150)
    assert procs.finish(f)[1].strip() == "filtered 12"
    assert procs.finish(p)[0] == 0
