import CFrameServer
import Foundation
import FrameServer
import Glibc
import Testing

/// The protocol stress test: 20,000 frames at full speed through one producer, two lossless
/// consumers, two live consumers and one lossless consumer that is SIGKILLed and restarted
/// again and again. Real processes, real ZeroMQ, real shared memory.
///
/// Pass criteria (the spec's):
///   (a) no consumer ever sees a corrupt frame;
///   (b) each surviving lossless consumer gets every sequence number exactly once, in order;
///   (c) every run of the killed consumer is contiguous and increasing until its death;
///   (d) live consumers' sequence numbers strictly increase;
///   (e) no slot leaks: a killed consumer's holder bit is gone from every slot, and at the
///       end the stream leaves no holders behind;
///   (f) every kill is reclaimed within 250 ms.
@Suite("Protocol stress", .serialized)
struct StressTests {
    static let stream = "S"
    static let frames = 20_000
    /// Kill the victim at most this many times (at least `requiredKills` must happen).
    static let plannedKills = 7
    static let requiredKills = 5
    /// Frames between planned kills (kill k once `published >= k * killSpacing`).
    static let killSpacing = 2_000
    /// No kill (and so no restart) once the producer is this close to the end, so the last
    /// restart attaches well before the stream ends.
    static let lastKillBefore = frames - 3_000
    /// The spec's bound on reclaiming a dead consumer.
    static let reclaimBound = 0.25
    /// The survivors hold each frame this long (microseconds, random in the range), so that
    /// the run lasts long enough (about 14 s on a 2-core box) to spread the kills over it.
    static let survivorHold = "300-700"

    @Test("20,000 frames: 2 lossless + 2 live consumers survive a lossless consumer SIGKILLed repeatedly",
          .timeLimit(.minutes(3)))
    func stressWithRepeatedKills() throws {
        let scratch = try Scratch()
        let stream = Self.stream
        let frames = Self.frames

        let producer = try scratch.start(["produce", "--pattern", "--out", stream, "--size", "64x48", "--rate", "max",
                                          "--frames", "\(frames)", "--slots", "8", "--wait-for", "2"])
        let losslessLogs = (1...2).map { scratch.file("lossless\($0).log") }
        let liveLogs = (1...2).map { scratch.file("live\($0).log") }
        let victimLog = scratch.file("victim.log")
        let lossless = try losslessLogs.enumerated().map { i, log in
            try scratch.start(["sink", "--in", stream, "--null", "--lossless", "--verify", "--hold-us", Self.survivorHold,
                               "--seq-log", log, "--stats-json", "--no-reattach", "--name", "lossless\(i + 1)"])
        }
        let live = try liveLogs.enumerated().map { i, log in
            try scratch.start(["sink", "--in", stream, "--null", "--live", "--verify", "--hold-us", "0-2000",
                               "--seq-log", log, "--stats-json", "--no-reattach", "--name", "live\(i + 1)"])
        }
        // --wait-for 2 holds frame 1 back until both surviving lossless sinks are admitted;
        // the victim starts only after that, so it cannot take one of those two places.
        try #require(Self.waitFor(timeout: 30) { (scratch.snapshot(stream)?.published ?? 0) > 0 },
                     "the producer never started publishing: \(producer.stderr)")

        func startVictim() throws -> Spawned {
            try scratch.start(["sink", "--in", stream, "--null", "--lossless", "--verify", "--hold-us", "0-300",
                               "--seq-log", victimLog, "--stats-json", "--no-reattach", "--wait", "20", "--name", "victim"])
        }
        var victim = try startVictim()
        var victimPIDs = [victim.pid]
        var reclaimTimes: [Double] = []
        var exitTimes: [Double] = []

        for k in 1...Self.plannedKills {
            // Kill once the producer is past this kill's share of the run and the current
            // victim is admitted and has delivered (and so logged, or is logging) frames.
            var victimIndex: Int?
            var published: UInt64 = 0
            let due = Self.waitFor(timeout: 60, every: 10_000) {
                guard producer.isRunning, victim.isRunning, let snap = scratch.snapshot(stream) else { return true }
                published = snap.published
                guard let c = snap.consumers.first(where: { $0.pid == victim.pid }),
                      c.state == "active", c.delivered >= 20,
                      snap.published >= UInt64(k * Self.killSpacing) else { return false }
                victimIndex = c.index
                return true
            }
            guard due, let index = victimIndex, published < UInt64(Self.lastKillBefore) else { break }
            try #require(producer.isRunning, "the producer must stay alive throughout")
            try #require(victim.isRunning, "victim \(victim.pid) exited by itself: \(victim.stderr)")

            // (f): SIGKILL, then read the stream's snapshot every millisecond until the
            // producer has reclaimed the entry (its pid is gone from the consumer table).
            let pid = victim.pid
            // Diagnostics only: a pidfd polls readable when the whole process has exited,
            // which is when the producer's watcher (polling its own pidfd) can first see it.
            let pidfd = fs_sys_pidfd_open(pid)
            defer { if pidfd >= 0 { close(pidfd) } }
            let start = DispatchTime.now().uptimeNanoseconds
            Glibc.kill(pid, SIGKILL)
            var reclaimedAfter: Double?
            // Diagnostics: when the kernel had finished the process off, and when the entry
            // was last seen still listed (so a slow poll is told apart from a slow reclaim).
            var exitedAfter: Double?
            var lastListedAt = 0.0
            var polls = 0
            while reclaimedAfter == nil {
                if exitedAfter == nil, Self.hasExited(pidfd: pidfd) {
                    exitedAfter = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                }
                let snap = scratch.snapshot(stream)
                polls += 1
                // Measured after the read: an upper bound on when the entry was freed.
                let elapsed = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                if let snap, !snap.consumers.contains(where: { $0.pid == pid }) {
                    reclaimedAfter = elapsed
                } else if elapsed > 5 {
                    break
                } else {
                    if snap != nil { lastListedAt = elapsed }
                    usleep(1_000)
                }
            }
            print(String(format: "stress: kill %d: pid %d exited after %.1f ms, last seen listed at %.1f ms, reclaimed by %.1f ms (%d polls)",
                         k, pid, (exitedAfter ?? -0.001) * 1000, lastListedAt * 1000, (reclaimedAfter ?? -0.001) * 1000, polls))
            let reclaimed = try #require(reclaimedAfter, "kill \(k): consumer \(pid) still listed 5 s after SIGKILL")
            reclaimTimes.append(reclaimed)
            exitTimes.append(exitedAfter ?? reclaimed)
            #expect(reclaimed < Self.reclaimBound,
                    "kill \(k): consumer \(pid) reclaimed after \(Int(reclaimed * 1000)) ms (bound 250 ms)")
            #expect(victim.wait(timeout: 10) == 128 + SIGKILL)

            // (e) while the producer still runs: nobody has taken the dead consumer's index
            // yet (the restart comes below), so its holder bit must be gone from every slot.
            let after = try #require(scratch.snapshot(stream), "the stream vanished while the producer should run")
            #expect(producer.isRunning && after.state == "running")
            let leaked = after.slotTable.filter { $0.holders.contains(index) }.map(\.index)
            #expect(leaked.isEmpty, "kill \(k): slots \(leaked) still held by dead consumer index \(index)")
            #expect(!after.consumers.contains { $0.index == index },
                    "kill \(k): consumer entry \(index) not freed: \(after.consumers.filter { $0.index == index })")
            #expect(Self.waitFor(timeout: 5) { (scratch.snapshot(stream)?.reclaimedConsumers ?? 0) >= UInt64(k) },
                    "kill \(k): the stream's reclaimed counter did not count it")

            // Restart with the same --seq-log (the sink appends, starting with 'attach PID').
            victim = try startVictim()
            victimPIDs.append(victim.pid)
        }
        let kills = reclaimTimes.count
        let maxReclaim = reclaimTimes.max() ?? 0
        print("stress: \(kills) kills, reclaim times (ms): "
              + reclaimTimes.map { String(format: "%.1f", $0 * 1000) }.joined(separator: ", ")
              + String(format: "; max %.1f ms", maxReclaim * 1000)
              + "; process exited (pidfd readable) after (ms): "
              + exitTimes.map { String(format: "%.1f", $0 * 1000) }.joined(separator: ", "))
        #expect(kills >= Self.requiredKills, "only \(kills) kills fitted into the run")
        #expect(maxReclaim < Self.reclaimBound)

        // Everyone finishes: the producer after 20,000 frames, the consumers at the end of stream.
        #expect(producer.wait(timeout: 120) == 0, "producer: \(producer.stderr)")
        #expect(producer.stdout.contains("published \(frames) frames"), "producer: \(producer.stdout)")
        for (i, p) in lossless.enumerated() { #expect(p.wait(timeout: 60) == 0, "lossless\(i + 1): \(p.stderr)") }
        for (i, p) in live.enumerated() { #expect(p.wait(timeout: 60) == 0, "live\(i + 1): \(p.stderr)") }
        #expect(victim.wait(timeout: 60) == 0, "last victim run: \(victim.stderr)")

        // (a) + (b): the surviving lossless consumers.
        for (i, p) in lossless.enumerated() {
            let stats = try #require(SinkStats.parse(p.stdout), "lossless\(i + 1) printed no statistics: \(p.stdout)")
            #expect(stats.corrupt == 0, "lossless\(i + 1): \(stats.corrupt) corrupt frames")
            #expect(stats.received == frames && stats.first == 1 && stats.last == UInt64(frames),
                    "lossless\(i + 1): received \(stats.received), first \(stats.first), last \(stats.last)")
            let (runs, corrupt) = readSeqLog(losslessLogs[i])
            #expect(corrupt.isEmpty, "lossless\(i + 1): corrupt frames \(corrupt.prefix(10))")
            #expect(runs.count == 1, "lossless\(i + 1) attached \(runs.count) times")
            if let run = runs.first {
                #expect(run == Array(1...UInt64(frames)), "lossless\(i + 1): \(Self.describeGaps(run, from: 1))")
            }
        }

        // (a) + (d): the live consumers.
        for (i, p) in live.enumerated() {
            let stats = try #require(SinkStats.parse(p.stdout), "live\(i + 1) printed no statistics: \(p.stdout)")
            #expect(stats.corrupt == 0, "live\(i + 1): \(stats.corrupt) corrupt frames")
            #expect(stats.received > 0)
            let (runs, corrupt) = readSeqLog(liveLogs[i])
            #expect(corrupt.isEmpty, "live\(i + 1): corrupt frames \(corrupt.prefix(10))")
            #expect(runs.count == 1, "live\(i + 1) attached \(runs.count) times")
            let seqs = runs.flatMap { $0 }
            #expect(seqs.count == stats.received)
            #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }, "live\(i + 1): sequence numbers went backwards")
            #expect(seqs.allSatisfy { (1...UInt64(frames)).contains($0) })
        }

        // (a) + (c): the victim. One 'attach' per process started (each attached long before
        // it was killed, and the last one long before the end).
        let (victimRuns, victimCorrupt) = readSeqLog(victimLog)
        #expect(victimCorrupt.isEmpty, "victim: corrupt frames \(victimCorrupt.prefix(10))")
        #expect(victimRuns.count == victimPIDs.count, "victim: \(victimRuns.count) attachments for \(victimPIDs.count) processes")
        for (r, run) in victimRuns.enumerated() {
            #expect(!run.isEmpty || r == victimRuns.count - 1, "victim run \(r + 1) logged no frames before its kill")
            if let first = run.first {
                #expect(run == Array(first..<first + UInt64(run.count)), "victim run \(r + 1): \(Self.describeGaps(run, from: first))")
            }
            // A re-attached consumer is owed only frames published after its admission.
            if r > 0, let first = run.first, let previous = victimRuns[r - 1].last {
                #expect(first > previous, "victim run \(r + 1) starts at \(first), before run \(r) ended (\(previous))")
            }
        }
        if let last = victimRuns.last, !last.isEmpty {
            #expect(last.last == UInt64(frames), "the last victim run, never killed, must reach the end of stream")
        }
        if let stats = SinkStats.parse(victim.stdout) {
            #expect(stats.corrupt == 0)
        }

        // (e) at the end: the producer removed the control segment and the socket, so there
        // is no stream left to hold anything; if a control segment were left, it must show
        // no holders.
        if let snap = scratch.snapshot(stream) {
            let held = snap.slotTable.filter { !$0.holders.isEmpty }
            #expect(held.isEmpty, "slots still held at the end: \(held.map { ($0.index, $0.holders) })")
        }
        #expect(!FileManager.default.fileExists(atPath: scratch.file("\(stream).ctl")))
        #expect(!FileManager.default.fileExists(atPath: scratch.file("\(stream).sock")))
        let leftovers = ((try? FileManager.default.contentsOfDirectory(atPath: scratch.path)) ?? [])
            .filter { $0.hasPrefix("\(stream).") }.sorted()
        print("stress: stream files left after the run: \(leftovers)")
    }

    /// Like the harness's `eventually`, with a chosen polling interval (in microseconds):
    /// the long waits between kills poll every 10 ms, so that the test process itself takes
    /// little CPU from the pipeline on a 2-core machine.
    static func waitFor(timeout: Double, every micros: UInt32 = 2_000, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if condition() { return true }
            usleep(micros)
        }
        return condition()
    }

    /// Lost-wake stress (protocol v2's one-hop wake): 100,000 small frames at full speed to 4
    /// lossless consumers, 2 sleeping on `frame_wake` at once (`--poll-us 0`) and 2 spinning
    /// first (`--poll-us 50`). A lost wake-up would stall a consumer, and with it the
    /// producer, for a 500 ms futex timeout at a time: the run must end, and every consumer
    /// gets every frame once, in order, intact.
    @Test("100,000 frames to 4 lossless consumers, poll-us 0 and 50 alternating", .timeLimit(.minutes(3)))
    func lostWakeStress() throws {
        let scratch = try Scratch()
        let frames = 100_000
        let polls = [0, 50, 0, 50]
        let sinks = try polls.enumerated().map { i, poll in
            try scratch.start(["sink", "--in", "W", "--null", "--lossless", "--verify", "--poll-us", "\(poll)",
                               "--seq-log", scratch.file("w\(i).log"), "--stats-json", "--no-reattach"])
        }
        let producer = try scratch.start(["produce", "--pattern", "--out", "W", "--size", "32x32", "--rate", "max",
                                          "--frames", "\(frames)", "--slots", "4", "--wait-for", "4"])
        #expect(producer.wait(timeout: 150) == 0, "producer: \(producer.stderr)")
        for (i, sink) in sinks.enumerated() {
            #expect(sink.wait(timeout: 30) == 0, "sink \(i) (poll-us \(polls[i])): \(sink.stderr)")
            let stats = try #require(SinkStats.parse(sink.stdout))
            #expect(stats.received == frames && stats.corrupt == 0)
            let runs = readSeqLog(scratch.file("w\(i).log")).attachments
            #expect(runs.count == 1 && runs[0] == (1...UInt64(frames)).map { $0 },
                    "sink \(i): \(Self.describeGaps(runs.first ?? [], from: 1))")
        }
    }

    /// Whether the process behind `pidfd` has exited (every thread), without waiting.
    static func hasExited(pidfd: Int32) -> Bool {
        guard pidfd >= 0 else { return false }
        var p = pollfd(fd: pidfd, events: Int16(POLLIN), revents: 0)
        return poll(&p, 1, 0) > 0
    }

    /// A short description of where `run` departs from `from, from+1, ...`.
    static func describeGaps(_ run: [UInt64], from: UInt64) -> String {
        var expected = from
        for (i, s) in run.enumerated() {
            if s != expected {
                return "at position \(i) expected \(expected), got \(s) (\(run.count) frames, \(run.first ?? 0)...\(run.last ?? 0))"
            }
            expected += 1
        }
        return "\(run.count) frames, \(run.first ?? 0)...\(run.last ?? 0)"
    }
}
