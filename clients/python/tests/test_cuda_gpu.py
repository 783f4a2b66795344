"""CUDA frames on a real GPU (make test-gpu; skipped elsewhere): a torch producer and a torch
consumer in two processes (tests/cuda_peer.py). The consumer's torch.from_dlpack(frame.planes[0])
views the frame with no copy (its data_ptr is framesrv_frame_device_plane's, inside the imported
allocation), its pixels downloaded (tensor.cpu(), and CuPy's from_dlpack and
__cuda_array_interface__ views) are the producer's pattern, and a slow kernel reading the tensor
while frame.release(stream) has already returned never sees the slot overwritten, although the
producer recycles its 2 slots as fast as it may. The control reads on another stream than the one
released on, and must see overwritten bytes: the check can fail."""
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

PEER = Path(__file__).with_name("cuda_peer.py")


def _gpu_missing():
    """Why these tests cannot run here, or None."""
    smi = shutil.which("nvidia-smi")
    if not smi or b"GPU" not in subprocess.run([smi, "-L"], capture_output=True).stdout:
        return "no CUDA device (nvidia-smi lists none): make test-gpu runs these on a GPU machine"
    try:
        import torch
    except ImportError:
        return "a CUDA device but no torch to consume its frames with (pip install torch)"
    return None if torch.cuda.is_available() else "torch sees no CUDA device"


pytestmark = pytest.mark.skipif(_gpu_missing() is not None, reason=str(_gpu_missing()))


@pytest.fixture
def shm_dir(monkeypatch):
    """A runtime directory on tmpfs (/dev/shm), where framesrv's own default is and where the C
    GPU suite runs: the fences' control segment is registered with the device (cuMemHostRegister),
    which a file on another filesystem (pytest's /tmp) may not allow."""
    d = tempfile.mkdtemp(prefix="framesrv-pygpu.", dir="/dev/shm")
    monkeypatch.setenv("FRAMESRV_DIR", d)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def run_pair(procs, name, frames, *consumer_args):
    env = {k: v for k, v in os.environ.items() if k != "FRAMESRV_LIBCUDA"}   # the real driver
    producer = procs.python(str(PEER), "produce", name, str(frames), env=env)
    consumer = procs.python(str(PEER), "consume", name, str(frames), *consumer_args, env=env)
    rc, out, err = procs.finish(consumer, timeout=120)
    if rc != 0:
        producer.kill()
        _, pout, perr = procs.finish(producer, timeout=10)
        raise AssertionError(f"consumer failed:\n{err}\nproducer (rc {producer.returncode}):\n{pout}{perr}")
    prc, pout, perr = procs.finish(producer, timeout=60)
    assert prc == 0, perr
    report = json.loads(out.strip().splitlines()[-1])
    print(name, report)
    return report


def test_torch_and_cupy_view_frames_without_a_copy_and_reads_finish_before_the_slot_is_reused(shm_dir, procs):
    frames = 300
    r = run_pair(procs, "gpu", frames)
    assert r["seqs_in_order"] and r["frames"] == frames and r["stats"]["missed"] == 0, r
    assert r["zero_copy"] == frames, r
    assert r["downloads"] == 3 and r["cupy"] in (True, None), r
    assert r["bad_bytes"] == 0, f"a kernel reading a released frame saw {r['bad_bytes']} overwritten bytes"


def test_control_a_read_on_an_unordered_stream_sees_the_slot_overwritten(shm_dir, procs):
    r = run_pair(procs, "gpu-control", 100, "--control")
    assert r["frames"] == 100, r
    assert r["bad_bytes"] > 0, "the control saw no overwritten byte: the check above could not fail"
