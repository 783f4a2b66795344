import Foundation
@testable import FrameServer
import Glibc
import Testing

/// Protocol properties across real processes: the framesrv executable as producer and
/// consumers, each test in its own FRAMESRV_DIR.
@Suite(.serialized) struct PipelineTests {
    // MARK: Property 2: delivery modes

    /// Lossless delivery survives ZeroMQ dropping announcements: with high-water marks of
    /// one message and a consumer slower than the producer most doorbells are lost, yet every
    /// frame arrives exactly once, in order, intact.
    /// SIGINT ends a producer blocked on a consumer that holds every slot, and a sink blocked
    /// writing into a pipe nobody reads: stop signals interrupt those waits (they are not
    /// restarted), the producer ends its stream and exits 0, the sink reports one line.
    @Test func stopSignalsEndBlockedWaits() throws {
        let scratch = try Scratch()
        let holder = try scratch.start(["sink", "--in", "blocked", "--null", "--hold-us", "10000000", "--quiet"])
        let producer = try scratch.start(["produce", "--pattern", "--out", "blocked", "--rate", "max", "--slots", "2",
                                          "--wait-for", "1"])
        #expect(eventually(timeout: 20) { (try? StreamSnapshot.read("blocked", in: scratch.directory))?.freeSlots == 0 })
        usleep(200_000)   // the producer is asleep on the full pool now
        producer.signal(SIGINT)
        #expect(producer.wait(timeout: 20) == 0, "producer: \(producer.stderr)")
        holder.kill()

        // A sink writing y4m into a FIFO whose reader never reads.
        let fifo = scratch.file("stuck.y4m")
        #expect(mkfifo(fifo, 0o600) == 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        #expect(reader >= 0)
        defer { close(reader) }
        let sink = try scratch.start(["sink", "--in", "piped", "--y4m", fifo])
        let source = try scratch.start(["produce", "--pattern", "--out", "piped", "--size", "640x360", "--frames", "50",
                                        "--wait-for", "1", "--quiet"])
        #expect(eventually(timeout: 20) { (try? StreamSnapshot.read("piped", in: scratch.directory))?.published ?? 0 > 0 })
        usleep(300_000)   // the sink is blocked in write() with the pipe full
        sink.signal(SIGINT)
        #expect(sink.wait(timeout: 20) == 1)
        let lines = sink.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("stopped while writing"), "\(sink.stderr)")
        source.kill()
    }

    @Test func losslessDeliveryDoesNotDependOnAnnouncements() throws {
        let scratch = try Scratch()
        let log = scratch.file("lossless.log")
        let sink = try scratch.start(["sink", "--in", "s", "--null", "--lossless", "--verify", "--rcvhwm", "1",
                                      "--hold-us", "0-200", "--seq-log", log, "--stats-json"])
        let producer = try scratch.start(["produce", "--pattern", "--out", "s", "--size", "64x48", "--rate", "max",
                                          "--frames", "3000", "--slots", "4", "--sndhwm", "1", "--wait-for", "1"])
        #expect(producer.wait() == 0)
        #expect(sink.wait() == 0, "sink: \(sink.stderr)")
        let (runs, corrupt) = readSeqLog(log)
        #expect(corrupt.isEmpty)
        #expect(runs.count == 1)
        #expect(runs.first?.count == 3000 && runs.first == Array(1...3000), "every sequence number once, in order")
        let stats = try #require(SinkStats.parse(sink.stdout))
        #expect(stats.received == 3000 && stats.corrupt == 0)
    }

    /// A slow live consumer never slows the producer: it gets the newest frames, counts what
    /// it missed, and the producer never waits for a slot.
    @Test func slowLiveConsumerNeverSlowsTheProducer() throws {
        let scratch = try Scratch()
        var options = ProducerOptions()
        options.slots = 4
        let producer = try Producer(stream: "live", options: options, directory: scratch.directory)
        let log = scratch.file("live.log")
        let sink = try scratch.start(["sink", "--in", "live", "--null", "--live", "--verify", "--hold-us", "2000",
                                      "--seq-log", log, "--stats-json"])
        #expect(eventually { scratch.snapshot("live")?.consumers.count == 1 })
        let format = FrameFormat(.yuv420p, width: 64, height: 48)
        // Publish until the live consumer has provably fallen behind (skipped frames).
        var published = 0
        while published < 200_000 {
            try publishPattern(producer, format)
            published += 1
            if published >= 2000, (scratch.snapshot("live")?.consumers.first?.missed ?? 0) > 100 { break }
        }
        producer.finish()
        #expect(producer.ctl.pointee.blocked_ns == 0, "the producer never waited for the live consumer")
        #expect(sink.wait() == 0, "sink: \(sink.stderr)")
        let stats = try #require(SinkStats.parse(sink.stdout))
        #expect(stats.corrupt == 0)
        #expect(stats.missed > 0)
        #expect(stats.received < published)
        let frames = readSeqLog(log).attachments.flatMap { $0 }
        #expect(zip(frames, frames.dropFirst()).allSatisfy { $0 < $1 }, "live frames arrive newest-first, never backwards")
        producer.close()
    }

    // MARK: Property 3: crash safety

    /// A consumer killed with SIGKILL while holding slots loses them: its entry and its holds
    /// are gone, and it is counted once as reclaimed. (Within 250 ms: Timing/LatencyTests.)
    @Test func killedConsumerIsReclaimed() throws {
        let scratch = try Scratch()
        let (producer, holder) = try producerAndHolder("k", scratch)
        let pid = holder.pid
        holder.kill()
        #expect(eventually(timeout: 10) { isReclaimed(pid, of: "k", in: scratch) })
        #expect((scratch.snapshot("k")?.reclaimedConsumers ?? 0) == 1)
        producer.signal(SIGINT)
        #expect(producer.wait() == 0)
    }

    /// A consumer notices its producer died, says so, and re-attaches when a new producer
    /// of the same name appears (which first cleans the dead one's leftovers).
    @Test func consumerSurvivesProducerDeathAndReattaches() throws {
        let scratch = try Scratch()
        let log = scratch.file("reattach.log")
        let sink = try scratch.start(["sink", "--in", "p", "--null", "--lossless", "--verify", "--seq-log", log])
        let first = try scratch.start(["produce", "--pattern", "--out", "p", "--size", "64x48", "--rate", "500"])
        #expect(eventually { readSeqLog(log).attachments.first?.count ?? 0 > 10 })
        first.kill()
        // How soon it notices is Timing/LatencyTests'.
        #expect(eventually(timeout: 10) { sink.stderr.contains("exited without ending the stream") })
        // The dead producer's files are still there; the new producer cleans them up.
        #expect(FileManager.default.fileExists(atPath: scratch.file("p.ctl")))
        let second = try scratch.start(["produce", "--pattern", "--out", "p", "--size", "64x48", "--rate", "500", "--frames", "50", "--wait-for", "1"])
        #expect(second.wait() == 0, "second producer: \(second.stderr)")
        #expect(sink.wait(timeout: 10) == 0)
        let (runs, corrupt) = readSeqLog(log)
        #expect(corrupt.isEmpty)
        #expect(runs.count == 2, "one attachment per producer")
        #expect(runs.last == Array(1...50))
    }

    /// `framesrv clean` removes a dead producer's files and leaves a running stream alone.
    @Test func cleanRemovesOrphansOnly() throws {
        let scratch = try Scratch()
        let dead = try scratch.start(["produce", "--pattern", "--out", "dead.pool.x", "--rate", "100"])
        let alive = try scratch.start(["produce", "--pattern", "--out", "dead", "--rate", "100"])
        #expect(eventually { scratch.snapshot("dead.pool.x")?.published ?? 0 > 0 && scratch.snapshot("dead")?.published ?? 0 > 0 })
        dead.kill()
        let (status, out, _) = try scratch.run(["clean"])
        #expect(status == 0)
        #expect(out.contains("dead.pool.x.ctl"))
        #expect(!FileManager.default.fileExists(atPath: scratch.file("dead.pool.x.ctl")))
        #expect(FileManager.default.fileExists(atPath: scratch.file("dead.ctl")), "the running stream is untouched")
        #expect(scratch.snapshot("dead")?.state == "running")
        alive.signal(SIGTERM)
        #expect(alive.wait() == 0)
        let (_, again, _) = try scratch.run(["clean"])
        #expect(!again.contains(".ctl"), "a cleanly ended stream leaves only its lock file")
    }

    // MARK: Property 5: bounded and quiet

    /// An idle consumer and a producer blocked on backpressure sleep in the kernel; a
    /// release wakes the producer.
    @Test func idleAndBlockedProcessesUseNoCPU() throws {
        let scratch = try Scratch()
        // Waiting for a stream that does not exist yet: inotify, no polling.
        let early = try scratch.start(["sink", "--in", "q", "--null", "--lossless"])
        let lossless = try scratch.start(["sink", "--in", "q", "--null", "--lossless"])
        let producer = try scratch.start(["produce", "--pattern", "--out", "q", "--size", "64x48", "--rate", "max",
                                          "--slots", "4", "--wait-for", "2"])
        #expect(eventually { scratch.snapshot("q")?.published ?? 0 > 100 })
        // Freeze one lossless consumer: the pool fills with frames reserved for it.
        lossless.signal(SIGSTOP)
        // Stuck for good once every slot holds a frame reserved for the frozen consumer.
        #expect(eventually {
            guard let s = scratch.snapshot("q"),
                  let frozen = s.consumers.first(where: { $0.pid == lossless.pid })?.index else { return false }
            return s.slotTable.allSatisfy { $0.holders.contains(frozen) }
        })
        let stuckAt = scratch.snapshot("q")?.published ?? 0
        let p0 = producer.cpuTicks, e0 = early.cpuTicks
        usleep(1_000_000)   // the measurement window: what do blocked processes spend in one second?
        let p1 = producer.cpuTicks, e1 = early.cpuTicks
        #expect(scratch.snapshot("q")?.published == stuckAt, "the producer is blocked")
        #expect(p1 - p0 <= 2, "blocked producer used \(p1 - p0) ticks in 1 s")
        #expect(e1 - e0 <= 2, "idle consumer used \(e1 - e0) ticks in 1 s")
        // Releasing wakes the producer.
        lossless.signal(SIGCONT)
        #expect(eventually { scratch.snapshot("q")?.published ?? 0 > stuckAt + 100 })
        producer.signal(SIGINT)
        #expect(producer.wait() == 0)
        #expect(early.wait() == 0 && lossless.wait() == 0)
    }

    /// Memory is slots x slot size: publishing ten times more frames does not grow the processes.
    @Test func steadyStateDoesNotGrowMemory() throws {
        let scratch = try Scratch()
        let sink = try scratch.start(["sink", "--in", "m", "--null", "--lossless", "--verify"])
        let producer = try scratch.start(["produce", "--pattern", "--out", "m", "--size", "320x240", "--rate", "max",
                                          "--frames", "40000", "--wait-for", "1"])
        func rss(_ p: Spawned) -> Int {
            let status = (try? String(contentsOfFile: "/proc/\(p.pid)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        }
        #expect(eventually { scratch.snapshot("m")?.published ?? 0 > 4000 })
        let (p0, s0) = (rss(producer), rss(sink))
        #expect(eventually(timeout: 60) { scratch.snapshot("m")?.published ?? 0 > 36000 })
        let (p1, s1) = (rss(producer), rss(sink))
        #expect(p1 - p0 < 1024, "producer grew \(p1 - p0) KiB between frame 4000 and 36000")
        #expect(s1 - s0 < 1024, "consumer grew \(s1 - s0) KiB between frame 4000 and 36000")
        #expect(producer.wait() == 0 && sink.wait() == 0)
    }

    // MARK: Property 6: security

    @Test func filesArePrivateAndPixelsReadOnlyForConsumers() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "sec", "--size", "64x48", "--rate", "100"])
        let sink = try scratch.start(["sink", "--in", "sec", "--null", "--live"])
        #expect(eventually { scratch.snapshot("sec")?.consumers.first?.delivered ?? 0 > 0 })
        var st = stat()
        #expect(stat(scratch.path, &st) == 0 && st.st_mode & 0o777 == 0o700)
        for name in ["sec.ctl", "sec.pool.1", "sec.lock", "sec.sock"] {
            #expect(stat(scratch.file(name), &st) == 0 && st.st_mode & 0o077 == 0, "\(name) is private")
        }
        func poolMappings(_ p: Spawned) -> [String] {
            let maps = procFile("/proc/\(p.pid)/maps")
            return maps.split(separator: "\n").filter { $0.hasSuffix("/sec.pool.1") }.map { String($0.split(separator: " ")[1]) }
        }
        let consumerModes = poolMappings(sink), producerModes = poolMappings(producer)
        #expect(!consumerModes.isEmpty && consumerModes.allSatisfy { $0 == "r--s" }, "the consumer maps pixels read-only: \(consumerModes)")
        #expect(producerModes == ["rw-s"], "the producer maps them read-write: \(producerModes)")
        producer.signal(SIGINT)
        #expect(producer.wait() == 0 && sink.wait() == 0)
    }

    @Test func runtimeDirectoryOfAnotherUserIsRefused() throws {
        let scratch = try Scratch()
        let other = scratch.file("other")
        #expect(mkdir(other, 0o700) == 0)
        #expect(chown(other, 65534, 65534) == 0)
        #expect(throws: RuntimeDirectoryError.self) { _ = try RuntimeDirectory(path: other) }
        let loose = scratch.file("loose")
        #expect(mkdir(loose, 0o755) == 0 && chmod(loose, 0o755) == 0)
        _ = try RuntimeDirectory(path: loose)
        var st = stat()
        #expect(stat(loose, &st) == 0 && st.st_mode & 0o777 == 0o700, "a loose directory is tightened to 0700")
    }

    // MARK: Command line

    /// Bad input: one clear line on stderr, a non-zero status, never a crash.
    @Test(arguments: [
        (["bogus"], "unknown command"),
        (["produce", "--out", "x"], "--pattern"),
        (["produce", "--pattern"], "missing --out"),
        (["produce", "--pattern", "--out", "x", "--size", "10"], "WIDTHxHEIGHT"),
        (["produce", "--pattern", "--out", "x", "--rate", "-3"], "--rate"),
        (["produce", "--pattern", "--out", "x", "--rate", "1e-13"], "--rate"),
        (["produce", "--pattern", "--out", "x", "--pix-fmt", "yuv999"], "unknown pixel format"),
        (["produce", "--pattern", "--out", "x", "--slots", "0"], "--slots"),
        (["produce", "--pattern", "--out", "a/b"], "invalid stream name"),
        (["produce", "--pattern", "--out", "x", "--frames"], "needs a value"),
        (["sink", "--in", "x"], "--null"),
        (["sink", "--null"], "missing --in"),
        (["sink", "--in", "x", "--null", "--live", "--lossless"], "choose one"),
        (["sink", "--in", "x", "--null", "--wait", "0"], "no stream named 'x'"),
        (["sink", "--in", "x", "--null", "--hold-us", "5-1"], "--hold-us"),
        (["inspect", "nope"], "no stream named 'nope'"),
        (["inspect"], "name one stream"),
        (["bench", "warp"], "bench transport"),
        (["ls", "--jsn"], "unknown option '--jsn'"),
        (["top", "-n", "0"], "-n must be"),
        (["top", "-b", "--json"], "choose one"),
    ])
    func badInputGetsOneClearLine(_ args: [String], _ expected: String) throws {
        let scratch = try Scratch()
        let (status, _, err) = try scratch.run(args, timeout: 20)
        #expect(status == 1 || status == 2)
        let lines = err.split(separator: "\n")
        #expect(lines.count == 1, "exactly one error line, got: \(err)")
        #expect(err.hasPrefix("framesrv: error: ") && err.contains(expected), "got: \(err)")
    }

    @Test func helpIsAvailableEverywhere() throws {
        let scratch = try Scratch()
        for cmd in [["--help"], ["produce", "--help"], ["sink", "--help"], ["ls", "--help"], ["inspect", "--help"],
                    ["clean", "--help"], ["bench", "--help"], ["demo", "--help"], ["top", "--help"]] {
            let (status, out, _) = try scratch.run(cmd)
            #expect(status == 0 && out.contains("usage: framesrv"), "\(cmd)")
        }
    }

    // MARK: Monitoring

    @Test func lsAndInspectDescribeARunningPipeline() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "mon", "--size", "320x240", "--pix-fmt", "nv12",
                                          "--rate", "100", "--slots", "6"])
        let sink = try scratch.start(["sink", "--in", "mon", "--null", "--lossless", "--name", "watcher"])
        #expect(eventually { scratch.snapshot("mon")?.consumers.first?.delivered ?? 0 >= 5 })
        let (s1, ls, _) = try scratch.run(["ls", "--json"])
        #expect(s1 == 0)
        let streams = try #require(try JSONSerialization.jsonObject(with: Data(ls.utf8)) as? [[String: Any]])
        #expect(streams.count == 1)
        #expect(streams.first?["name"] as? String == "mon")
        #expect(streams.first?["state"] as? String == "running")
        #expect(streams.first?["slots"] as? Int == 6)
        #expect((streams.first?["format"] as? String)?.hasPrefix("320x240 nv12") == true)
        let (s2, inspect, _) = try scratch.run(["inspect", "mon", "--json"])
        #expect(s2 == 0)
        let one = try #require(try JSONSerialization.jsonObject(with: Data(inspect.utf8)) as? [String: Any])
        let consumers = try #require(one["consumers"] as? [[String: Any]])
        #expect(consumers.count == 1)
        #expect(consumers.first?["name"] as? String == "watcher")
        #expect(consumers.first?["mode"] as? String == "lossless")
        #expect(consumers.first?["pid"] as? Int == Int(sink.pid))
        #expect((one["slotTable"] as? [Any])?.count == 6)
        let (s3, text, _) = try scratch.run(["inspect", "mon"])
        #expect(s3 == 0 && text.contains("watcher") && text.contains("SLOT"))
        producer.signal(SIGINT)
        #expect(producer.wait() == 0 && sink.wait() == 0)
    }
}
