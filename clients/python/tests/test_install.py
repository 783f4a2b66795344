"""The package builds as a wheel, installs into a fresh venv and works from another
directory (nothing at run time depends on the repository)."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO

CHECK = textwrap.dedent("""
    import os, framesrv, numpy
    assert not framesrv.__file__.startswith(os.environ["REPO"]), framesrv.__file__
    with framesrv.Producer("w", 32, 16, "rgb24") as p:
        with p.reserve() as f:
            f.fill_pattern()
    print("ok", framesrv.library_version())
""")


def header_version():
    """libframesrv's version as its header writes it (FRAMESRV_VERSION_MAJOR, _MINOR, _PATCH)."""
    text = (REPO / "clients" / "c" / "include" / "framesrv.h").read_text()
    parts = [re.search(rf"#define FRAMESRV_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def run(*argv, **kw):
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=600, **kw)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_wheel_installs_into_a_fresh_venv(tmp_path, fsdir):
    if os.environ.get("FRAMESRV_SKIP_INSTALL_TEST"):
        pytest.skip("FRAMESRV_SKIP_INSTALL_TEST set")
    wheels = tmp_path / "wheels"
    run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-w", wheels,
        REPO / "clients" / "python")
    (wheel,) = wheels.glob("framesrv-2.0.0-*.whl")
    venv = tmp_path / "venv"
    # A venv of its own (nothing of the project's or the system's): the wheel's declared
    # dependency (numpy) is what pip brings, at the version scripts/python-requirements.txt pins.
    run(sys.executable, "-m", "venv", venv)
    pinned = [line.split("#")[0].strip() for line in (REPO / "scripts" / "python-requirements.txt").read_text().splitlines()
              if line.startswith("numpy")]
    run(venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheel, *pinned)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = run(venv / "bin" / "python", "-c", CHECK, cwd=elsewhere, env={**os.environ, "REPO": str(REPO)})
    assert out.strip() == f"ok {header_version()}"   # the wheel's libframesrv is this tree's
