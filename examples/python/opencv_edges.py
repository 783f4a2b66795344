#!/usr/bin/env python3
"""opencv_edges.py: a framesrv filter stage with OpenCV: Canny edges of every frame,
published as a gray stream of the same size (timestamps and rate pass through).

Shows: framesrv.filter with out_pix_fmt="gray"; the input array is read-only numpy over
shared memory, handed to OpenCV without a copy; the edges are written straight into the
output frame (cv2.Canny(..., edges=out)).

Needs opencv-python-headless (pip install opencv-python-headless).

Run (after `pip install ./clients/python`):
    framesrv produce -i video.mp4 --out cam &
    python examples/python/opencv_edges.py --in cam --out edges &
    framesrv sink --in edges --record edges.mp4
"""
import argparse

import cv2
import numpy as np

import framesrv

TO_GRAY = {"rgb24": cv2.COLOR_RGB2GRAY, "bgr24": cv2.COLOR_BGR2GRAY, "rgba": cv2.COLOR_RGBA2GRAY,
           "bgra": cv2.COLOR_BGRA2GRAY}


def luma8(frame):
    """The frame's brightness as 8-bit (h, w): converted from RGB, else the Y plane
    (16-bit formats scaled down)."""
    a = frame.array()
    if frame.pix_fmt in TO_GRAY:
        return cv2.cvtColor(a, TO_GRAY[frame.pix_fmt])
    if frame.pix_fmt == "gbrp":
        return a   # G, the plane closest to brightness
    if a.dtype != np.uint8:
        return (a >> (8 if frame.pix_fmt.startswith(("gray16", "p010")) else 2)).astype(np.uint8)
    return a


def edges(frame_in, frame_out, low=50, high=150):
    """The filter: Canny edges of the input's brightness into the gray output frame."""
    blurred = cv2.GaussianBlur(luma8(frame_in), (3, 3), 0)
    cv2.Canny(blurred, low, high, edges=frame_out.array())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--in", dest="src", required=True, help="input stream")
    ap.add_argument("--out", dest="dst", required=True, help="output stream")
    ap.add_argument("--wait-for", type=int, default=0, help="lossless consumers to wait for before publishing")
    args = ap.parse_args()
    n = framesrv.filter(args.src, args.dst, edges, out_pix_fmt="gray", wait_for=args.wait_for)
    print(f"opencv_edges: {n} frames")


if __name__ == "__main__":
    main()
