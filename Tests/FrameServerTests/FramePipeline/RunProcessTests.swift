import Foundation
import FramePipeline
import FrameServer
import Glibc
import Testing

// `framesrv run` and the processes under it: a stage ends when its process exits, whatever
// its children keep open, it gets no descriptor of run's, and nothing a stage started
// outlives the run, even a run killed with SIGKILL (issue 26 item 1, issue 27 item 3).
extension RunTests {
    /// An exec stage that leaves a background child (its output on /dev/null, or keeping
    /// run's standard error, or with the shell waiting for the sink): run ends when the
    /// stages' processes have exited, and stops the child.
    @Test func backgroundChildOfAStageDoesNotKeepTheRunGoing() throws {
        let scratch = try Scratch()
        defer { killLeft(scratch) }
        for shell in ["sleep 1000 >/dev/null 2>&1 & exec \"$0\" sink --in \"$1\" --null",
                      "sleep 1000 & exec \"$0\" sink --in \"$1\" --null",
                      "sleep 1000 & \"$0\" sink --in \"$1\" --null"] {
            let stage = "exec sh -c '\(shell)' '\(framesrvPath)' {in}"
            // Waits for run's exit (at most 60 s): before the fix it never came.
            let r = try scratch.run(["run", "--quiet", "produce --pattern --size 64x48 --frames 30 ! " + stage], timeout: 60)
            #expect(r.status == 0, "\(stage): run did not end by itself (-1: killed after 60 s): \(r.stdout)\n\(r.stderr)")
            #expect(r.stdout.contains("received 30 frames"), "\(stage): \(r.stdout)")
            try expectNothingLeft(scratch, r.stdout)
        }
    }

    /// A stage gets descriptors 0, 1 and 2 only: none of run's pipes or sockets, which a
    /// child of the stage would otherwise hold open after the stage is gone.
    @Test func stagesGetOnlyTheStandardDescriptors() throws {
        let scratch = try Scratch()
        let listing = scratch.file("fds.out")
        let script = "import os, sys\nkept = []\nfor f in os.listdir('/proc/self/fd'):\n    try: kept.append(f + ' ' + os.readlink('/proc/self/fd/' + f))\n"
            + "    except OSError: pass\nopen(sys.argv[1], 'w').write('\\n'.join(sorted(kept)))\nos.execvp(sys.argv[2], sys.argv[2:])"
        try script.write(toFile: scratch.file("fds.py"), atomically: true, encoding: .utf8)
        let out = try runSucceeding(scratch, "produce --pattern --size 64x48 --frames 5 ! exec '\(try ClientTools.python())' '\(scratch.file("fds.py"))'"
                                    + " '\(listing)' '\(framesrvPath)' sink --in {in} --null")
        let fds = try String(contentsOfFile: listing, encoding: .utf8)
        #expect(fds.split(separator: "\n").map { $0.split(separator: " ")[0] } == ["0", "1", "2"], "the stage's descriptors:\n\(fds)")
        try expectNothingLeft(scratch, out)
    }

    /// What a stage started and left is stopped when run ends: a child that made itself a
    /// daemon (closed its descriptors, setsid) after a run that ended by itself, and one that
    /// left the stage's process group (setsid) when the run is forced (a second Ctrl-C).
    @Test func processesAStageLeftAreStoppedAtTheEnd() throws {
        let scratch = try Scratch()
        defer { killLeft(scratch) }
        let daemon = "import os, sys\nif os.fork() == 0:\n    os.closerange(3, 65536); os.setsid(); os.execvp('sleep', ['sleep', '1000'])\n"
            + "os.execvp(sys.argv[1], sys.argv[1:])"
        try daemon.write(toFile: scratch.file("daemon.py"), atomically: true, encoding: .utf8)
        let out = try runSucceeding(scratch, "produce --pattern --size 64x48 --frames 30 ! exec '\(try ClientTools.python())'"
                                    + " '\(scratch.file("daemon.py"))' '\(framesrvPath)' sink --in {in} --null")
        try expectNothingLeft(scratch, out)

        let run = try startRun(scratch, "produce --pattern --size 64x48 ! tee name=t  t. ! sink --null"
                                   + "  t. ! exec --live sh -c 'setsid sleep 1001 & sleep 1002' {in}", until: "t") { $0.published > 0 }
        #expect(eventually(timeout: 30) { processesLeft(scratch).contains { $0.hasSuffix(" sleep 1001") } },
                "waiting for the stage's setsid child: \(processesLeft(scratch))")
        run.signal(SIGINT)
        #expect(eventually(timeout: 30) { run.stderr == stoppingLine }, "waiting for run's notice: \(run.stderr)")
        run.signal(SIGINT)
        #expect(run.wait(timeout: 30) == 130, "\(run.stdout)\n\(run.stderr)")
        try expectNothingLeft(scratch, run.stdout)
    }

    /// run killed with SIGKILL: its stages still die, framesrv's and an exec stage's alike,
    /// with the stage's own children (one in its process group, one that called setsid).
    @Test func stagesAndTheirChildrenDieWithAKilledRun() throws {
        let scratch = try Scratch()
        defer { killLeft(scratch) }
        let run = try startRun(scratch, "produce --pattern --size 64x48 ! tee name=t  t. ! sink --null"
                                   + "  t. ! exec --live sh -c 'sleep 1001 & setsid sleep 1002 & sleep 1003' {in}", until: "t") { $0.published > 0 }
        let sleeps = [" sleep 1001", " sleep 1002", " sleep 1003"]
        #expect(eventually(timeout: 30) { sleeps.allSatisfy { s in processesLeft(scratch).contains { $0.hasSuffix(s) } } },
                "waiting for the exec stage's three sleeps: \(processesLeft(scratch))")
        run.signal(SIGKILL)
        #expect(run.wait(timeout: 10) == 128 + SIGKILL)
        // Waits (at most 30 s) for every process of the run to be gone: before the fix the exec stage's never went.
        #expect(eventually(timeout: 30) { processesLeft(scratch).isEmpty }, "processes left: \(processesLeft(scratch))")
        try expectNothingLeft(scratch, run.stdout)
    }

    /// SIGKILL to whatever a failed test left in the scratch directory's name (not to leak sleeps).
    func killLeft(_ scratch: Scratch) {
        for line in processesLeft(scratch) { if let pid = pid_t(line.prefix { $0 != " " }) { kill(pid, SIGKILL) } }
    }
}
