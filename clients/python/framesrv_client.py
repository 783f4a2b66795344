#!/usr/bin/env python3
"""framesrv_client: a Python consumer for framesrv streams, protocol version 1.

Standard library plus pyzmq. The layout and the algorithms are those of
protocol/PROTOCOL.md; Sources/CFrameServer/include/CFrameServer.h is the single source
of truth for every byte, and check_layout() verifies this module against it.

Atomic operations on the shared control segment go through _fsatomic.c, a few exported
wrappers around the header's own static inline accessors, compiled on first use with
`cc` (set FRAMESRV_CC to use another compiler) into $XDG_CACHE_HOME/framesrv (default
~/.cache/framesrv). So the orderings are exactly the header's; see its SYNC: comments.

    from framesrv_client import Consumer
    with Consumer("cam", mode="lossless") as consumer:
        for frame in consumer:               # each frame is released at the next iteration
            y = frame.plane(0)               # a read-only memoryview into shared memory
            ...

Command line (a test consumer; prints one summary line):

    python3 framesrv_client.py --in NAME [--live] [--verify-pattern] [--seq-log FILE] [--count N]

A Consumer is not thread-safe: use it from one thread (its ZeroMQ socket is not either).
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import hashlib
import mmap
import os
import re
import select
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
import weakref

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_HEADER = os.environ.get("FRAMESRV_HEADER") or os.path.normpath(
    os.path.join(HERE, "..", "..", "Sources", "CFrameServer", "include", "CFrameServer.h"))

# --------------------------------------------------------------------------------------
# Constants (CFrameServer.h; check_layout() compares every one of them with the header)
# --------------------------------------------------------------------------------------

FS_PROTOCOL_VERSION = 1
FS_MAGIC_CONTROL = 0x54435346   # "FSCT"
FS_MAGIC_FRAME = 0x52465346     # "FSFR"
FS_MAGIC_ANNOUNCE = 0x4E415346  # "FSAN"
FS_MAX_CONSUMERS = 63
FS_MAX_SLOTS = 64
FS_MAX_PLANES = 4
FS_NAME_MAX = 48
FS_HOLDER_WRITER = 1 << 63
FS_LATENCY_BUCKETS = 16

FS_STREAM_RUNNING = 1
FS_STREAM_ENDED = 2
FS_CONTROL_LIVE_SOURCE = 1

FS_CONSUMER_FREE = 0
FS_CONSUMER_CLAIMED = 1
FS_CONSUMER_ACTIVE = 2
FS_CONSUMER_CLOSING = 3

FS_MODE_LIVE = 1
FS_MODE_LOSSLESS = 2
FS_MODE_MONITOR = 3

FS_FRAME_KEY = 1
FS_FRAME_END_OF_STREAM = 2
FS_FRAME_DISCONTINUITY = 4

FS_ANNOUNCE_FRAME = 1
FS_ANNOUNCE_END = 2
FS_ANNOUNCE_EPOCH = 3

FS_PIX_OTHER = 0
FS_PIX_GRAY8 = 1
FS_PIX_NV12 = 2
FS_PIX_YUV420P = 3
FS_PIX_YUV422P = 4
FS_PIX_YUV444P = 5
FS_PIX_YUV420P10LE = 6
FS_PIX_RGB24 = 7
FS_PIX_BGRA = 8
FS_PIX_RGBA = 9
FS_PIX_P010LE = 10
FS_PIX_YUV422P10LE = 11
FS_PIX_YUV444P10LE = 12
FS_PIX_GRAY16LE = 13
FS_PIX_BGR24 = 14
FS_PIX_GBRP = 15

FS_MATRIX_RGB = 0
FS_MATRIX_BT709 = 1
FS_MATRIX_UNSPECIFIED = 2
FS_MATRIX_BT470BG = 5
FS_MATRIX_SMPTE170M = 6
FS_MATRIX_BT2020_NCL = 9
FS_RANGE_UNSPECIFIED = 0
FS_RANGE_LIMITED = 1
FS_RANGE_FULL = 2

FS_PTS_NONE = -(1 << 63)        # INT64_MIN

# Every #define of the header this module relies on, checked by check_layout().
HEADER_CONSTANTS = {k: v for k, v in globals().items() if k.startswith("FS_") and isinstance(v, int)}

# Pixel format code -> (FFmpeg name, planes as (log2 x subsampling, log2 y subsampling,
# bytes per subsampled pixel)). PixelFormat.swift has the same table.
PIXEL_FORMATS = {
    FS_PIX_GRAY8: ("gray", [(0, 0, 1)]),
    FS_PIX_NV12: ("nv12", [(0, 0, 1), (1, 1, 2)]),
    FS_PIX_YUV420P: ("yuv420p", [(0, 0, 1), (1, 1, 1), (1, 1, 1)]),
    FS_PIX_YUV422P: ("yuv422p", [(0, 0, 1), (1, 0, 1), (1, 0, 1)]),
    FS_PIX_YUV444P: ("yuv444p", [(0, 0, 1), (0, 0, 1), (0, 0, 1)]),
    FS_PIX_YUV420P10LE: ("yuv420p10le", [(0, 0, 2), (1, 1, 2), (1, 1, 2)]),
    FS_PIX_RGB24: ("rgb24", [(0, 0, 3)]),
    FS_PIX_BGRA: ("bgra", [(0, 0, 4)]),
    FS_PIX_RGBA: ("rgba", [(0, 0, 4)]),
    FS_PIX_P010LE: ("p010le", [(0, 0, 2), (1, 1, 4)]),
    FS_PIX_YUV422P10LE: ("yuv422p10le", [(0, 0, 2), (1, 0, 2), (1, 0, 2)]),
    FS_PIX_YUV444P10LE: ("yuv444p10le", [(0, 0, 2), (0, 0, 2), (0, 0, 2)]),
    FS_PIX_GRAY16LE: ("gray16le", [(0, 0, 2)]),
    FS_PIX_BGR24: ("bgr24", [(0, 0, 3)]),
    FS_PIX_GBRP: ("gbrp", [(0, 0, 1), (0, 0, 1), (0, 0, 1)]),
}

STRIDE_ALIGNMENT = 64           # the canonical layout's stride and offset alignment (others: see the header)
FRAME_HEADER_SIZE = 256         # planes start after the slot's fs_frame


def plane_geometry(pix_fmt: int, width: int, height: int):
    """[(row_bytes, rows, stride, offset, size)] for each plane in the canonical layout.
    (A frame's own layout is in its header: a producer decoding in place uses its decoder's.)

    row_bytes: bytes of pixels per row (no padding); stride: row_bytes rounded up to 64;
    offset: from the slot's start, 256 for plane 0, then each plane's stride*rows rounded
    up to 64; size: stride*rows. Raises KeyError for a format code with no table entry.
    """
    out = []
    offset = FRAME_HEADER_SIZE
    for ws, hs, bpp in PIXEL_FORMATS[pix_fmt][1]:
        row_bytes = ((width + (1 << ws) - 1) >> ws) * bpp
        rows = (height + (1 << hs) - 1) >> hs
        stride = _round_up(row_bytes, STRIDE_ALIGNMENT)
        out.append((row_bytes, rows, stride, offset, stride * rows))
        offset += _round_up(stride * rows, STRIDE_ALIGNMENT)
    return out


def _round_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


# --------------------------------------------------------------------------------------
# Layout: ctypes mirrors of the header's structs (native x86-64/aarch64 little-endian
# alignment, which is the C layout). Offsets below are copied from the header's comments.
# --------------------------------------------------------------------------------------

u8, u16, u32, u64 = ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64
i32, i64, char = ctypes.c_int32, ctypes.c_int64, ctypes.c_char


class FsControl(ctypes.LittleEndianStructure):
    """<dir>/<name>.ctl at offset 0 (512 bytes)."""
    _fields_ = [
        ("magic", u32),                 # 0
        ("version", u32),               # 4
        ("header_size", u32),           # 8
        ("slot_count", u32),            # 12
        ("max_consumers", u32),         # 16
        ("slot_ctl_size", u32),         # 20
        ("consumer_size", u32),         # 24
        ("slot_ctl_offset", u32),       # 28
        ("consumer_offset", u32),       # 32
        ("producer_pid", i32),          # 36
        ("producer_start_time", u64),   # 40
        ("created_ns", u64),            # 48
        ("epoch", u64),                 # 56  atomic
        ("slot_stride", u64),           # 64
        ("latest", u64),                # 72  atomic
        ("published", u64),             # 80
        ("dropped", u64),               # 88
        ("blocked_ns", u64),            # 96
        ("lossless_mask", u64),         # 104
        ("wake", u32),                  # 112 futex word
        ("state", u32),                 # 116 atomic
        ("end_seq", u64),               # 120
        ("attach_seq", u32),            # 128 futex word
        ("producer_waiting", u32),      # 132
        ("min_free", u64),              # 136
        ("reclaimed", u64),             # 144
        ("live_max_held", u32),         # 152
        ("flags", u32),                 # 156
        ("name", char * 64),            # 160
        ("pool_size", u64),             # 224
        ("last_publish_ns", u64),       # 232
        ("rate_milli", u64),            # 240
        ("demoted", u64),               # 248 lossless consumers demoted to live by the stall timeout
        ("reserved", u8 * 256),         # 256 .. 512
    ]


class FsSlotCtl(ctypes.LittleEndianStructure):
    """fs_slot_ctl[slot_count] at slot_ctl_offset in the control segment (64 bytes each)."""
    _fields_ = [
        ("holders", u64),               # 0  atomic: bit i consumer i, bit 63 writer
        ("seq", u64),                   # 8
        ("epoch", u64),                 # 16
        ("publish_ns", u64),            # 24
        ("producer_hold", u64),         # 32 atomic: 1 while the producer references the frame
        ("reserved", u64 * 3),          # 40 .. 64
    ]


class FsConsumer(ctypes.LittleEndianStructure):
    """fs_consumer[63] at consumer_offset in the control segment (256 bytes each)."""
    _fields_ = [
        ("pid", i32),                   # 0  claim word (atomic)
        ("state", u32),                 # 4  atomic
        ("start_time", u64),            # 8
        ("mode", u32),                  # 16
        ("flags", u32),                 # 20
        ("first_seq", u64),             # 24 atomic
        ("attached_ns", u64),           # 32
        ("delivered", u64),             # 40
        ("missed", u64),                # 48
        ("last_seq", u64),              # 56
        ("held", u64),                  # 64
        ("hold_since_ns", u64),         # 72
        ("latency_hist", u64 * FS_LATENCY_BUCKETS),  # 80
        ("name", char * 32),            # 208
        ("latency_sum_ns", u64),        # 240
        ("stale", u64),                 # 248
    ]


class FsFrame(ctypes.LittleEndianStructure):
    """The header at the start of every pool slot (256 bytes); planes follow."""
    _fields_ = [
        ("magic", u32),                 # 0
        ("version", u32),               # 4
        ("seq", u64),                   # 8
        ("epoch", u64),                 # 16
        ("width", u32),                 # 24
        ("height", u32),                # 28
        ("pix_fmt", u32),               # 32
        ("plane_count", u32),           # 36
        ("plane_offset", u32 * FS_MAX_PLANES),  # 40
        ("plane_stride", u32 * FS_MAX_PLANES),  # 56
        ("plane_size", u32 * FS_MAX_PLANES),    # 72
        ("color_matrix", u32),          # 88
        ("color_range", u32),           # 92
        ("color_primaries", u32),       # 96
        ("color_transfer", u32),        # 100
        ("sar_num", i32),               # 104
        ("sar_den", i32),               # 108
        ("pts", i64),                   # 112
        ("time_base_num", i32),         # 120
        ("time_base_den", i32),         # 124
        ("duration", i64),              # 128
        ("capture_ns", u64),            # 136
        ("flags", u32),                 # 144
        ("payload_size", u32),          # 148
        ("pix_fmt_name", char * 32),    # 152
        ("reserved", u8 * 72),          # 184 .. 256
    ]


class FsAnnounce(ctypes.LittleEndianStructure):
    """One ZeroMQ message: these 64 bytes, then name_len bytes of stream name."""
    _fields_ = [
        ("magic", u32),                 # 0
        ("version", u16),               # 4
        ("kind", u16),                  # 6
        ("seq", u64),                   # 8
        ("slot", u32),                  # 16
        ("flags", u32),                 # 20
        ("epoch", u64),                 # 24
        ("capture_ns", u64),            # 32
        ("pts", i64),                   # 40
        ("publish_ns", u64),            # 48
        ("name_len", u16),              # 56
        ("reserved0", u16),             # 58
        ("reserved1", u32),             # 60
    ]


STRUCTS = {"fs_control": FsControl, "fs_slot_ctl": FsSlotCtl, "fs_consumer": FsConsumer,
           "fs_frame": FsFrame, "fs_announce": FsAnnounce}

# struct-module formats of the two structs that are read as a whole.
ANNOUNCE_FORMAT = "<IHHQIIQQqQHHI"
FRAME_FORMAT = "<IIQQIIII4I4I4IIIIIiiqiiqQII32s72s"


def _off(cls, field: str) -> int:
    return getattr(cls, field).offset


# Offsets the client uses for atomic accesses (absolute within their struct).
OFF_CONTROL_EPOCH = _off(FsControl, "epoch")
OFF_CONTROL_LATEST = _off(FsControl, "latest")
OFF_CONTROL_WAKE = _off(FsControl, "wake")
OFF_CONTROL_STATE = _off(FsControl, "state")
OFF_CONTROL_END_SEQ = _off(FsControl, "end_seq")
OFF_CONTROL_ATTACH_SEQ = _off(FsControl, "attach_seq")
OFF_SLOT_EPOCH = _off(FsSlotCtl, "epoch")
OFF_CONSUMER_STATE = _off(FsConsumer, "state")
OFF_CONSUMER_FIRST_SEQ = _off(FsConsumer, "first_seq")


# --------------------------------------------------------------------------------------
# check_layout: this module against CFrameServer.h
# --------------------------------------------------------------------------------------

_C_TYPE_SIZES = {"uint8_t": 1, "int8_t": 1, "char": 1, "uint16_t": 2, "int16_t": 2,
                 "uint32_t": 4, "int32_t": 4, "uint64_t": 8, "int64_t": 8}


def _parse_c_int(text: str, defines: dict) -> int | None:
    """Value of a #define body or array bound: 123u, 0x54435346u, (1ull << 63), FS_X, INT64_MIN."""
    t = text.strip()
    if t in defines:
        return defines[t]
    if t == "INT64_MIN":
        return -(1 << 63)
    m = re.fullmatch(r"\(\s*(\w+)\s*<<\s*(\w+)\s*\)", t)
    if m:
        a, b = _parse_c_int(m.group(1), defines), _parse_c_int(m.group(2), defines)
        return None if a is None or b is None else a << b
    m = re.fullmatch(r"(0[xX][0-9a-fA-F]+|\d+)[uUlL]*", t)
    return int(m.group(1), 0) if m else None


def parse_header(header_path: str = DEFAULT_HEADER) -> dict:
    """Parses what check_layout needs from CFrameServer.h.

    Returns {"defines": {name: int}, "structs": {struct: [(field, ctype, count, offset
    from its comment)]}, "sizes": {struct: size from _Static_assert}, "offsets":
    [(struct, field, value) from _Static_assert(offsetof(...) == value)]}.
    """
    with open(header_path, encoding="utf-8") as f:
        text = f.read()
    defines: dict[str, int] = {}
    for m in re.finditer(r"^#define\s+(FS_\w+)\s+([^/\n]+?)\s*(?:/\*.*)?$", text, re.M):
        v = _parse_c_int(m.group(2), defines)
        if v is not None:
            defines[m.group(1)] = v
    structs: dict[str, list] = {}
    field_re = re.compile(r"^\s*(\w+)\s+(\w+)(?:\[(\w+)\])?\s*;\s*/\*\s*(\d+)\b")
    for m in re.finditer(r"typedef struct (\w+) \{(.*?)\} \1;", text, re.S):
        fields = []
        for line in m.group(2).splitlines():
            fm = field_re.match(line)
            if fm:
                count = 1 if fm.group(3) is None else _parse_c_int(fm.group(3), defines)
                fields.append((fm.group(2), fm.group(1), count, int(fm.group(4))))
            elif line.strip() and not line.strip().startswith(("/*", "*")):
                raise AssertionError(f"{header_path}: cannot parse field line in {m.group(1)}: {line.strip()!r}")
        structs[m.group(1)] = fields
    sizes = {m.group(1): int(m.group(2)) for m in
             re.finditer(r"_Static_assert\(sizeof\((\w+)\)\s*==\s*(\d+)", text)}
    offsets = []
    for m in re.finditer(r"_Static_assert\(offsetof\((\w+),\s*(\w+)\)\s*==\s*(\w+)", text):
        offsets.append((m.group(1), m.group(2), _parse_c_int(m.group(3), defines)))
    return {"defines": defines, "structs": structs, "sizes": sizes, "offsets": offsets}


def check_layout(header_path: str | None = None) -> int:
    """Asserts that this module's layout and constants agree with CFrameServer.h.

    Checks, for each of the five structs: the field list, every field's offset (the
    `/* NNN name */` comments, recomputed from the declared types as C lays them out, and
    the ctypes mirror above), every size (_Static_assert(sizeof)), every
    _Static_assert(offsetof), the FS_OFF_* macros, and every FS_* constant this module
    defines. Raises AssertionError listing every disagreement; returns the number of checks.
    """
    path = header_path or DEFAULT_HEADER
    h = parse_header(path)
    problems: list[str] = []
    checks = 0

    def expect(cond: bool, what: str):
        nonlocal checks
        checks += 1
        if not cond:
            problems.append(what)

    for name, value in HEADER_CONSTANTS.items():
        expect(h["defines"].get(name) == value,
               f"{name}: header says {h['defines'].get(name)!r}, client says {value!r}")

    for sname, cls in STRUCTS.items():
        decl = h["structs"].get(sname)
        expect(decl is not None, f"struct {sname} not found in the header")
        if decl is None:
            continue
        py_fields = [(f[0], getattr(cls, f[0]).offset, getattr(cls, f[0]).size) for f in cls._fields_]
        expect([d[0] for d in decl] == [p[0] for p in py_fields],
               f"{sname}: header fields {[d[0] for d in decl]} != client fields {[p[0] for p in py_fields]}")
        computed = align = 0
        for (fname, ctype, count, comment_off), (pname, poff, psize) in zip(decl, py_fields):
            tsize = _C_TYPE_SIZES.get(ctype)
            expect(tsize is not None, f"{sname}.{fname}: unknown C type {ctype}")
            if tsize is None:
                continue
            computed = _round_up(computed, tsize)      # natural alignment, as C lays it out
            align = max(align, tsize)
            expect(comment_off == computed,
                   f"{sname}.{fname}: header comment says offset {comment_off}, its declaration puts it at {computed}")
            expect(poff == comment_off, f"{sname}.{fname}: header offset {comment_off}, client offset {poff}")
            expect(psize == tsize * count, f"{sname}.{fname}: header size {tsize * count}, client size {psize}")
            computed += tsize * count
        size = h["sizes"].get(sname)
        expect(size is not None, f"no _Static_assert(sizeof({sname})) in the header")
        expect(size == ctypes.sizeof(cls), f"sizeof({sname}): header {size}, client {ctypes.sizeof(cls)}")
        expect(_round_up(computed, align or 1) == size,
               f"sizeof({sname}): declarations add up to {computed}, asserted {size}")

    for sname, field, value in h["offsets"]:
        cls = STRUCTS.get(sname)
        expect(cls is not None and hasattr(cls, field) and getattr(cls, field).offset == value,
               f"_Static_assert(offsetof({sname}, {field}) == {value}) disagrees with the client")

    prefixes = {"CONTROL": FsControl, "SLOT": FsSlotCtl, "CONSUMER": FsConsumer, "FRAME": FsFrame,
                "ANNOUNCE": FsAnnounce}
    for name, value in h["defines"].items():
        if not name.startswith("FS_OFF_"):
            continue
        struct_key, _, field = name[len("FS_OFF_"):].partition("_")
        cls = prefixes.get(struct_key)
        field = field.lower()
        expect(cls is not None and hasattr(cls, field) and getattr(cls, field).offset == value,
               f"{name} = {value} disagrees with the client's offset of {field}")

    expect(struct.calcsize(ANNOUNCE_FORMAT) == ctypes.sizeof(FsAnnounce), "ANNOUNCE_FORMAT size")
    expect(struct.calcsize(FRAME_FORMAT) == ctypes.sizeof(FsFrame), "FRAME_FORMAT size")

    if problems:
        raise AssertionError(f"client layout disagrees with {path}:\n  " + "\n  ".join(problems))
    return checks


# --------------------------------------------------------------------------------------
# Announcements
# --------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Announcement:
    kind: int                # FS_ANNOUNCE_FRAME, _END or _EPOCH
    stream: str
    seq: int
    slot: int = 0
    flags: int = 0
    epoch: int = 0
    capture_ns: int = 0
    pts: int | None = None   # None: unknown (INT64_MIN on the wire)
    publish_ns: int = 0


class AnnouncementError(ValueError):
    """A message that is not a valid v1 announcement. `code` is one of
    short, bad-magic, version, kind, length (protocol/vectors/README.md)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


def decode_announcement(data: bytes) -> Announcement:
    """Parses one ZeroMQ message, checking length, magic, version, kind and name length
    in that order (as Announcement.swift does). Raises AnnouncementError (a ValueError)."""
    data = bytes(data)
    if len(data) < 64:
        raise AnnouncementError("short", f"announcement of {len(data)} bytes is shorter than the 64-byte header")
    (magic, version, kind, seq, slot, flags, epoch, capture_ns, pts, publish_ns, name_len,
     _r0, _r1) = struct.unpack_from(ANNOUNCE_FORMAT, data)
    if magic != FS_MAGIC_ANNOUNCE:
        raise AnnouncementError("bad-magic", f"announcement is not a framesrv announcement "
                                             f"(magic 0x{magic:08x}, expected 0x{FS_MAGIC_ANNOUNCE:08x} 'FSAN')")
    if version != FS_PROTOCOL_VERSION:
        raise AnnouncementError("version", f"announcement speaks framesrv protocol version {version}, but this "
                                           f"client speaks version {FS_PROTOCOL_VERSION}; run the same framesrv "
                                           f"version on both sides")
    if kind not in (FS_ANNOUNCE_FRAME, FS_ANNOUNCE_END, FS_ANNOUNCE_EPOCH):
        raise AnnouncementError("kind", f"announcement of unknown kind {kind}")
    if len(data) != 64 + name_len:
        raise AnnouncementError("length", f"announcement length {len(data)} does not match its name length "
                                          f"{name_len} (expected {64 + name_len} bytes)")
    return Announcement(kind=kind, stream=data[64:].decode("utf-8", errors="replace"), seq=seq, slot=slot,
                        flags=flags, epoch=epoch, capture_ns=capture_ns,
                        pts=None if pts == FS_PTS_NONE else pts, publish_ns=publish_ns)


def encode_announcement(a: Announcement) -> bytes:
    """The wire form of `a`: 64-byte little-endian header (reserved fields 0) + name bytes."""
    name = a.stream.encode("utf-8")
    return struct.pack(ANNOUNCE_FORMAT, FS_MAGIC_ANNOUNCE, FS_PROTOCOL_VERSION, a.kind, a.seq, a.slot, a.flags,
                       a.epoch, a.capture_ns, FS_PTS_NONE if a.pts is None else a.pts, a.publish_ns,
                       len(name), 0, 0) + name


# --------------------------------------------------------------------------------------
# Atomics: _fsatomic.c, compiled on first use
# --------------------------------------------------------------------------------------

_LIB = None


def _cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "framesrv")


def atomics(header_path: str | None = None):
    """The ctypes handle of _fsatomic.so, building it if needed (keyed by a hash of the
    C file, the header and the compiler, so editing either rebuilds it)."""
    global _LIB
    if _LIB is not None:
        return _LIB
    header = header_path or DEFAULT_HEADER
    src = os.path.join(HERE, "_fsatomic.c")
    cc = os.environ.get("FRAMESRV_CC", "cc")
    digest = hashlib.sha256()
    for p in (src, header):
        with open(p, "rb") as f:
            digest.update(f.read())
    digest.update(cc.encode())
    lib_name = f"_fsatomic-{digest.hexdigest()[:16]}.so"
    path = None
    for d in (_cache_dir(), os.path.join(HERE, "__pycache__")):
        candidate = os.path.join(d, lib_name)
        if os.path.exists(candidate):
            path = candidate
            break
        try:
            os.makedirs(d, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(suffix=".so", dir=d)
            os.close(fd)
        except OSError:
            continue
        cmd = [cc, "-shared", "-fPIC", "-O2", "-std=c11", "-Wall", "-Wextra",
               "-I", os.path.dirname(header), src, "-o", tmp]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            os.unlink(tmp)
            raise RuntimeError(f"cannot build the atomics helper ({' '.join(cmd)}):\n{r.stderr}")
        os.replace(tmp, candidate)          # atomic: a concurrent first use sees a whole file
        path = candidate
        break
    if path is None:
        raise RuntimeError(f"no writable directory to build the atomics helper in ({_cache_dir()})")
    lib = ctypes.CDLL(path)
    vp = ctypes.c_void_p
    sig = {
        "fsa_load_u64": (u64, [vp]), "fsa_load_u32": (u32, [vp]), "fsa_load_i32": (i32, [vp]),
        "fsa_store_u64": (None, [vp, u64]), "fsa_store_u32": (None, [vp, u32]),
        "fsa_count": (None, [vp, u64]), "fsa_peek_u64": (u64, [vp]),
        "fsa_consumer_claim": (ctypes.c_int, [vp, i32]),
        "fsa_slot_try_acquire": (ctypes.c_int, [vp, u64, u64]),
        "fsa_slot_held_by": (ctypes.c_int, [vp, u64, u64]),
        "fsa_slot_release": (ctypes.c_int, [vp, vp, u64]),
        "fsa_notify_producer": (ctypes.c_int, [vp]),
        "fsa_bump": (None, [vp]), "fsa_futex_wake": (ctypes.c_int, [vp]),
        "fsa_wake_producer": (None, [vp]), "fsa_layout": (vp, [ctypes.POINTER(u32)]),
    }
    for name, (res, args) in sig.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    _LIB = lib
    return lib


class _FsaField(ctypes.Structure):
    _fields_ = [("strct", ctypes.c_char_p), ("field", ctypes.c_char_p), ("offset", u32), ("size", u32)]


def compiled_layout() -> dict:
    """{(struct, field): (offset, size)} and {(struct, ""): (0, sizeof)} as the C compiler
    lays out CFrameServer.h (from _fsatomic.c's table)."""
    lib = atomics()
    n = u32()
    p = ctypes.cast(lib.fsa_layout(ctypes.byref(n)), ctypes.POINTER(_FsaField))
    return {(p[i].strct.decode(), p[i].field.decode()): (p[i].offset, p[i].size) for i in range(n.value)}


# --------------------------------------------------------------------------------------
# Runtime directory and processes
# --------------------------------------------------------------------------------------

def runtime_dir_path() -> str:
    """FRAMESRV_DIR, else $XDG_RUNTIME_DIR/framesrv, else /dev/shm/framesrv-<uid>
    (/tmp/framesrv-<uid> where there is no /dev/shm)."""
    d = os.environ.get("FRAMESRV_DIR")
    if d:
        return d
    x = os.environ.get("XDG_RUNTIME_DIR")
    if x:
        return os.path.join(x, "framesrv")
    if os.path.isdir("/dev/shm"):
        return f"/dev/shm/framesrv-{os.getuid()}"
    return f"/tmp/framesrv-{os.getuid()}"


def open_runtime_dir(path: str | None = None) -> str:
    """Creates the directory (0700) if missing; refuses one owned by another user and
    tightens one with group/other access to 0700, as the Swift side does."""
    path = path or runtime_dir_path()
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise RuntimeError(f"runtime directory {path} is not a directory")
    if st.st_uid != os.getuid():
        raise PermissionError(f"refusing runtime directory {path}: it belongs to uid {st.st_uid}, "
                              f"not to you (uid {os.getuid()}); set FRAMESRV_DIR to a private directory")
    if st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


_NAME_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,47}")


def validate_stream_name(name: str) -> None:
    if not _NAME_RE.fullmatch(name):
        raise ValueError(f"invalid stream name {name!r}: use 1 to 48 letters, digits, '.', '_' or '-', "
                         f"not starting with '.'")


def process_start_time(pid: int) -> int:
    """Field 22 (starttime, clock ticks since boot) of /proc/<pid>/stat; 0 if no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return 0
    # comm (field 2) is parenthesised and may contain spaces or ')': split after the last ')'.
    rest = data[data.rindex(b")") + 1:].split()
    return int(rest[22 - 3])


def open_exit_descriptor(pid: int, start_time: int) -> int | None:
    """A pidfd that polls readable when process (pid, start_time) exits; None if it is
    not alive: gone, the pid now names another process, or it exited and is a zombie
    not yet reaped (PROTOCOL.md 15.1). The start time is read after the pidfd is open:
    the pidfd pins the process, so a match proves it is the right one."""
    if pid <= 0:
        return None
    try:
        fd = os.pidfd_open(pid)
    except (ProcessLookupError, OSError):
        return None
    if process_start_time(pid) != start_time or _readable_now(fd):
        os.close(fd)
        return None
    return fd


def _readable_now(fd: int) -> bool:
    """Whether fd polls readable without waiting (a pidfd: the process has exited)."""
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(0))


# --------------------------------------------------------------------------------------
# Consumer
# --------------------------------------------------------------------------------------

class FrameServerError(RuntimeError):
    pass


class ProducerGone(FrameServerError):
    """The producer exited without ending the stream (after every frame still owed
    was delivered)."""


class _Pool:
    def __init__(self, path: str):
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            size = os.fstat(fd).st_size
            if size <= 0:
                raise FrameServerError(f"shared-memory segment {path} is unusable: it is empty")
            # SECURITY: PROT_READ; a stray write faults instead of corrupting other readers.
            self.mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        finally:
            os.close(fd)
        self.path = path
        self.held = 0

    def close(self):
        try:
            self.mm.close()
        except BufferError:
            pass                 # the application still has a view; the GC unmaps it later


class Frame:
    """A frame held by a consumer. Read it in place, then release() it (or use `with`).

    Attributes: seq, slot, epoch, header (a copy of the slot's fs_frame), latency_ns.
    plane(i) is a read-only memoryview of plane i (stride x rows bytes); it becomes
    invalid at release().
    """

    def __init__(self, consumer: "Consumer", slot: int, seq: int, epoch: int, header: FsFrame,
                 views: list, latency_ns: int):
        self._consumer = consumer
        self.slot, self.seq, self.epoch, self.header = slot, seq, epoch, header
        self._views = views
        self.latency_ns = latency_ns
        self.released = False

    # Header fields, decoded.
    width = property(lambda self: self.header.width)
    height = property(lambda self: self.header.height)
    pix_fmt = property(lambda self: self.header.pix_fmt)
    pix_fmt_name = property(lambda self: self.header.pix_fmt_name.decode("utf-8", "replace"))
    plane_count = property(lambda self: min(self.header.plane_count, FS_MAX_PLANES))
    flags = property(lambda self: self.header.flags)
    capture_ns = property(lambda self: self.header.capture_ns)
    pts = property(lambda self: None if self.header.pts == FS_PTS_NONE else self.header.pts)
    time_base = property(lambda self: (self.header.time_base_num, self.header.time_base_den))
    duration = property(lambda self: self.header.duration)
    sample_aspect_ratio = property(lambda self: (self.header.sar_num, self.header.sar_den))
    color = property(lambda self: {"matrix": self.header.color_matrix, "range": self.header.color_range,
                                   "primaries": self.header.color_primaries,
                                   "transfer": self.header.color_transfer})

    def stride(self, i: int) -> int:
        return self.header.plane_stride[i]

    def plane(self, i: int) -> memoryview:
        if self.released:
            raise ValueError(f"frame {self.seq} was released")
        return self._views[i]

    @property
    def planes(self) -> list:
        return [self.plane(i) for i in range(len(self._views))]

    def release(self):
        """Gives the slot back (idempotent). The plane views stop working."""
        if not self.released:
            self.released = True
            self._consumer._release(self)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __del__(self):
        try:
            self.release()
        except Exception:
            pass

    def __repr__(self):
        return (f"<Frame seq={self.seq} slot={self.slot} epoch={self.epoch} "
                f"{self.width}x{self.height} {self.pix_fmt_name}>")


_ENDED = object()


class Consumer:
    """The reading side of one stream, in lossless or live mode.

    lossless: every frame published after the producer admits this consumer, exactly
    once, in order; the producer waits for it when the pool is full.
    live: always the newest frame; never slows the producer; skipped frames are counted
    in `missed`.

    next() returns a Frame, or None once the stream has ended and everything owed was
    delivered. It raises ProducerGone if the producer exits without ending the stream.
    Iterating yields frames and releases each one when the next is requested.
    """

    #: Even with no doorbell, look at shared memory again after RECHECK_MS, doubling on
    #: every silent timeout up to RECHECK_MAX_MS and back to RECHECK_MS when a doorbell
    #: arrives. ZeroMQ may drop announcements even for a subscriber that keeps up (before
    #: the subscription reaches the producer, and at the high-water mark); shared memory
    #: is the truth, so a bounded sleep cannot hang (PROTOCOL.md section 11).
    RECHECK_MS = 100
    RECHECK_MAX_MS = 1000
    #: How often to look for the control segment while waiting for the stream.
    DISCOVERY_POLL_S = 0.05

    def __init__(self, stream: str, mode: str = "lossless", *, directory: str | None = None,
                 name: str | None = None, wait: float | None = None, rcvhwm: int = 1000):
        validate_stream_name(stream)
        if mode not in ("lossless", "live"):
            raise ValueError(f"mode must be 'lossless' or 'live', not {mode!r}")
        self.stream, self.mode = stream, mode
        self.directory = directory
        self.name = name or os.path.basename(sys.argv[0] or "python")[:31] or "python"
        self.wait = wait
        self.rcvhwm = rcvhwm
        self.delivered = 0
        self.missed = 0
        self.stale = 0
        self.index: int | None = None
        self.producer_pid: int | None = None
        self._attached = False
        self._detached = False
        self._iter_frame: Frame | None = None

    # --- attach -----------------------------------------------------------------------

    def attach(self):
        """Waits (up to `wait` seconds; None: forever) for the stream and attaches."""
        if self._attached:
            return self
        if self._detached:
            raise FrameServerError("this consumer was detached; create a new one")
        self._lib = atomics()
        self.directory = open_runtime_dir(self.directory)
        deadline = None if self.wait is None else time.monotonic() + max(0.0, self.wait)
        while not self._try_attach():
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"no stream named '{self.stream}' appeared in {self.directory} within "
                                   f"{self.wait} s; start a producer with --out {self.stream} "
                                   f"(or check FRAMESRV_DIR)")
            # Polling is enough here; inotify (IN_CREATE | IN_MOVED_TO on the directory)
            # would wake at the rename that publishes the control segment.
            time.sleep(self.DISCOVERY_POLL_S)
        return self

    def _path(self, suffix: str) -> str:
        return os.path.join(self.directory, self.stream + suffix)

    def _try_attach(self) -> bool:
        """One attempt; False when there is no stream yet or only a dead producer's files."""
        path = self._path(".ctl")
        try:
            fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            size = os.fstat(fd).st_size
            if size < ctypes.sizeof(FsControl):
                raise FrameServerError(f"shared-memory segment {path} is unusable: it is too small "
                                       f"({size} bytes); run 'framesrv clean' to remove leftovers")
            mm = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        finally:
            os.close(fd)
        # Validate a copy: a live ctypes view would pin the mapping open on the error paths.
        header = FsControl.from_buffer_copy(mm)
        try:
            self._validate_control(path, header, size)
            pidfd = open_exit_descriptor(header.producer_pid, header.producer_start_time)
        except BaseException:
            mm.close()
            raise
        if pidfd is None:                                    # a dead producer's leftover
            mm.close()
            return False
        ctl = FsControl.from_buffer(mm)                      # the live view from here on
        self._mm, self._ctl = mm, ctl
        self._base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        self._pidfd = pidfd
        self.producer_pid = ctl.producer_pid
        try:
            self._connect()
            self._claim()
        except BaseException:
            self._unmap()
            raise
        self._attached = True
        self._refresh_pools()           # frames owed to us stay readable if the producer exits
        return True

    @staticmethod
    def _validate_control(path: str, ctl: FsControl, size: int):
        if ctl.magic != FS_MAGIC_CONTROL:
            raise FrameServerError(f"control segment {path} is not a framesrv control segment "
                                   f"(magic 0x{ctl.magic:08x}); is something else using this path?")
        if ctl.version != FS_PROTOCOL_VERSION:
            raise FrameServerError(f"control segment {path} speaks framesrv protocol version {ctl.version}, "
                                   f"but this client speaks version {FS_PROTOCOL_VERSION}; run the same "
                                   f"framesrv version on both sides")
        n = ctl.slot_count
        need = ctypes.sizeof(FsControl) + n * ctypes.sizeof(FsSlotCtl) + FS_MAX_CONSUMERS * ctypes.sizeof(FsConsumer)
        if not (1 <= n <= FS_MAX_SLOTS and ctl.max_consumers == FS_MAX_CONSUMERS and size >= need
                and ctl.slot_ctl_offset + n * ctypes.sizeof(FsSlotCtl) <= size
                and ctl.consumer_offset + FS_MAX_CONSUMERS * ctypes.sizeof(FsConsumer) <= size):
            raise FrameServerError(f"shared-memory segment {path} is unusable: its header describes {n} slots "
                                   f"in {size} bytes; run 'framesrv clean' to remove leftovers")

    def _connect(self):
        import zmq                                           # only the Consumer needs pyzmq
        self._zmq = zmq
        self._sock = zmq.Context.instance().socket(zmq.SUB)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.setsockopt(zmq.RCVHWM, self.rcvhwm)
        self._sock.setsockopt(zmq.SUBSCRIBE, b"")
        self._sock.connect("ipc://" + self._path(".sock"))
        self._poller = zmq.Poller()
        self._poller.register(self._sock, zmq.POLLIN)
        self._poller.register(self._pidfd, zmq.POLLIN)

    def _slot_addr(self, i: int) -> int:
        return self._base + self._ctl.slot_ctl_offset + i * ctypes.sizeof(FsSlotCtl)

    def _claim(self):
        """Claims a consumer entry (CAS pid 0 -> our pid), fills it in, activates it and
        rings attach_seq so the producer's watcher admits us."""
        lib, pid = self._lib, os.getpid()
        for i in range(FS_MAX_CONSUMERS):
            addr = self._base + self._ctl.consumer_offset + i * ctypes.sizeof(FsConsumer)
            if lib.fsa_consumer_claim(addr, pid):            # SYNC: acq_rel CAS, pairs with fs_consumer_free
                break
        else:
            raise FrameServerError(f"stream '{self.stream}' already has {FS_MAX_CONSUMERS} consumers, "
                                   f"the most one stream supports; stop one first")
        self.index, self._bit, self._entry_addr = i, 1 << i, addr
        lib.fsa_store_u32(addr + OFF_CONSUMER_STATE, FS_CONSUMER_CLAIMED)
        e = FsConsumer.from_buffer(self._mm, addr - self._base)
        e.start_time = process_start_time(pid)
        e.mode = FS_MODE_LIVE if self.mode == "live" else FS_MODE_LOSSLESS
        e.flags = 0
        e.first_seq = 0
        e.attached_ns = time.monotonic_ns()
        e.delivered = e.missed = e.last_seq = e.held = e.hold_since_ns = e.latency_sum_ns = e.stale = 0
        for b in range(FS_LATENCY_BUCKETS):
            e.latency_hist[b] = 0
        e.name = self.name.encode("utf-8")[:31]
        self._entry = e
        # SYNC: release store; the producer's watcher reads the fields above after it sees ACTIVE.
        lib.fsa_store_u32(addr + OFF_CONSUMER_STATE, FS_CONSUMER_ACTIVE)
        lib.fsa_bump(self._base + OFF_CONTROL_ATTACH_SEQ)
        lib.fsa_futex_wake(self._base + OFF_CONTROL_ATTACH_SEQ)
        self._expected = 0                  # lossless: next sequence number owed
        self._last_delivered = 0
        self._hint = 0                      # lossless: slot to start the scan at
        # Frames handed out and not yet released. Weak, so a Frame the application drops
        # is released by its __del__ instead of pinning its slot forever.
        self._held = weakref.WeakSet()
        self._held_count = 0
        self._pools: dict[int, _Pool] = {}
        self._producer_exited = False
        self._live_max_held = max(1, self._ctl.live_max_held)
        self._recheck_ms = self.RECHECK_MS

    # --- receive ----------------------------------------------------------------------

    def _ended(self) -> bool:
        return self._lib.fsa_load_u32(self._base + OFF_CONTROL_STATE) == FS_STREAM_ENDED

    def _drain_doorbell(self):
        """Reads every pending announcement. They only say "look again", but each is
        validated so a version mismatch is reported rather than ignored."""
        zmq = self._zmq
        while True:
            try:
                msg = self._sock.recv(zmq.NOBLOCK)
            except zmq.Again:
                return
            decode_announcement(msg)

    def _refresh_pools(self):
        """Maps the current epoch's pool as soon as it exists (a producer that exits
        unlinks it, so mapping early keeps frames still owed to us readable) and unmaps
        old epochs nothing is held from."""
        epoch = self._lib.fsa_load_u64(self._base + OFF_CONTROL_EPOCH)
        if epoch and epoch not in self._pools:
            try:
                self._pools[epoch] = _Pool(self._path(f".pool.{epoch}"))
            except FileNotFoundError:
                pass
        for e in [e for e, p in self._pools.items() if e != epoch and p.held == 0]:
            self._pools.pop(e).close()

    def _try_lossless(self):
        """The frame with sequence number `expected`, reserved for us by the producer."""
        lib = self._lib
        if self._expected == 0:
            # SYNC: acquire, pairs with the producer's release store of first_seq, made
            # before it publishes any frame carrying our bit.
            first = lib.fsa_load_u64(self._entry_addr + OFF_CONSUMER_FIRST_SEQ)
            if first == 0:
                return _ENDED if self._ended() else None
            self._expected = first
        # SYNC: the acquire load of state (in _ended) orders the read of end_seq after it.
        if self._ended() and self._expected > lib.fsa_load_u64(self._base + OFF_CONTROL_END_SEQ):
            return _ENDED
        n = self._ctl.slot_count
        for k in range(n):
            i = (self._hint + k) % n
            # SYNC: fs_slot_held_by's acquire load of holders pairs with fs_slot_publish.
            if lib.fsa_slot_held_by(self._slot_addr(i), self._bit, self._expected):
                frame = self._deliver(i, self._expected)
                self._expected += 1
                self._hint = (i + 1) % n
                return frame
        return None

    def _try_live(self):
        """The newest published frame, if newer than the last one delivered."""
        if self._held_count >= self._live_max_held:
            raise FrameServerError(f"a live consumer may hold at most {self._live_max_held} frames at once; "
                                   f"release a frame before taking the next")
        lib = self._lib
        while True:
            latest = lib.fsa_load_u64(self._base + OFF_CONTROL_LATEST)
            seq, slot = latest >> 8, latest & 0xFF
            if latest == 0 or seq <= self._last_delivered:
                return None
            if slot >= self._ctl.slot_count:
                raise FrameServerError(f"control segment {self._path('.ctl')} is unusable: latest names slot "
                                       f"{slot} of {self._ctl.slot_count}")
            # SYNC: fs_slot_try_acquire's acq_rel fetch_or pairs with fs_slot_publish and
            # keeps the producer from reserving the slot while we hold it.
            if lib.fsa_slot_try_acquire(self._slot_addr(slot), self._bit, seq):
                if self._last_delivered:
                    skipped = seq - self._last_delivered - 1
                    self.missed += skipped
                    lib.fsa_count(self._entry_addr + FsConsumer.missed.offset, skipped)
                return self._deliver(slot, seq)
            # Stale: the slot was recycled between reading `latest` and acquiring it. Our
            # transient bit may have made the producer skip the slot: wake it if it waits
            # (fs_notify_producer, then a futex wake if asked).
            self.stale += 1
            lib.fsa_count(self._entry_addr + FsConsumer.stale.offset, 1)
            lib.fsa_wake_producer(self._base)
            if lib.fsa_load_u64(self._base + OFF_CONTROL_LATEST) == latest:
                # Still the newest frame: its slot is being rewritten. The next publish
                # rings the doorbell (retrying now would spin for a whole frame write).
                return None

    def _deliver(self, slot: int, seq: int) -> Frame:
        """Hands out a held slot as a Frame (mapping its epoch's pool if needed)."""
        lib = self._lib
        epoch = lib.fsa_load_u64(self._slot_addr(slot) + OFF_SLOT_EPOCH)
        try:
            pool = self._pools.get(epoch)
            if pool is None:
                pool = self._pools[epoch] = _Pool(self._path(f".pool.{epoch}"))
            # Each epoch's pool has its own slot size: derive it from the file, not fs_control.
            slot_bytes = len(pool.mm) // self._ctl.slot_count
            base = slot * slot_bytes
            header = FsFrame.from_buffer_copy(pool.mm, base)
            views = self._check_header(pool, header, seq, slot_bytes)
        except BaseException:
            self._release_slot(slot)
            raise
        mv = memoryview(pool.mm)
        views = [mv[base + off: base + off + size] for off, size in views]
        mv.release()
        now = time.monotonic_ns()
        latency = max(0, now - header.capture_ns)
        frame = Frame(self, slot, seq, epoch, header, views, latency)
        pool.held += 1
        self._held.add(frame)
        self._held_count += 1
        self.delivered += 1
        self._last_delivered = seq
        # Statistics for `framesrv ls/top` (relaxed counters and plain stores).
        ea = self._entry_addr
        us = latency // 1000
        bucket = 0 if us == 0 else min(FS_LATENCY_BUCKETS - 1, us.bit_length())
        lib.fsa_count(ea + FsConsumer.latency_hist.offset + 8 * bucket, 1)
        lib.fsa_count(ea + FsConsumer.latency_sum_ns.offset, latency)
        lib.fsa_count(ea + FsConsumer.delivered.offset, 1)
        lib.fsa_store_u64(ea + FsConsumer.last_seq.offset, seq)
        lib.fsa_store_u64(ea + FsConsumer.held.offset, self._held_count)
        if self._held_count == 1:
            lib.fsa_store_u64(ea + FsConsumer.hold_since_ns.offset, now)
        return frame

    def _check_header(self, pool: _Pool, h: FsFrame, seq: int, slot_bytes: int) -> list:
        what = f"frame header in {pool.path}"
        if h.magic != FS_MAGIC_FRAME:
            raise FrameServerError(f"{what} is not a framesrv frame header (magic 0x{h.magic:08x})")
        if h.version != FS_PROTOCOL_VERSION:
            raise FrameServerError(f"{what} speaks framesrv protocol version {h.version}, but this client speaks "
                                   f"version {FS_PROTOCOL_VERSION}; run the same framesrv version on both sides")
        if h.seq != seq:
            raise FrameServerError(f"{what} carries frame {h.seq} where the slot table says {seq}")
        if not 1 <= h.plane_count <= FS_MAX_PLANES:
            raise FrameServerError(f"{what} has {h.plane_count} planes")
        views = []
        for p in range(h.plane_count):
            off, size = h.plane_offset[p], h.plane_size[p]
            if off < FRAME_HEADER_SIZE or off + size > slot_bytes:
                raise FrameServerError(f"{what}: plane {p} ({off}+{size}) is outside the {slot_bytes}-byte slot")
            views.append((off, size))
        return views

    def _release_slot(self, slot: int):
        # SYNC: fs_slot_release: release-ordered clear of our bit (pairs with the
        # producer's reserve), seq_cst bump of `wake`, then a futex wake if it sleeps.
        if self._lib.fsa_slot_release(self._base, self._slot_addr(slot), self._bit):
            self._lib.fsa_futex_wake(self._base + OFF_CONTROL_WAKE)

    def _release(self, frame: Frame):
        for v in frame._views:
            try:
                v.release()
            except BufferError:
                pass            # the application exported it further; its problem now
        self._held.discard(frame)
        if not self._attached:
            return              # cannot happen: we leave only once nothing is held
        self._held_count -= 1
        self._release_slot(frame.slot)
        ea = self._entry_addr
        self._lib.fsa_store_u64(ea + FsConsumer.held.offset, self._held_count)
        self._lib.fsa_store_u64(ea + FsConsumer.hold_since_ns.offset,
                                time.monotonic_ns() if self._held_count else 0)
        pool = self._pools.get(frame.epoch)
        if pool is not None:
            pool.held -= 1
        if self._detached and self._held_count == 0:
            self._leave()       # detach() was deferred until the last frame came back

    def next(self, timeout: float | None = None) -> Frame | None:
        """The next frame, or None once the stream ended and everything owed was delivered.

        Blocks in zmq_poll on the doorbell and the producer's pidfd, with a timeout
        (RECHECK_MS after a doorbell, doubling up to RECHECK_MAX_MS while silent) after
        which it looks at shared memory again. Raises TimeoutError after `timeout`
        seconds without a frame, and ProducerGone if the producer exits without ending
        the stream.
        """
        self.attach()
        if self._detached:
            raise FrameServerError("this consumer was detached")
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._drain_doorbell()
            self._refresh_pools()
            r = self._try_lossless() if self.mode == "lossless" else self._try_live()
            if isinstance(r, Frame):
                return r
            if r is _ENDED:
                return None
            if self._ended() and (self.mode == "live" or self._producer_exited):
                return None
            if self._producer_exited:
                raise ProducerGone(f"the producer of stream '{self.stream}' (pid {self.producer_pid}) exited "
                                   f"without ending the stream")
            wait_ms = self._recheck_ms
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no frame from stream '{self.stream}' within {timeout} s")
                wait_ms = min(wait_ms, int(left * 1000) + 1)
            # Sleep until a doorbell, the producer's exit (its pidfd polls readable) or the
            # recheck timeout; whatever wakes us, shared memory is looked at again.
            events = dict(self._poller.poll(wait_ms))
            if self._pidfd in events:
                self._producer_exited = True
            elif events:
                self._recheck_ms = self.RECHECK_MS                      # a doorbell
            else:
                self._recheck_ms = min(2 * self._recheck_ms, self.RECHECK_MAX_MS)

    def __iter__(self):
        return self

    def __next__(self) -> Frame:
        if self._iter_frame is not None:
            self._iter_frame.release()
            self._iter_frame = None
        f = self.next()
        if f is None:
            raise StopIteration
        self._iter_frame = f
        return f

    # --- detach -----------------------------------------------------------------------

    def detach(self):
        """Stops receiving and leaves the stream (PROTOCOL.md 8.2).

        Frames still held stay valid until they are released (or garbage-collected): the
        producer's reclaim would let it overwrite them, so this consumer asks to be taken
        out (state CLOSING + attach_seq doorbell) and unmaps only once the last one is
        released; at once if it holds none."""
        if self._detached:
            return
        self._detached = True
        self._iter_frame = None             # the application may still hold it: not released here
        if self._attached and self._held_count == 0:
            self._leave()

    def _leave(self):
        if not self._producer_exited:
            # SYNC: release store; the producer's watcher (woken through attach_seq) clears
            # our bit from every slot, stops reserving frames for us and frees the entry.
            lib = self._lib
            lib.fsa_store_u32(self._entry_addr + OFF_CONSUMER_STATE, FS_CONSUMER_CLOSING)
            lib.fsa_bump(self._base + OFF_CONTROL_ATTACH_SEQ)
            lib.fsa_futex_wake(self._base + OFF_CONTROL_ATTACH_SEQ)
        self._attached = False
        self._unmap()

    close = detach

    def _unmap(self):
        for attr in ("_sock",):
            s = getattr(self, attr, None)
            if s is not None:
                s.close(0)
                setattr(self, attr, None)
        if getattr(self, "_pidfd", None) is not None:
            os.close(self._pidfd)
            self._pidfd = None
        for p in getattr(self, "_pools", {}).values():
            p.close()
        self._pools = {}
        self._ctl = self._entry = None       # drop the ctypes exports before closing the map
        if getattr(self, "_mm", None) is not None:
            try:
                self._mm.close()
            except BufferError:
                pass
            self._mm = None

    def __enter__(self):
        return self.attach()

    def __exit__(self, *exc):
        self.detach()

    def __del__(self):
        try:
            self.detach()
        except Exception:
            pass


# --------------------------------------------------------------------------------------
# Test pattern and command line
# --------------------------------------------------------------------------------------

_RAMP = bytes(range(256)) * 2


def verify_pattern(frame: Frame) -> bool:
    """Checks the pattern `framesrv produce --pattern` writes: for plane p, row y and byte
    x < row_bytes (the pixels of the row, padding excluded),
    byte == (x + 2*y + 3*seq + 61*p) & 0xFF."""
    try:
        geometry = plane_geometry(frame.pix_fmt, frame.width, frame.height)
    except KeyError:
        return False
    if frame.plane_count != len(geometry):
        return False
    for p, (row_bytes, rows, stride, _off, _size) in enumerate(geometry):
        plane = frame.plane(p)
        if frame.stride(p) < row_bytes or len(plane) < frame.stride(p) * (rows - 1) + row_bytes:
            return False
        s = frame.stride(p)
        ramp = _RAMP * (row_bytes // 256 + 1)
        for y in range(rows):
            c = (2 * y + 3 * frame.seq + 61 * p) & 0xFF
            if plane[y * s: y * s + row_bytes] != ramp[c: c + row_bytes]:
                return False
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="framesrv test consumer (protocol v1)")
    ap.add_argument("--in", dest="stream", required=True, help="stream name")
    ap.add_argument("--live", action="store_true", help="live mode (default: lossless)")
    ap.add_argument("--verify-pattern", action="store_true", help="check the `produce --pattern` bytes")
    ap.add_argument("--seq-log", metavar="FILE", help="write every delivered sequence number, one per line")
    ap.add_argument("--count", type=int, metavar="N", help="detach after N frames")
    ap.add_argument("--wait", type=float, metavar="SECONDS", help="give up if the stream does not appear")
    ap.add_argument("--name", default="python-client", help="consumer name shown by framesrv ls/top")
    ap.add_argument("--hold-ms", type=float, default=0, help="hold each frame this long (to slow down)")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per frame on stderr")
    args = ap.parse_args(argv)

    def on_term(signum, _frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_term)

    received = corrupt = 0
    first = last = 0
    log = open(args.seq_log, "w", encoding="utf-8") if args.seq_log else None
    consumer = Consumer(args.stream, "live" if args.live else "lossless", name=args.name, wait=args.wait)
    status = 0
    try:
        consumer.attach()
        while args.count is None or received < args.count:
            frame = consumer.next()
            if frame is None:
                break
            with frame:
                received += 1
                first = first or frame.seq
                last = frame.seq
                bad = args.verify_pattern and not verify_pattern(frame)
                corrupt += bad
                if log:
                    log.write(f"{frame.seq}\n")
                if args.verbose or bad:
                    print(f"python: frame {frame.seq} slot {frame.slot} {frame.width}x{frame.height} "
                          f"{frame.pix_fmt_name} latency {frame.latency_ns / 1e3:.0f} us"
                          f"{' CORRUPT' if bad else ''}", file=sys.stderr)
                if args.hold_ms:
                    time.sleep(args.hold_ms / 1000)
    except KeyboardInterrupt:
        pass
    except (FrameServerError, TimeoutError, OSError, ValueError) as e:
        print(f"python: error: {e}", file=sys.stderr)
        status = 2
    finally:
        consumer.detach()
        if log:
            log.close()
    if args.live and consumer.missed:
        print(f"python: missed {consumer.missed} frames, {consumer.stale} stale", file=sys.stderr)
    print(f"python: received {received} frames, first {first}, last {last}, corrupt {corrupt}")
    return status or (1 if corrupt else 0)


if __name__ == "__main__":
    sys.exit(main())
