#!/usr/bin/env python3
"""numpy_overlay.py: a framesrv filter stage in Python that draws a box and a line of text
(the frame's sequence number, with a tiny built-in bitmap font: numpy only) into every
frame, in place in the output frame's shared memory (no copy of the result).

Shows: framesrv.filter with an in-place function fn(frame_in, frame_out); timestamps,
colour and rate pass through; SIGINT/SIGTERM end the output stream cleanly.

Run (after `pip install ./clients/python`):
    framesrv produce --pattern --out cam --pix-fmt rgb24 &
    python examples/python/numpy_overlay.py --in cam --out boxed &
    framesrv sink --in boxed --y4m - | ffplay -     # or any consumer
"""
import argparse

import numpy as np

import framesrv

# 3x5 glyphs, rows top to bottom, '#' = ink.
GLYPHS = {
    "0": ("###", "#.#", "#.#", "#.#", "###"), "1": (".#.", "##.", ".#.", ".#.", "###"),
    "2": ("###", "..#", "###", "#..", "###"), "3": ("###", "..#", "###", "..#", "###"),
    "4": ("#.#", "#.#", "###", "..#", "..#"), "5": ("###", "#..", "###", "..#", "###"),
    "6": ("###", "#..", "###", "#.#", "###"), "7": ("###", "..#", "..#", "..#", "..#"),
    "8": ("###", "#.#", "###", "#.#", "###"), "9": ("###", "#.#", "###", "..#", "###"),
    "S": ("###", "#..", "###", "..#", "###"), "E": ("###", "#..", "###", "#..", "###"),
    "Q": ("###", "#.#", "#.#", "###", "..#"), " ": ("...", "...", "...", "...", "..."),
}


def glyph(ch):
    rows = GLYPHS.get(ch, GLYPHS[" "])
    return np.array([[c == "#" for c in row] for row in rows], dtype=bool)


def text_mask(text, scale):
    """A boolean mask of `text` in the 3x5 font, each font pixel scale x scale."""
    cells = [np.pad(glyph(ch), ((0, 0), (0, 1))) for ch in text]
    mask = np.hstack(cells) if cells else np.zeros((5, 0), bool)
    return np.kron(mask, np.ones((scale, scale), dtype=bool)).astype(bool)


def white_of(frame):
    """White in the frame's sample range: 255, 1023 (10-bit) or 65535 (gray16le)."""
    if frame.array().dtype.itemsize == 1:
        return 255
    return 65535 if frame.pix_fmt.startswith("gray16") else 1023


def overlay(plane, seq, white=255):
    """Draws a box around the middle half of the picture and 'SEQ <seq>' on a dark label above it, into
    plane (the luma of planar formats, or a packed RGB/gray picture), in place."""
    h, w = plane.shape[:2]
    y0, y1, x0, x1 = h // 4, 3 * h // 4, w // 4, 3 * w // 4
    t = max(2, h // 100)
    for ys, xs in ((slice(y0, y0 + t), slice(x0, x1)), (slice(y1 - t, y1), slice(x0, x1)),
                   (slice(y0, y1), slice(x0, x0 + t)), (slice(y0, y1), slice(x1 - t, x1))):
        plane[ys, xs] = white
    mask = text_mask(f"SEQ {seq}", max(1, h // 60))
    mh, mw = min(mask.shape[0], y0), min(mask.shape[1], w - x0)
    region = plane[y0 - mh:y0, x0:x0 + mw]
    region[...] = 0                                   # a dark label behind the text
    region[mask[:mh, :mw]] = white


def draw(frame_in, frame_out):
    """The filter: copy the input into the output frame, then draw on it in place."""
    for dst, src in zip(frame_out.planes, frame_in.planes):
        np.copyto(dst, src)
    overlay(frame_out.planes[0], frame_in.seq, white_of(frame_out))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--in", dest="src", required=True, help="input stream")
    ap.add_argument("--out", dest="dst", required=True, help="output stream")
    ap.add_argument("--wait-for", type=int, default=0, help="lossless consumers to wait for before publishing")
    args = ap.parse_args()
    n = framesrv.filter(args.src, args.dst, draw, wait_for=args.wait_for)
    print(f"numpy_overlay: {n} frames")


if __name__ == "__main__":
    main()
