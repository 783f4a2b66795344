"""Audio streams produced from Python (PROTOCOL.md 4.6): `framesrv sink --framemd5` of a Python
producer's sine is ffmpeg's framemd5 of the same samples, timestamps included; every sample
format goes through a Python consumer bit for bit; bad arguments are one clear exception each."""
import shutil
import subprocess

from fractions import Fraction

import numpy as np
import pytest

import framesrv

DTYPES = {"u8": "u1", "s16": "<i2", "s32": "<i4", "flt": "<f4", "dbl": "<f8", "s64": "<i8"}
FORMATS = [f + p for f in DTYPES for p in ("", "p")]


def _packed(samples, planar):
    """A frame's samples as (nb_samples, channels), what raw PCM interleaves."""
    return samples.T if planar else samples


@pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="needs ffmpeg")
@pytest.mark.parametrize("fmt,raw", [("fltp", "f32le"), ("s16", "s16le")])
def test_sink_framemd5_is_ffmpegs(framesrv_bin, fsdir, procs, tmp_path, fmt, raw):
    md5 = tmp_path / "sink.framemd5"
    sink = procs.start(framesrv_bin, "sink", "--in", "sine", "--framemd5", md5, "--wait", "20")
    planar = fmt.endswith("p")
    dtype = np.float32 if fmt == "fltp" else np.int16
    scale = 0.5 if fmt == "fltp" else 8000
    written = []
    with framesrv.Producer("sine", media="audio", sample_format=fmt, sample_rate=48000, layout="stereo",
                           max_samples=1024) as p:
        assert p.wait_for_consumers(1, timeout=20)
        t = 0
        for k in range(20):
            with p.reserve(timeout=5) as frame:
                n = 500 if k == 19 else 1024
                s = frame.samples
                assert s.flags.writeable and s.shape == ((2, 1024) if planar else (1024, 2))
                assert frame.nb_samples == 1024 and frame.pts == t and frame.time_base == Fraction(1, 48000)
                tone = (scale * np.sin(2 * np.pi * 440 * np.arange(t, t + n) / 48000)).astype(dtype)
                _packed(s, planar)[:n] = tone[:, None]
                frame.nb_samples = n
                written.append(np.repeat(tone[:, None], 2, axis=1))
                t += n
    rc, out, err = procs.finish(sink)
    assert rc == 0, err
    pcm = tmp_path / "sine.raw"
    pcm.write_bytes(np.concatenate(written).astype(DTYPES[fmt.rstrip("p")]).tobytes())
    want = subprocess.run(["ffmpeg", "-v", "error", "-f", raw, "-ar", "48000", "-ac", "2", "-i", str(pcm), "-f", "framemd5",
                           "-"], check=True, capture_output=True, text=True).stdout
    got = md5.read_text()
    lines = [l for l in got.splitlines() if not l.startswith("#software")]
    assert lines == [l for l in want.splitlines() if not l.startswith("#software")]
    frames = [l.split(",") for l in lines if l and not l.startswith("#")]
    assert [int(f[1]) for f in frames] == [1024 * k for k in range(20)] and int(frames[-1][3]) == 500


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_sample_format_round_trips(fsdir, fmt):
    planar, dtype = fmt.endswith("p"), np.dtype(DTYPES[fmt.rstrip("p")])
    counts, channels, rng = [64, 17, 1, 64, 40], 3, np.random.default_rng(len(fmt) * 31 + FORMATS.index(fmt))
    bits = rng.integers(0, 256, size=(len(counts), 64 * channels * dtype.itemsize), dtype=np.uint8)
    sent = [b.view(dtype).reshape(64, channels) for b in bits]   # any bit pattern, NaNs too: compared as bytes
    with framesrv.Producer("snd", media="audio", sample_format=fmt, sample_rate=44100, channels=channels,
                           max_samples=64) as p, framesrv.Consumer("snd", timeout=5, media="audio") as c:
        assert p.wait_for_consumers(1, timeout=5)
        for samples, n in zip(sent, counts):
            with p.reserve(timeout=5) as frame:
                _packed(frame.samples, planar)[:] = samples
                frame.nb_samples = n
        p.end()
        pts = 0
        for samples, n, frame in zip(sent, counts, c):
            with frame:
                s = frame.samples
                assert s.dtype == dtype and s.shape == ((channels, n) if planar else (n, channels))
                assert frame.sample_format == fmt and frame.layout == "3 channels" and frame.sample_rate == 44100
                assert frame.pts == pts and frame.duration == n and frame.time_base == Fraction(1, 44100)
                assert _packed(s, planar).tobytes() == np.ascontiguousarray(samples[:n]).tobytes()
                pts += n
        assert pts == sum(counts)


def test_layout_names_the_channels(fsdir):
    with framesrv.Producer("snd", media="audio", sample_format="s16", sample_rate=48000, layout="5.1",
                           max_samples=16) as p, framesrv.Consumer("snd", timeout=5, media="audio") as c:
        assert p.channels == 6 and p.channel_mask == 0x3F and p.time_base == Fraction(1, 48000)
        assert p.wait_for_consumers(1, timeout=5)
        with p.reserve(timeout=5) as frame:
            frame.samples[:] = 7
        with c.next(timeout=5) as frame:
            assert frame.layout == "5.1" and frame.channels == 6 and frame.samples.shape == (16, 6)


AUDIO = dict(media="audio", sample_format="s16", sample_rate=48000, channels=2, max_samples=1024)


@pytest.mark.parametrize("change,message", [
    (dict(sample_format="s24"), "sample_format 's24': one of u8, s16"),
    (dict(sample_format=None), "sample_format None"),
    (dict(sample_rate=None), "needs sample_rate"),
    (dict(sample_rate=0), "sample_rate 0: must be 1..768000"),
    (dict(channels=0), "channels 0: must be 1..64"),
    (dict(channels=65), "channels 65: must be 1..64"),
    (dict(channels=None), "needs channels or a layout"),
    (dict(layout="quad"), "layout 'quad': one of"),
    (dict(layout="5.1"), "channel_mask 0x3f has 6 bits for 2 channels"),
    (dict(max_samples=0), "max_samples 0: must be 1..1048576"),
    (dict(max_samples=(1 << 20) + 1), "max_samples 1048577"),
    (dict(width=640), "no width or height"),
    (dict(media="sound"), "media must be 'video' or 'audio'"),
])
def test_bad_audio_arguments(fsdir, change, message):
    with pytest.raises(framesrv.InvalidArgument, match=message.replace("(", r"\(").replace(")", r"\)")) as e:
        framesrv.Producer("bad", **{**AUDIO, **change})
    assert "\n" not in str(e.value)


def test_bad_nb_samples_and_kinds(fsdir):
    with pytest.raises(framesrv.InvalidArgument, match="sample_format, sample_rate, channels and layout are for media='audio'"):
        framesrv.Producer("bad", 64, 64, "gray", sample_rate=48000)
    with framesrv.Producer("snd", **AUDIO) as p:
        frame = p.reserve(timeout=1)
        with pytest.raises(ValueError, match="nb_samples out of range"):
            frame.nb_samples = (1 << 20) + 1
        for n in (0, 1025):
            frame.nb_samples = n
            with pytest.raises(framesrv.InvalidArgument, match=f"nb_samples {n}: must be 1..1024"):
                p.publish(frame)
        with pytest.raises(framesrv.StateError, match="reserved already"):
            p.reserve(timeout=1)   # a refused publish leaves the frame reserved
        frame.nb_samples = 1024
        p.publish(frame)
        assert p.stats["published"] == 1
        with pytest.raises(framesrv.MediaKindError, match="carries audio"):
            p.change_format(64, 64, "gray")
