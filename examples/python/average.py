#!/usr/bin/env python3
"""average.py: a framesrv stage in Python that joins two streams: each output frame is the
average of the two input frames with the same position in their streams, sample by sample
((a + b) // 2, as ffmpeg's blend=all_mode=average), on every plane.

Shows: a stage with two inputs (two lossless Consumers read in step) and one Producer;
the output takes the first input's timestamps and colour; it ends when either input ends;
SIGINT/SIGTERM end the output stream cleanly.

Run with framesrv run, which wires the two named streams into it ({in:NAME}):
    framesrv run "produce -i a.mp4 name=a  produce -i b.mp4 name=b
                  exec python3 examples/python/average.py {in:a} {in:b} --out {out} --wait-for {wait-for}
                  ! sink --record avg.mp4"
"""
import argparse
import itertools

import numpy as np

import framesrv


def average(fa, fb, out):
    """Writes (a + b) // 2 of every plane of fa and fb into out's planes."""
    for dst, a, b in zip(out.planes, fa.planes, fb.planes):
        np.right_shift(a.astype(np.uint32) + b, 1, out=dst, casting="unsafe")


def check_same_format(fa, fb):
    fmt_a, fmt_b = (fa.width, fa.height, fa.pix_fmt), (fb.width, fb.height, fb.pix_fmt)
    if fmt_a != fmt_b:
        raise SystemExit(f"average: the inputs differ: {fmt_a} and {fmt_b} (scale or convert one first)")


def run(a, b, out, wait_for):
    """Averages streams a and b into a new stream out until either ends; the frame count."""
    framesrv.stop_on_signals()
    count = 0
    try:
        with framesrv.Consumer(a, client_name="average") as ca, framesrv.Consumer(b, client_name="average") as cb:
            pairs = zip(ca, cb)
            first = next(pairs, None)
            if first is None:
                return 0
            fa = first[0]
            colour = dict(color_matrix=fa.color_matrix, color_range=fa.color_range,
                          color_primaries=fa.color_primaries, color_transfer=fa.color_transfer)
            with framesrv.Producer(out, fa.width, fa.height, fa.pix_fmt, rate=ca.rate, **colour) as producer:
                producer.wait_for_consumers(wait_for)
                for fa, fb in itertools.chain([first], pairs):
                    check_same_format(fa, fb)
                    with producer.reserve() as frame:
                        frame.copy_header_from(fa)
                        average(fa, fb, frame)
                    count += 1
    except KeyboardInterrupt:
        pass   # the with blocks ended the output stream cleanly
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="first input stream (timestamps and colour come from it)")
    ap.add_argument("b", help="second input stream")
    ap.add_argument("--out", required=True, help="output stream")
    ap.add_argument("--wait-for", type=int, default=0, help="lossless consumers to wait for before publishing")
    args = ap.parse_args()
    print(f"average: {run(args.a, args.b, args.out, args.wait_for)} frames")


if __name__ == "__main__":
    main()
