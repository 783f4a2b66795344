"""The package builds as a wheel, installs into a fresh venv and works from another
directory (nothing at run time depends on the repository)."""
import os
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
    assert out.strip() == "ok 2.0.0"
