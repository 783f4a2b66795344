"""A frame's header fields, read one at a time from the frame (no dict per frame) and set on a
reserved producer frame straight into its header: each equals what info() says, on consumer
and producer frames, before and after the release or publish."""
from fractions import Fraction

import pytest

import framesrv

#: the Frame properties that are info()'s values as they are
PLAIN = ("seq", "epoch", "width", "height", "pix_fmt", "publish_ns", "color_matrix", "color_range", "color_primaries",
         "color_transfer", "duration", "capture_ns", "flags", "source_dropped", "pts")


def assert_fields_match_info(frame):
    """Every field, through the Python Frame and through its C handle, equals info()'s."""
    info = frame._f.info()
    assert set(info) == {"seq", "epoch", "width", "height", "pix_fmt_code", "pix_fmt", "planes", "color_matrix",
                         "color_range", "color_primaries", "color_transfer", "sar", "pts", "time_base", "duration",
                         "capture_ns", "flags", "field_order", "chroma_location", "source_dropped", "publish_ns",
                         # an audio frame's fields (PROTOCOL.md 4.6): 0 in a picture's header
                         "media", "sample_fmt", "sample_rate", "channels", "channel_order", "nb_samples", "channel_mask"}
    for key, value in info.items():
        if key == "planes":
            assert frame._f.plane_count == len(value)
        else:
            got = getattr(frame._f, key)
            assert got == value and type(got) is type(value), key
    for key in PLAIN:
        assert getattr(frame, key) == info[key], key
    assert frame.field_order == info["field_order"] and isinstance(frame.field_order, framesrv.FieldOrder)
    assert frame.chroma_location == info["chroma_location"] and isinstance(frame.chroma_location, framesrv.ChromaLocation)
    for key in ("sar", "time_base"):
        num, den = info[key]
        assert getattr(frame, key) == (Fraction(num, den) if num > 0 and den > 0 else None), key
    assert frame.key == bool(info["flags"] & framesrv.FLAG_KEY)
    assert frame._info == info
    return info


def describe(f):
    f.color_matrix, f.color_range, f.color_primaries, f.color_transfer = 5, 2, 9, 16
    f.duration, f.capture_ns, f.source_dropped = 7, 123456789, 3
    f.pts, f.time_base, f.sar = -42, Fraction(1001, 30000), Fraction(16, 11)
    f.field_order, f.chroma_location = framesrv.FieldOrder.TB, framesrv.ChromaLocation.TOP
    f.flags = framesrv.FLAG_DISCONTINUITY
    f.key = True


def test_producer_and_consumer_fields_equal_info(fsdir):
    with framesrv.Producer("h", 64, 48, "nv12", rate="30000/1001", slots=4) as p, \
            framesrv.Consumer("h", timeout=10) as c:
        f = p.reserve(timeout=10)
        defaults = assert_fields_match_info(f)   # as reserved: the library's defaults
        assert (defaults["pts"], defaults["time_base"], defaults["duration"]) == (0, (1001, 30000), 1)
        describe(f)
        sent = assert_fields_match_info(f)
        assert (sent["pts"], sent["time_base"], sent["sar"]) == (-42, (1001, 30000), (16, 11))
        assert sent["flags"] == framesrv.FLAG_DISCONTINUITY | framesrv.FLAG_KEY
        p.publish(f)
        assert assert_fields_match_info(f) == sent   # readable after the publish, as it was set
        with p.reserve(timeout=10) as f2:
            f2.pts = None
            assert f2.pts is None and f2._f.info()["pts"] is None

        g = c.next(timeout=10)
        got = assert_fields_match_info(g)
        for key in sent:
            if key not in ("publish_ns", "capture_ns", "flags", "planes"):
                assert got[key] == sent[key], key
        assert got["capture_ns"] == 123456789 and got["publish_ns"] > 0
        assert got["flags"] & ~framesrv.FLAG_DISCONTINUITY == framesrv.FLAG_KEY
        g.release()
        assert assert_fields_match_info(g) == got   # and after the release
        h = c.next(timeout=10)
        assert h.pts is None and assert_fields_match_info(h)["pts"] is None
        h.release()


def test_fields_are_set_only_on_a_reserved_producer_frame(fsdir):
    with framesrv.Producer("r", 64, 48, "gray", slots=4) as p, framesrv.Consumer("r", timeout=10) as c:
        with p.reserve(timeout=10) as f:
            f.pts = 5
        for frame in (f, c.next(timeout=10)):
            for key, value in (("pts", 1), ("color_range", 1), ("time_base", Fraction(1, 25)), ("sar", 1), ("key", False)):
                name = "flags" if key == "key" else key
                with pytest.raises(AttributeError, match=f"^{name} is read-only: set it on a reserved producer frame$"):
                    setattr(frame, key, value)
            with pytest.raises(AttributeError):
                frame.copy_header_from(frame)
            assert frame.pts == 5
        c.close()


def test_a_bad_value_is_refused_when_set_and_the_frame_keeps_its_old_one(fsdir):
    with framesrv.Producer("b", 64, 48, "gray", slots=4) as p, framesrv.Consumer("b", timeout=10) as c:
        with p.reserve(timeout=10) as f:
            for key, value, message in (("color_range", 3, "color_range out of range: 3"),
                                        ("flags", 8, "flags out of range: 8"),
                                        ("duration", -1, "duration out of range: -1"),
                                        ("time_base", Fraction(1, 2**31), "time_base_den out of range: 2147483648"),
                                        ("source_dropped", 2**32, "source_dropped out of range: 4294967296")):
                before = f._f.info()
                with pytest.raises(ValueError, match=f"^{message}$"):
                    setattr(f, key, value)
                assert f._f.info() == before
            with pytest.raises(TypeError):
                f._f.sar = 3
            with pytest.raises(AttributeError):
                del f.pts
            f.color_range = 2
        g = c.next(timeout=10)
        assert (g.color_range, g.flags, g.duration, g.source_dropped) == (2, 0, 0, 0)
        g.release()


def test_set_info_still_sets_the_writable_fields(fsdir):
    with framesrv.Producer("s", 64, 48, "gray", slots=4) as p, framesrv.Consumer("s", timeout=10) as c:
        with p.reserve(timeout=10) as f:
            f._f.set_info({"pts": None, "sar_num": 4, "sar_den": 3, "color_matrix": 6, "chroma_location": 2})
            assert (f.pts, f.sar, f.color_matrix, f.chroma_location) == (None, Fraction(4, 3), 6, 2)
            with pytest.raises(ValueError, match="^field_order out of range: 9$"):
                f._f.set_info({"field_order": 9})
        g = c.next(timeout=10)
        assert (g.pts, g.sar, g.color_matrix, g.chroma_location) == (None, Fraction(4, 3), 6, 2)
        g.release()


def test_publishing_a_consumer_frame_is_refused(fsdir):
    with framesrv.Producer("c", 64, 48, "gray", slots=4) as p, framesrv.Consumer("c", timeout=10) as c:
        with p.reserve(timeout=10):
            pass
        g = c.next(timeout=10)
        with pytest.raises(framesrv.StateError, match="^not a reserved frame"):
            p.publish(g)
        assert g.seq == 1
        g.release()
