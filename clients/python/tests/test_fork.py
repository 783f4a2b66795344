"""A Consumer or Producer used in a forked child (issue 26 item 4). Before the check the child's
next() took the parent's frame (the parent went 1 -> 3 with missed 1) and its close detached
the parent. Now the child's calls raise ForkedError with one line, and the parent's consumer
delivers every frame in order with missed 0, whether the child closes, is garbage-collected,
exits through the interpreter's finalization, or is a multiprocessing worker."""
import gc
import multiprocessing
import os
import select
import signal
import textwrap

import framesrv
from conftest import assert_pattern


def publish(p, n):
    for _ in range(n):
        with p.reserve(timeout=5) as f:
            f.fill_pattern()


def the_line(parent, child):
    return f"was opened by pid {parent}; a forked child (pid {child}) must open its own"


def refusals(c, p, held):
    """What the child gets from each call on its parent's objects (the error's line, or what
    it did instead of refusing)."""
    calls = {
        "next": lambda: c.next(timeout=1),
        "iteration": lambda: next(iter(c)),
        "stats": lambda: c.stats,
        "planes": lambda: held.planes,
        "reserve": lambda: p.reserve(timeout=0),
        "producer stats": lambda: p.stats,
    }
    out = []
    for name, call in calls.items():
        try:
            out.append(f"{name}: NOT REFUSED: {call()!r}")
        except framesrv.ForkedError as e:
            out.append(f"{name}: {e} [{e.code}]")
    return out


def parent_goes_on(c, p, held, first=2, last=6):
    """The parent's consumer after the child: every frame in order, missed 0."""
    assert held.seq == 1
    held.release()
    for seq in range(first, last + 1):
        if seq > 2:
            publish(p, 1)
        f = c.next(timeout=5)
        assert f is not None and f.seq == seq, f"parent expected frame {seq}, got {f}"
        assert_pattern(f.planes, seq)
        f.release()
    st = c.stats
    assert st["missed"] == 0 and st["delivered"] == last, st


def test_forked_child_refuses_and_the_parent_keeps_every_frame(fsdir):
    with framesrv.Producer("fk", 32, 16, "gray", slots=4) as p:
        c = framesrv.Consumer("fk", timeout=10)
        publish(p, 2)
        held = c.next(timeout=5)   # frame 1, held across the fork
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:   # the child: refusals, then its close and garbage collection
            code = 1
            try:
                os.close(r)
                lines = refusals(c, p, held)
                assert held.release() is True   # a no-op here
                c.close()
                p.close()
                del c, p, held
                gc.collect()
                os.write(w, "\n".join(lines).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        if not select.select([r], [], [], 30)[0]:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("the child hung on its parent's consumer or producer")
        with os.fdopen(r) as pipe:
            lines = pipe.read().splitlines()
        assert os.waitpid(pid, 0)[1] == 0
        assert len(lines) == 6, lines
        for line in lines:
            assert the_line(os.getpid(), pid) in line and line.endswith(f"[{-13}]"), line
        assert c.stream_info["producer_pid"] == os.getpid()
        parent_goes_on(c, p, held)
        c.close()


CHILD_EXITS = textwrap.dedent("""
    import os, sys
    import framesrv
    p = framesrv.Producer("fk-exit", 32, 16, "gray", slots=4)
    c = framesrv.Consumer("fk-exit", timeout=10)
    for _ in range(2):
        with p.reserve(timeout=5) as f:
            f.fill_pattern()
    held = c.next(timeout=5)
    kept = held.array()            # an array held across the fork, too
    pid = os.fork()
    if pid == 0:
        try:
            f = c.next(timeout=1)
            print("child took frame", f.seq, flush=True)
        except framesrv.ForkedError as e:
            print("child:", e, flush=True)
        sys.exit(0)                # finalization collects the child's copies: nothing closed by hand
    assert os.waitpid(pid, 0)[1] == 0
    seqs = [held.seq]
    del kept
    held.release()
    seqs.append(c.next(timeout=5).seq)
    for _ in range(4):
        with p.reserve(timeout=5) as f:
            f.fill_pattern()
        seqs.append(c.next(timeout=5).seq)
    print("parent:", seqs, c.stats["missed"], flush=True)
    c.close()
    p.close()
""")


def test_a_child_that_exits_through_finalization_leaves_the_parent_attached(fsdir, procs, tmp_path):
    script = tmp_path / "fork_exit.py"
    script.write_text(CHILD_EXITS)
    rc, out, err = procs.finish(procs.python(str(script)), timeout=60)
    assert rc == 0, err
    lines = out.splitlines()
    assert len(lines) == 2 and lines[0].startswith("child: this consumer of stream 'fk-exit' was opened by pid"), out
    assert "a forked child (pid" in lines[0] and "must open its own" in lines[0], out
    assert lines[1] == "parent: [1, 2, 3, 4, 5, 6] 0", out + err


def _worker(c, queue):
    try:
        f = c.next(timeout=1)
        queue.put(f"took frame {f.seq}")
    except framesrv.ForkedError as e:
        queue.put(str(e))


def test_a_multiprocessing_worker_forked_with_a_consumer_cannot_take_its_frames(fsdir):
    with framesrv.Producer("fk-mp", 32, 16, "gray", slots=4) as p:
        c = framesrv.Consumer("fk-mp", timeout=10)
        publish(p, 2)
        held = c.next(timeout=5)
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        worker = ctx.Process(target=_worker, args=(c, queue))
        worker.start()
        message = queue.get(timeout=30)
        worker.join(30)
        assert worker.exitcode == 0
        assert the_line(os.getpid(), worker.pid) in message and "\n" not in message, message
        parent_goes_on(c, p, held)
        c.close()


def test_the_parent_is_not_marked(fsdir):
    with framesrv.Producer("fk-mark", 32, 16, "gray", slots=2) as p:
        with framesrv.Consumer("fk-mark", timeout=10) as c:
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            assert not c._c.forked and not p._p.forked
            publish(p, 1)
            assert c.next(timeout=5).seq == 1
