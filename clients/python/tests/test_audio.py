"""Audio streams (PROTOCOL.md 4.6) read from Python: every frame's samples a numpy view of its
slot, equal to what ffmpeg decodes; a consumer of the other kind refused in one line."""
import shutil
import subprocess

from fractions import Fraction

import numpy as np
import pytest

import framesrv

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")


def _tone(tmp_path, name, encode):
    path = str(tmp_path / name)
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "sine=frequency=440:d=1", *encode, path], check=True)
    return path


def _decoded(path, fmt, channels):
    """What ffmpeg decodes, interleaved, in the decoder's own sample format (packed)."""
    out = subprocess.run(["ffmpeg", "-v", "error", "-i", path, "-f", fmt, "-"], check=True, capture_output=True).stdout
    return np.frombuffer(out, dtype={"f32le": "<f4", "s16le": "<i2", "s32le": "<i4"}[fmt]).reshape(-1, channels)


def _produce(procs, framesrv_bin, path, stream):
    return procs.start(framesrv_bin, "produce", "-i", path, "--out", stream, "--quiet")


@pytest.mark.parametrize("name,encode,fmt,planar", [
    ("stereo.m4a", ["-ac", "2", "-c:a", "aac"], "f32le", True),       # fltp: one row per channel
    ("mono.wav", ["-ac", "1", "-c:a", "pcm_s16le"], "s16le", False),  # s16, one column
    ("stereo.wav", ["-ac", "2", "-c:a", "pcm_s16le"], "s16le", False),  # s16 interleaved
])
def test_samples_are_ffmpegs(framesrv_bin, fsdir, procs, tmp_path, name, encode, fmt, planar):
    path = _tone(tmp_path, name, encode)
    producer = _produce(procs, framesrv_bin, path, "snd")
    got = []
    with framesrv.Consumer("snd", timeout=20, media="audio") as c:
        for frame in c:
            with frame:
                s = frame.samples
                assert frame.media == "audio" and frame.width == 0 and frame.sample_rate == 44100
                assert frame.nb_samples == (s.shape[1] if planar else s.shape[0])
                assert not s.flags.writeable
                got.append((s.T if planar else s).copy())
                assert frame.layout == ("stereo" if frame.channels == 2 else "mono")
                assert frame.time_base == Fraction(1, 44100) and frame.duration == frame.nb_samples
    assert producer.wait(timeout=30) == 0
    expected = _decoded(path, fmt, 2 if "stereo" in name else 1)
    assert np.array_equal(np.concatenate(got), expected)


def test_a_consumer_of_the_other_kind_is_refused(framesrv_bin, fsdir, procs, tmp_path):
    path = _tone(tmp_path, "tone.wav", ["-ac", "1", "-c:a", "pcm_s16le"])
    producer = _produce(procs, framesrv_bin, path, "tone")
    with pytest.raises(framesrv.MediaKindError, match="stream 'tone' carries audio"):
        framesrv.Consumer("tone", timeout=20)
    with framesrv.Consumer("tone", timeout=20, media="audio") as c:
        assert c._info["media"] == "audio"
        assert sum(1 for _ in c) > 0
    assert producer.wait(timeout=30) == 0
    with pytest.raises(framesrv.InvalidArgument):
        framesrv.Consumer("tone", media="sound")
