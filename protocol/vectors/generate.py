#!/usr/bin/env python3
"""Regenerates announcements.json: test vectors for the framesrv announcement (protocol v5).

Run from anywhere:  python3 protocol/vectors/generate.py
It rewrites announcements.json next to this file. Standard library only, and on purpose
independent of the clients (so the vectors do not just echo a client's encoder).

The message is `fs_announce` from Sources/CFrameServer/include/CFrameServer.h, packed
little-endian with no padding, followed by name_len bytes of stream name:

    offset size field        struct code
       0    4  magic        I   "FSAN" = 0x4E415346
       4    2  version      H   5
       6    2  kind         H   1 frame, 2 end, 3 epoch
       8    8  seq          Q
      16    4  slot         I
      20    4  flags        I   1 key, 2 end of stream, 4 discontinuity
      24    8  epoch        Q
      32    8  capture_ns   Q
      40    8  pts          q   INT64_MIN (0x8000000000000000) = none
      48    8  publish_ns   Q
      56    2  name_len     H   1..48 (a stream name is 1 to 48 bytes)
      58    2  reserved0    H   0
      60    4  reserved1    I   0
      64       name bytes (UTF-8, not NUL-terminated)

The natural alignment of every field equals its offset here, so the C struct has no
padding and '<IHHQIIQQqQHHI' (64 bytes) is exactly its layout; the asserts below check
the offsets by hand.
"""

import json
import os
import struct

FORMAT = "<IHHQIIQQqQHHI"
MAGIC = 0x4E415346          # "FSAN" read as little-endian bytes F, S, A, N
VERSION = 5
# The bytes a stream name may have (PROTOCOL.md 3.1).
NAME_BYTES = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
PTS_NONE = -(1 << 63)       # INT64_MIN, bit pattern 0x8000000000000000

FRAME, END, EPOCH = 1, 2, 3
KEY, END_OF_STREAM, DISCONTINUITY = 1, 2, 4

# Hand check of the layout against the header's offset comments.
assert struct.calcsize(FORMAT) == 64
_offsets = [0, 4, 6, 8, 16, 20, 24, 32, 40, 48, 56, 58, 60]
_codes = FORMAT[1:]
for _i, _off in enumerate(_offsets):
    assert struct.calcsize("<" + _codes[:_i]) == _off, (_codes[_i], _off)
assert struct.pack("<I", MAGIC) == b"FSAN"


def encode(kind, stream, seq, slot=0, flags=0, epoch=0, capture_ns=0, pts=None, publish_ns=0,
           *, magic=MAGIC, version=VERSION, name_len=None):
    """Packs one message; the keyword-only arguments exist to build invalid ones."""
    name = stream.encode("utf-8", "surrogateescape")   # "\udcff" is the byte 0xff
    header = struct.pack(FORMAT, magic, version, kind, seq, slot, flags, epoch, capture_ns,
                         PTS_NONE if pts is None else pts, publish_ns,
                         len(name) if name_len is None else name_len, 0, 0)
    return header + name


def valid(name, kind, stream, seq, slot=0, flags=0, epoch=0, capture_ns=0, pts=None, publish_ns=0):
    msg = encode(kind, stream, seq, slot, flags, epoch, capture_ns, pts, publish_ns)
    return {"name": name, "kind": kind, "stream": stream, "seq": seq, "slot": slot, "flags": flags,
            "epoch": epoch, "capture_ns": capture_ns, "pts": pts, "publish_ns": publish_ns,
            "hex": msg.hex()}


def invalid(name, data, error):
    return {"name": name, "hex": data.hex(), "error": error}


def vectors():
    ok = encode(FRAME, "cam0", 42, 2, KEY, 1, 1_000_000_000, 0, 1_000_050_000)
    v = [
        # A frame from a 29.97 fps source in a 90 kHz time base (pts = 1234 * 3003).
        valid("frame", FRAME, "cam0", 1234, slot=3, flags=KEY, epoch=1,
              capture_ns=5_123_456_789_012, pts=3_705_702, publish_ns=5_123_457_001_234),
        # Unknown pts (encoded as INT64_MIN), keyframe after a discontinuity.
        valid("frame-pts-none-key-discontinuity", FRAME, "cam0", 1, slot=0, flags=KEY | DISCONTINUITY,
              epoch=1, capture_ns=77_000_000_000, pts=None, publish_ns=77_000_300_000),
        # pts may be negative (e.g. B-frame reordering before the first keyframe).
        valid("frame-negative-pts", FRAME, "screen-1", 7, slot=6, flags=0, epoch=1,
              capture_ns=900_000_000, pts=-3003, publish_ns=900_100_000),
        # End of stream: seq is the last frame's sequence number; slot, flags, capture 0, no pts.
        valid("end", END, "cam0", 1500, slot=0, flags=0, epoch=2, capture_ns=0, pts=None,
              publish_ns=6_000_000_000_000),
        # New pool epoch 2, beginning with frame 1501 (the next sequence number).
        valid("epoch", EPOCH, "cam0", 1501, slot=0, flags=0, epoch=2, capture_ns=0, pts=None,
              publish_ns=5_999_000_000_000),
        # The longest stream name, 48 bytes, using every allowed character class.
        valid("long-name", FRAME, "Stream_48.chars-long_abcdefghijklmnopqrstuvwxyz0", 3, slot=63,
              flags=KEY, epoch=1, capture_ns=123, pts=3, publish_ns=456),
        # Full-width values: seq at the 56-bit limit `latest` allows, slot 63, u64 max.
        # (Exceed 2^53: parse these JSON integers exactly.)
        valid("max-values", FRAME, "x", (1 << 56) - 1, slot=63, flags=KEY | END_OF_STREAM | DISCONTINUITY,
              epoch=(1 << 32) + 1, capture_ns=(1 << 64) - 1, pts=(1 << 63) - 1, publish_ns=(1 << 64) - 1),
        # Invalid messages, each with the error a decoder must report (PROTOCOL.md 5).
        invalid("bad-magic", b"XSAN" + ok[4:], "bad-magic"),
        invalid("bad-magic-big-endian", struct.pack(">I", MAGIC) + ok[4:], "bad-magic"),
        # A well-formed message of an earlier protocol version is a version error (the one fatal check).
        invalid("version-1", encode(FRAME, "cam0", 42, 2, KEY, 1, 1_000_000_000, 0, 1_000_050_000,
                                    version=1), "version"),
        invalid("version-2", encode(FRAME, "cam0", 42, 2, KEY, 1, 1_000_000_000, 0, 1_000_050_000,
                                    version=2), "version"),
        invalid("version-3", encode(FRAME, "cam0", 42, 2, KEY, 1, 1_000_000_000, 0, 1_000_050_000,
                                    version=3), "version"),
        invalid("version-4", encode(FRAME, "cam0", 42, 2, KEY, 1, 1_000_000_000, 0, 1_000_050_000,
                                    version=4), "version"),
        invalid("truncated-10-bytes", ok[:10], "short"),
        invalid("empty", b"", "short"),
        invalid("header-only-63-bytes", ok[:63], "short"),
        invalid("name-len-larger-than-message", encode(FRAME, "cam0", 42, 2, KEY, 1, 1_000_000_000, 0,
                                                       1_000_050_000, name_len=10), "length"),
        invalid("name-len-smaller-than-message", encode(FRAME, "cam0", 42, 2, KEY, 1, 1_000_000_000, 0,
                                                        1_000_050_000, name_len=3), "length"),
        invalid("header-without-name", ok[:64], "length"),
        invalid("unknown-kind-9", encode(9, "cam0", 42, 2, KEY, 1, 1_000_000_000, 0, 1_000_050_000), "kind"),
        invalid("unknown-kind-0", encode(0, "cam0", 42), "kind"),
        # name_len outside 1..48. The length agrees with name_len in both, so only the
        # name-len check (after kind, before length) rejects them.
        invalid("name-len-0", encode(FRAME, "", 42, 2, KEY, 1, 1_000_000_000, 0, 1_000_050_000), "name-len"),
        invalid("name-len-49", encode(FRAME, "Stream_49.chars-long_abcdefghijklmnopqrstuvwxyz01", 42, 2, KEY, 1,
                                      1_000_000_000, 0, 1_000_050_000), "name-len"),
        # A name byte outside [A-Za-z0-9._-] (a NUL, a space, invalid UTF-8): `name`, last.
        invalid("name-with-nul", encode(FRAME, "cam\x000", 42, 2, KEY, 1, 1_000_000_000, 0, 1_000_050_000), "name"),
        invalid("name-with-space", encode(FRAME, "cam 0", 42, 2, KEY, 1, 1_000_000_000, 0, 1_000_050_000), "name"),
        invalid("name-not-utf8", encode(FRAME, "cam\udcff", 42, 2, KEY, 1, 1_000_000_000, 0, 1_000_050_000), "name"),
    ]
    return v


def first_failure(data):
    """The checks of PROTOCOL.md 5, in order: the name of the first that fails, or None."""
    if len(data) < 64:
        return "short"
    magic, version, kind = struct.unpack_from("<IHH", data)
    name_len = struct.unpack_from("<H", data, 56)[0]
    checks = [("bad-magic", magic == MAGIC), ("version", version == VERSION),
              ("kind", kind in (FRAME, END, EPOCH)), ("name-len", 1 <= name_len <= 48),
              ("length", len(data) == 64 + name_len),
              ("name", all(chr(b) in NAME_BYTES for b in data[64:]))]
    return next((name for name, ok in checks if not ok), None)


def main():
    for v in vectors():
        got = first_failure(bytes.fromhex(v["hex"]))
        assert got == v.get("error"), (v["name"], got)
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "announcements.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(vectors(), f, indent=2)
        f.write("\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
