import Foundation
import FramePipeline
import FrameServer
import Glibc
import Testing

// `framesrv run` and the processes under it: a stage ends when its process exits, whatever
// its children keep open, and it gets no descriptor of run's (issue 26 item 1).
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

    /// SIGKILL to whatever a failed test left in the scratch directory's name (not to leak sleeps).
    func killLeft(_ scratch: Scratch) {
        for line in processesLeft(scratch) { if let pid = pid_t(line.prefix { $0 != " " }) { kill(pid, SIGKILL) } }
    }
}
