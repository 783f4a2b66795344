"""What monitors call a Python stage (the script's name), errors that print as their
message, and a consumer's counters still readable after it closed."""
import textwrap

import pytest

import framesrv

# Opens a producer and a consumer of its own stream, then prints what `framesrv inspect` sees.
STAGE = textwrap.dedent("""
    import json, subprocess, sys, framesrv
    kw = dict(a.split("=", 1) for a in sys.argv[2:])
    with framesrv.Producer("cam", 64, 48, "gray", producer_name=kw.get("producer")) as p, \\
            framesrv.Consumer("cam", timeout=10, client_name=kw.get("client")) as c:
        s = json.loads(subprocess.run([sys.argv[1], "inspect", "cam", "--json"], capture_output=True,
                                      text=True, check=True).stdout)
        print(s["producerName"], s["consumers"][0]["name"])
""")


@pytest.mark.parametrize("how,extra,want", [
    ("script", [], "edges_stage edges_stage"),
    ("-c", [], "python python"),
    ("script", ["producer=cam-src", "client=detector"], "cam-src detector"),
])
def test_monitors_show_the_scripts_name(fsdir, framesrv_bin, procs, tmp_path, how, extra, want):
    script = tmp_path / "edges_stage.py"
    script.write_text(STAGE)
    argv = [script] if how == "script" else ["-c", STAGE]
    rc, out, err = procs.finish(procs.python(*argv, framesrv_bin, *extra))
    assert (rc, out.strip()) == (0, want), err


def test_default_client_name_of_a_package_run_with_dash_m(fsdir, procs, tmp_path):
    pkg = tmp_path / "tracker"
    pkg.mkdir()
    (pkg / "__main__.py").write_text("import framesrv; print(framesrv.default_client_name())")
    rc, out, err = procs.finish(procs.python("-m", "tracker", cwd=tmp_path))
    assert (rc, out.strip()) == (0, "tracker"), err


def test_errors_print_their_message_and_keep_the_code(fsdir):
    with pytest.raises(framesrv.NotFound) as info:
        framesrv.Consumer("nosuch", timeout=0.1)
    e = info.value
    assert str(e).startswith("no stream named 'nosuch' appeared in ") and not str(e).startswith("(")
    assert e.code == -2 and e.args[1] == -2
    assert f"framesrv.NotFound: {e}" in "".join(__import__("traceback").format_exception_only(type(e), e))
    with pytest.raises(framesrv.InvalidArgument) as info:
        framesrv.Consumer("x", mode="fast")
    assert str(info.value) == "mode must be 'lossless' or 'live', not 'fast'" and info.value.code == -1


def test_stats_readable_after_the_with_block(fsdir):
    with framesrv.Producer("out", 64, 48, "gray") as p, framesrv.Consumer("out", timeout=10) as c:
        for _ in range(3):
            with p.reserve() as f:
                f.fill_pattern()
        for _ in range(3):
            c.next(timeout=10).release()
        during = c.stats
    assert during["delivered"] == 3
    assert c.stats == during
    with pytest.raises(framesrv.StateError):
        c.next()
