"""Shared fixtures: an isolated FRAMESRV_DIR per test, the Swift framesrv binary, and
processes that are killed when the test ends."""
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[3]

# Children inherit the signal mask: a test runner started with SIGINT/SIGTERM blocked
# (some spawners do) would make every "stop it with a signal" test hang.
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
FRAMESRV = os.environ.get("FRAMESRV_BIN", str(REPO / ".build" / "debug" / "framesrv"))


@pytest.fixture
def fsdir(tmp_path, monkeypatch):
    """This test's own runtime directory (FRAMESRV_DIR), for this process and children."""
    d = tmp_path / "rt"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("FRAMESRV_DIR", str(d))
    return d


@pytest.fixture
def framesrv_bin():
    if not os.access(FRAMESRV, os.X_OK):
        pytest.skip(f"no framesrv binary at {FRAMESRV} (set FRAMESRV_BIN)")
    return FRAMESRV


@pytest.fixture(scope="session")
def fakecuda_lib(tmp_path_factory):
    """clients/c/tests/fakecuda, the stand-in libcuda of the C tests, built once: CUDA streams
    without a GPU ("device memory" is a memfd mapped into the process, streams run at once)."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    if not cc:
        pytest.skip("no C compiler to build the stand-in CUDA driver (clients/c/tests/fakecuda)")
    out = tmp_path_factory.mktemp("fakecuda") / "libfakecuda.so"
    subprocess.run([cc, "-std=gnu11", "-O1", "-shared", "-fPIC", "-fvisibility=hidden",
                    "-I", str(REPO / "Sources" / "CFrameServer" / "include"),
                    str(REPO / "clients" / "c" / "tests" / "fakecuda" / "fakecuda.c"), "-o", str(out)], check=True)
    return out


@pytest.fixture
def fakecuda(fakecuda_lib, monkeypatch):
    """FRAMESRV_LIBCUDA names the stand-in driver for this test (libframesrv loads a driver once
    per process, at its first CUDA stream: tests on a real GPU run their streams in child
    processes). Returns the driver (ctypes): fakecuda_last_stream(1) / (0) is the stream of the
    last fence write / wait."""
    monkeypatch.setenv("FRAMESRV_LIBCUDA", str(fakecuda_lib))
    lib = ctypes.CDLL(str(fakecuda_lib))
    lib.fakecuda_last_stream.restype = ctypes.c_size_t
    lib.fakecuda_last_stream.argtypes = [ctypes.c_int]
    lib.fakecuda_mapped_bytes.restype = ctypes.c_size_t
    return lib


class Procs:
    """Starts processes (stdout/stderr captured) and kills whatever is left at the end."""

    def __init__(self):
        self.procs = []

    def start(self, *argv, **kw):
        p = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, **kw)
        self.procs.append(p)
        return p

    def python(self, *argv, **kw):
        return self.start(sys.executable, *argv, **kw)

    def finish(self, p, timeout=60):
        """Waits for p; returns (returncode, stdout, stderr)."""
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err

    def kill_all(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
            try:
                p.communicate(timeout=10)
            except Exception:
                pass


@pytest.fixture
def procs():
    ps = Procs()
    yield ps
    ps.kill_all()


def wait_for_file(path, timeout=30):
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} did not appear")
        time.sleep(0.02)


def expected_pattern(seq, plane_index, height, row_bytes):
    """The test pattern (PROTOCOL.md 21): byte (p, y, x) = (x + 2y + 3 seq + 61 p) mod 256."""
    y = np.arange(height, dtype=np.int64)[:, None]
    x = np.arange(row_bytes, dtype=np.int64)[None, :]
    return ((x + 2 * y + 3 * seq + 61 * plane_index) % 256).astype(np.uint8)


def plane_bytes(arr):
    """A plane array's pixel bytes as (rows, row_bytes) uint8 (row padding excluded)."""
    a = np.ascontiguousarray(arr)
    return a.view(np.uint8).reshape(a.shape[0], -1)


def assert_pattern(arrays, seq):
    for i, a in enumerate(arrays):
        b = plane_bytes(a)
        assert np.array_equal(b, expected_pattern(seq, i, *b.shape)), f"plane {i} is not frame {seq}'s pattern"
