"""Protocol v2 metadata through the Python package: exact rational rates, field order and
chroma location, from a Python producer to a Python consumer and to the Swift sink."""
from fractions import Fraction

import pytest

import framesrv


@pytest.mark.parametrize("rate, exact", [("30000/1001", Fraction(30000, 1001)), (Fraction(45000, 1499), Fraction(45000, 1499)),
                                         ("1000000/66667", Fraction(1000000, 66667)), (25, Fraction(25)),
                                         ("29.97", Fraction(2997, 100)), (29.97, Fraction(2997, 100)),
                                         ("4294967311/2", Fraction(4294967311, 2))])
def test_rate_is_an_exact_fraction(fsdir, rate, exact):
    with framesrv.Producer("r", 64, 48, "gray", rate=rate, slots=2) as p:
        assert p.rate == exact
        with framesrv.Consumer("r", timeout=10) as c:
            assert type(c.rate) is Fraction and c.rate == exact
            assert c.stream_info["rate"] == (exact.numerator, exact.denominator)
            assert c.time_base == 1 / exact


def test_unknown_rate_is_none(fsdir):
    with framesrv.Producer("n", 64, 48, "gray", rate=None, slots=2):
        with framesrv.Consumer("n", timeout=10) as c:
            assert c.rate is None and c.time_base is None


@pytest.mark.parametrize("rate", ["1/0", "abc", -5, "0/0x"])
def test_bad_rate_is_refused(fsdir, rate):
    with pytest.raises(framesrv.InvalidArgument):
        framesrv.Producer("bad", 64, 48, "gray", rate=rate)


def test_field_order_and_chroma_location_round_trip(fsdir):
    cases = [(framesrv.FieldOrder.BB, framesrv.ChromaLocation.LEFT), (framesrv.FieldOrder.TT, framesrv.ChromaLocation.CENTER),
             (framesrv.FieldOrder.PROGRESSIVE, framesrv.ChromaLocation.TOPLEFT), (5, 6), (0, 0)]
    with framesrv.Producer("f", 64, 48, "yuv420p", rate="30000/1001", slots=len(cases)) as p:
        with framesrv.Consumer("f", timeout=10) as c:
            for field, chroma in cases:
                with p.reserve(timeout=10) as f:
                    f.field_order, f.chroma_location = field, chroma
            for field, chroma in cases:
                g = c.next(timeout=10)
                assert (g.field_order, g.chroma_location) == (field, chroma)
                assert isinstance(g.field_order, framesrv.FieldOrder) and isinstance(g.chroma_location, framesrv.ChromaLocation)
                info = g._info
                assert (info["field_order"], info["chroma_location"]) == (int(field), int(chroma))
                g.release()
                assert g.field_order == field      # the header stays readable after the release


def test_field_order_and_chroma_location_are_checked(fsdir):
    with framesrv.Producer("v", 64, 48, "yuv420p", slots=2) as p:
        f = p.reserve(timeout=10)
        with pytest.raises(ValueError):
            f.field_order = 6
        with pytest.raises(ValueError):
            f.chroma_location = 7
        p.abandon(f)


def test_copy_header_from_carries_field_order_and_chroma(fsdir):
    with framesrv.Producer("a", 64, 48, "yuv420p", slots=2) as p1, framesrv.Producer("b", 64, 48, "yuv420p", slots=2) as p2:
        with framesrv.Consumer("a", timeout=10) as c1, framesrv.Consumer("b", timeout=10) as c2:
            with p1.reserve(timeout=10) as f:
                f.field_order, f.chroma_location = framesrv.FieldOrder.BT, framesrv.ChromaLocation.BOTTOM
            g = c1.next(timeout=10)
            with p2.reserve(timeout=10) as f:
                f.copy_header_from(g)
            h = c2.next(timeout=10)
            assert (h.field_order, h.chroma_location) == (framesrv.FieldOrder.BT, framesrv.ChromaLocation.BOTTOM)
            g.release()
            h.release()


Y4M_PRODUCER = """
import framesrv
with framesrv.Producer("y", 64, 48, "yuv420p", rate="30000/1001", slots=2) as p:
    p.wait_for_consumers(1, 30)
    for i in range(3):
        with p.reserve(timeout=30) as f:
            f.fill_pattern()
            f.field_order, f.chroma_location = framesrv.FieldOrder.BB, framesrv.ChromaLocation.TOPLEFT
"""


def test_swift_sink_sees_rate_field_order_and_chroma(fsdir, framesrv_bin, procs, tmp_path):
    """A Python producer's exact rate, bottom-field-first and top-left chroma reach the Swift
    sink: its y4m header says F30000:1001, Ib and C420paldv (as ffmpeg's muxer would)."""
    y4m = tmp_path / "out.y4m"
    s = procs.start(framesrv_bin, "sink", "--in", "y", "--y4m", y4m, "--wait", "30")
    p = procs.python("-c", Y4M_PRODUCER)
    assert procs.finish(p)[0] == 0
    rc, out, err = procs.finish(s)
    assert rc == 0, err
    header = y4m.read_bytes().split(b"\n", 1)[0].decode().split()
    assert header[0] == "YUV4MPEG2" and "F30000:1001" in header and "Ib" in header, header
    assert "C420paldv" in header, header
