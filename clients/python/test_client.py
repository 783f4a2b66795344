"""Tests of framesrv_client that need no running producer.

    python3 -m pytest clients/python/test_client.py

They check the client's layout against CFrameServer.h (parsed, and, when a C compiler
is available, as compiled) and the announcement codec against protocol/vectors/.
"""

import json
import os
import shutil
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import framesrv_client as fc  # noqa: E402

VECTORS = os.path.join(HERE, "..", "..", "protocol", "vectors", "announcements.json")


def load_vectors():
    with open(VECTORS, encoding="utf-8") as f:
        return json.load(f)


# --- layout ---------------------------------------------------------------------------

def test_check_layout_passes_against_the_header():
    assert fc.check_layout() > 100


def test_header_offsets_spot_check():
    # A few numbers straight from the header, so a bug in check_layout's parser that
    # made it vacuous would still be caught.
    assert fc.FsControl.latest.offset == 72
    assert fc.FsControl.wake.offset == 112
    assert fc.FsControl.attach_seq.offset == 128
    assert fc.FsControl.name.offset == 160
    assert fc.FsConsumer.first_seq.offset == 24
    assert fc.FsConsumer.stale.offset == 248
    assert fc.FsFrame.capture_ns.offset == 136
    assert fc.FsFrame.pix_fmt_name.offset == 152
    assert fc.FsAnnounce.name_len.offset == 56
    assert [fc.ctypes.sizeof(c) for c in (fc.FsControl, fc.FsSlotCtl, fc.FsConsumer, fc.FsFrame, fc.FsAnnounce)] \
        == [512, 64, 256, 256, 64]


def test_check_layout_detects_a_drifted_header(tmp_path):
    with open(fc.DEFAULT_HEADER, encoding="utf-8") as f:
        text = f.read()
    # An offset comment that no longer matches the declarations.
    drifted = text.replace("uint64_t latest;              /*  72", "uint64_t latest;              /*  80")
    assert drifted != text
    p = tmp_path / "CFrameServer.h"
    p.write_text(drifted)
    with pytest.raises(AssertionError, match="latest"):
        fc.check_layout(str(p))
    # A changed constant.
    p.write_text(text.replace("#define FS_PROTOCOL_VERSION 1u", "#define FS_PROTOCOL_VERSION 2u"))
    with pytest.raises(AssertionError, match="FS_PROTOCOL_VERSION"):
        fc.check_layout(str(p))
    # A new field.
    p.write_text(text.replace("    uint64_t stale;", "    uint32_t extra;               /* 248 */\n    uint64_t stale;"))
    with pytest.raises(AssertionError, match="fs_consumer"):
        fc.check_layout(str(p))


@pytest.mark.skipif(shutil.which(os.environ.get("FRAMESRV_CC", "cc")) is None, reason="no C compiler")
def test_layout_matches_the_compiler():
    compiled = fc.compiled_layout()
    for sname, cls in fc.STRUCTS.items():
        assert compiled[(sname, "")] == (0, fc.ctypes.sizeof(cls)), sname
        for fname, *_ in cls._fields_:
            f = getattr(cls, fname)
            assert compiled[(sname, fname)] == (f.offset, f.size), f"{sname}.{fname}"
    assert len(compiled) == len(fc.STRUCTS) + sum(len(c._fields_) for c in fc.STRUCTS.values())


def test_plane_geometry():
    # yuv420p 100x50: luma rows of 100 bytes padded to 128; chroma 50x25 padded to 64.
    g = fc.plane_geometry(fc.FS_PIX_YUV420P, 100, 50)
    assert g == [(100, 50, 128, 256, 6400), (50, 25, 64, 256 + 6400, 1600),
                 (50, 25, 64, 256 + 6400 + 1600, 1600)]
    # nv12 with odd sizes rounds the chroma plane up.
    g = fc.plane_geometry(fc.FS_PIX_NV12, 3, 3)
    assert g == [(3, 3, 64, 256, 192), (4, 2, 64, 448, 128)]
    # A plane whose size is not a multiple of 64 pushes the next offset up to one.
    g = fc.plane_geometry(fc.FS_PIX_YUV420P, 2, 1)
    assert [p[3] for p in g] == [256, 320, 384]
    assert all(len(fc.PIXEL_FORMATS[c][1]) in (1, 2, 3) for c in fc.PIXEL_FORMATS)


# --- announcements --------------------------------------------------------------------

VALID = [v for v in load_vectors() if "error" not in v]
INVALID = [v for v in load_vectors() if "error" in v]


def test_vectors_cover_the_required_cases():
    names = {v["name"] for v in load_vectors()}
    assert {"frame", "frame-pts-none-key-discontinuity", "end", "epoch", "long-name"} <= names
    assert {v["error"] for v in INVALID} == {"bad-magic", "version", "short", "length", "kind"}
    assert any(len(v["stream"]) == 48 for v in VALID)


@pytest.mark.parametrize("v", VALID, ids=[v["name"] for v in VALID])
def test_valid_vector_decodes_and_reencodes(v):
    data = bytes.fromhex(v["hex"])
    a = fc.decode_announcement(data)
    for field in ("kind", "stream", "seq", "slot", "flags", "epoch", "capture_ns", "pts", "publish_ns"):
        assert getattr(a, field) == v[field], field
    assert fc.encode_announcement(a) == data
    assert fc.encode_announcement(fc.Announcement(**{k: v[k] for k in (
        "kind", "stream", "seq", "slot", "flags", "epoch", "capture_ns", "pts", "publish_ns")})).hex() == v["hex"]


@pytest.mark.parametrize("v", INVALID, ids=[v["name"] for v in INVALID])
def test_invalid_vector_is_rejected(v):
    with pytest.raises(ValueError) as e:
        fc.decode_announcement(bytes.fromhex(v["hex"]))
    assert isinstance(e.value, fc.AnnouncementError)
    assert e.value.code == v["error"]


def test_version_error_names_both_versions():
    v = next(v for v in INVALID if v["error"] == "version")
    with pytest.raises(ValueError, match=r"version 2.*version 1"):
        fc.decode_announcement(bytes.fromhex(v["hex"]))


# --- small pieces of the consumer -----------------------------------------------------

def test_runtime_dir_resolution(monkeypatch):
    monkeypatch.setenv("FRAMESRV_DIR", "/x/y")
    monkeypatch.setenv("XDG_RUNTIME_DIR", "/run/user/1")
    assert fc.runtime_dir_path() == "/x/y"
    monkeypatch.setenv("FRAMESRV_DIR", "")
    assert fc.runtime_dir_path() == "/run/user/1/framesrv"
    monkeypatch.delenv("FRAMESRV_DIR")
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert fc.runtime_dir_path() in (f"/dev/shm/framesrv-{os.getuid()}", f"/tmp/framesrv-{os.getuid()}")


@pytest.mark.parametrize("name,ok", [("cam", True), ("a" * 48, True), ("a" * 49, False), ("", False),
                                     (".hidden", False), ("x.y_z-1", True), ("sp ace", False), ("a/b", False)])
def test_stream_names(name, ok):
    if ok:
        fc.validate_stream_name(name)
    else:
        with pytest.raises(ValueError):
            fc.validate_stream_name(name)


def test_process_start_time_of_self():
    t = fc.process_start_time(os.getpid())
    assert t > 0
    assert fc.process_start_time(2 ** 22 + 12345) == 0     # above pid_max: no such process
    fd = fc.open_exit_descriptor(os.getpid(), t)
    assert fd is not None
    os.close(fd)
    assert fc.open_exit_descriptor(os.getpid(), t + 1) is None


def test_consumer_times_out_without_a_producer(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAMESRV_DIR", str(tmp_path / "rt"))
    c = fc.Consumer("nobody", wait=0.1)
    with pytest.raises(TimeoutError, match="nobody"):
        c.attach()
    assert (tmp_path / "rt").stat().st_mode & 0o777 == 0o700
