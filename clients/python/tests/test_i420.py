"""frame.i420(): a yuv420p frame as the (h*3/2, w) buffer OpenCV's I420 conversions want,
a view of the slot when its planes lie back to back, else a copy (with a warning)."""
import warnings

import cv2
import numpy as np
import pytest

import framesrv


def hand_assembled(frame):
    y, u, v = frame.planes
    return np.concatenate([y.ravel(), u.ravel(), v.ravel()]).reshape(frame.height * 3 // 2, frame.width)


def pattern(procs, framesrv_bin, size):
    return procs.start(framesrv_bin, "produce", "--pattern", "--out", "cam", "--pix-fmt", "yuv420p", "--size", size,
                       "--frames", "3", "--rate", "max", "--wait-for", "1")


def test_i420_is_a_zero_copy_view_when_the_planes_are_contiguous(fsdir, framesrv_bin, procs):
    p = pattern(procs, framesrv_bin, "256x64")   # strides 256 and 128: canonical and unpadded
    with framesrv.Consumer("cam", timeout=30) as c:
        for frame in c:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                buf = frame.i420()
            assert frame.i420_is_view and buf.shape == (96, 256) and not buf.flags.writeable
            assert np.shares_memory(buf, frame.planes[0]) and np.shares_memory(buf, frame.planes[2])
            assert buf.__array_interface__["data"][0] == frame.planes[0].__array_interface__["data"][0]
            bgr = cv2.cvtColor(buf, cv2.COLOR_YUV2BGR_I420)
            assert np.array_equal(bgr, cv2.cvtColor(hand_assembled(frame), cv2.COLOR_YUV2BGR_I420))
            assert not np.shares_memory(frame.i420(copy=True), frame.planes[0])
    assert procs.finish(p)[0] == 0


def test_i420_copies_padded_planes_and_says_so(fsdir, framesrv_bin, procs):
    p = pattern(procs, framesrv_bin, "96x64")    # chroma rows of 48 bytes padded to 64
    with framesrv.Consumer("cam", timeout=30) as c:
        for frame in c:
            assert not frame.i420_is_view
            with pytest.warns(framesrv.I420CopyWarning, match="padded"):
                buf = frame.i420()
            assert not np.shares_memory(buf, frame.planes[0])
            bgr = cv2.cvtColor(buf, cv2.COLOR_YUV2BGR_I420)
            assert np.array_equal(bgr, cv2.cvtColor(hand_assembled(frame), cv2.COLOR_YUV2BGR_I420))
            with pytest.raises(ValueError, match="not back to back"):
                frame.i420(copy=False)
    assert procs.finish(p)[0] == 0


def test_i420_refuses_other_formats_and_odd_sizes(fsdir):
    for size, fmt, msg in (((64, 48), "nv12", "needs a yuv420p frame"), ((63, 48), "yuv420p", "even width")):
        with framesrv.Producer("out", *size, fmt) as p:
            with p.reserve() as frame:
                with pytest.raises(ValueError, match=msg):
                    frame.i420()


def test_producer_fills_a_frame_through_its_i420_view(fsdir):
    bgr = np.random.default_rng(1).integers(0, 256, (64, 256, 3), dtype=np.uint8)
    want = cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420)
    with framesrv.Producer("out", 256, 64, "yuv420p") as p, framesrv.Consumer("out", timeout=10) as c:
        with p.reserve() as frame:
            view = frame.i420(copy=False)
            cv2.cvtColor(bgr, cv2.COLOR_BGR2YUV_I420, dst=view)
        assert not view.flags.writeable          # made read-only at the publish, like the planes
        got = c.next(timeout=10)
        assert np.array_equal(hand_assembled(got), want)
