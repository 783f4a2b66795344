#!/usr/bin/env python3
"""frame_window.py: a framesrv stage with a temporal window: each output frame is the
running mean of the last N input frames (fewer at the start), sample by sample, on every
plane (floor of the mean, as integer division).

Shows: keeping frames across iterations without holding their slots. An array of a frame
keeps the frame held (framesrv's safety rule), so a window of N arrays needs N slots:
with fewer (produce --slots 4 and a window of 8) a lossless producer could never publish
the next frame, and the consumer would say so and raise framesrv.HeldFramesError. The
window keeps owned copies instead (frame.copy()), so every slot goes back at once, and a
running sum makes each output frame one addition and one subtraction per sample.

Run:
    framesrv produce -i video.mp4 --out cam --slots 4 &
    python examples/python/frame_window.py --in cam --out mean --frames 8 &
    framesrv sink --in mean --record mean.mp4
"""
import argparse
import collections

import numpy as np

import framesrv


class RunningMean:
    """The mean of the last n frames' planes, kept as owned copies and a running sum."""

    def __init__(self, n):
        self.window = collections.deque()
        self.n = n
        self.sums = None

    def add(self, frame):
        """Adds a frame (copied: its slot is not held) and returns the window's mean planes."""
        planes = frame.copy()
        if self.sums is None or [s.shape for s in self.sums] != [p.shape for p in planes]:
            self.window.clear()   # the first frame, or a format change: start again
            self.sums = [np.zeros(p.shape, np.int64) for p in planes]
        self.window.append(planes)
        for s, p in zip(self.sums, planes):
            s += p
        if len(self.window) > self.n:
            for s, p in zip(self.sums, self.window.popleft()):
                s -= p
        return [s // len(self.window) for s in self.sums]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--in", dest="src", required=True, help="input stream")
    ap.add_argument("--out", dest="dst", required=True, help="output stream")
    ap.add_argument("--frames", type=int, default=8, help="frames in the window (default 8)")
    ap.add_argument("--wait-for", type=int, default=0, help="lossless consumers to wait for before publishing")
    args = ap.parse_args()
    if args.frames < 1:
        raise SystemExit(f"frame_window: --frames must be >= 1, not {args.frames}")
    mean = RunningMean(args.frames)

    def stage(frame_in, frame_out):
        for dst, m in zip(frame_out.planes, mean.add(frame_in)):
            np.copyto(dst, m, casting="unsafe")

    n = framesrv.filter(args.src, args.dst, stage, wait_for=args.wait_for)
    print(f"frame_window: {n} frames")


if __name__ == "__main__":
    main()
