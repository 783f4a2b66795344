import FoundationEssentials
import FrameMedia
import FrameProcess
import FrameServer
import Glibc

/// `framesrv bench transport`: framesrv's transport next to its peers, section by section
/// (see `framesrv bench --help`). This file has the framesrv side; TransportPeers.swift the peers.
extension Bench {
    typealias Budget = TransportBudget

    /// A frame size of the benchmark, with its yuv420p payload.
    struct BenchSize {
        var width: Int, height: Int
        var label: String { "\(width)x\(height)" }
        var bytes: Int { width * height * 3 / 2 }
        static let small = BenchSize(width: 64, height: 64)
        static let hd = BenchSize(width: 1920, height: 1080)
        static let uhd = BenchSize(width: 3840, height: 2160)
    }

    /// One consumer process of a framesrv run: `framesrv sink` or the Python package's consumer.
    struct BenchConsumer {
        var arguments: [String]
        var executable = selfExecutable

        static func sink(_ index: Int, pollMicros: Int? = nil, warmup: Int = 0) -> BenchConsumer {
            BenchConsumer(arguments: ["sink", "--in", "bench", "--null", "--lossless", "--stats-json", "--quiet", "--wait", "60",
                                      "--name", "bench-\(index)", "--warmup", String(warmup)]
                          + (pollMicros.map { ["--poll-us", String($0)] } ?? []))
        }

        /// `touch`: it takes every frame's planes (numpy views) and its publish_ns, as a stage would.
        static func python(_ python: String, touch: Bool = false) -> BenchConsumer {
            BenchConsumer(arguments: ["-m", "framesrv", "consume", "--in", "bench", "--wait", "60"] + (touch ? ["--touch"] : []),
                          executable: python)
        }
    }

    /// What one framesrv run measured: frames/s (timed frames over the timed seconds) and the
    /// first consumer's publish -> acquire latency percentiles (sinks only).
    struct FramesrvResult { var fps: Double; var p50: Double; var p99: Double }

    func transport(_ budget: Budget, python: String?) throws {
        let peers = TransportPeers(python: python)
        print("framesrv bench transport: \(ProcessInfo.processInfo.activeProcessorCount) cores, every consumer a separate process, "
              + (budget.frames.map { "\($0) frames" } ?? "\(formatDouble(budget.seconds, 2)) s") + " per measurement, "
              + "\(budget.rounds) round\(budget.rounds == 1 ? "" : "s") (median), yuv420p")
        for line in peers.describe() { print("  " + line) }
        if budget.runs(1) || budget.runs(2) { try transportAlone(budget, peers: peers) }
        if budget.runs(3) { try fanOut(budget, peers: peers) }
        if budget.runs(4) { try pythonConsumers(budget, peers: peers) }
        if budget.runs(5) { try wakeLatency(budget, peers: peers) }
        if budget.runs(6) { try idleWakeups() }
    }

    /// One producer in this process (8 slots, the pool created and every slot painted before
    /// the clock starts), the consumers as processes; checks that each received every frame.
    func framesrvRun(_ size: BenchSize, consumers: [BenchConsumer], rate: Double?, budget: Budget) throws -> FramesrvResult {
        let scratch = ScratchDirectory(prefix: "framesrv-bench")
        var options = ProducerOptions()
        options.slots = 8
        options.nominalRate = rate.flatMap { Rational(framesPerSecond: $0) }
        let producer = try Producer(stream: "bench", options: options, directory: try RuntimeDirectory(path: scratch.path))
        defer { producer.close() }
        let children = try consumers.enumerated().map { i, c in
            try Child(c.arguments, label: "consumer \(i)", executable: c.executable,
                      environment: ["FRAMESRV_DIR": scratch.path], captureErrors: true)
        }
        guard producer.waitForLosslessConsumers(consumers.count, timeoutSeconds: 30) else {
            for c in children { c.kill() }
            let said = children.map { c in let (_, out, err) = c.finishWithErrors(); return out + err }.joined()
            throw BenchError.notAttached(bench: "transport", who: "the consumers", seconds: 30, said: said)
        }
        let timed: Int, seconds: Double
        do { (timed, seconds) = try publishFrames(into: producer, size: size, rate: rate, budget: budget) } catch {
            for c in children { c.kill(); _ = c.finishWithErrors() }
            throw error
        }
        producer.finish()
        var result = FramesrvResult(fps: Double(timed) / max(seconds, 1e-9), p50: 0, p99: 0)
        let published = Int(producer.publishedCount)
        for (i, child) in children.enumerated() {
            let (status, out, err) = child.finishWithErrors()
            guard status == 0, receivedCount(out) == published else {
                throw BenchError.incompleteRun(bench: "transport", what: "consumer \(i) (status \(status)) did not receive the "
                                                 + "\(published) frames published", said: out + err)
            }
            if i == 0, let (p50, p99) = latencyPercentiles(out) { (result.p50, result.p99) = (p50, p99) }
        }
        return result
    }

    /// Publishes one frame per slot untimed (the pool is created and each slot painted once),
    /// then `budget`'s frames or seconds (paced at `rate` if given): the timed frames and
    /// the seconds from the first timed publish to the last.
    func publishFrames(into producer: Producer, size: BenchSize, rate: Double?,
                              budget: Budget) throws -> (frames: Int, seconds: Double) {
        let format = FrameFormat(.yuv420p, width: size.width, height: size.height)
        let warmup = producer.options.slots
        var painted = [Bool](repeating: false, count: producer.options.slots)
        var description = FrameDescription()
        description.timeBase = Rational(1, 1_000_000)
        description.flags = [.keyframe]
        description.fieldOrder = .progressive
        var index = 0, start: UInt64 = 0, last: UInt64 = 0
        let paceStart = monotonicNanos()
        while true {
            if index == warmup { start = monotonicNanos(); last = start }
            let timed = index - warmup
            if timed >= 0, budget.frames.map({ timed >= $0 }) ?? (last - start >= UInt64(budget.seconds * 1e9)) { break }
            if let rate { sleepUntil(paceStart + UInt64(Double(index) * 1e9 / rate)) }
            guard var frame = try producer.reserve(format) else { continue }
            if !painted[Int(frame.slot)] {
                TestPattern.fill(frame, sequence: producer.nextSequence)
                painted[Int(frame.slot)] = true
            }
            description.pts = Int64(index)
            frame.description = description
            frame.publish()
            index += 1
            last = monotonicNanos()
        }
        // A paced run ends one interval after its last frame, as the next frame would come:
        // the end's own work (finish, teardown) is then not the last frame's wake latency.
        if let rate { sleepUntil(paceStart + UInt64(Double(index) * 1e9 / rate)) }
        return (index - warmup, Double(last - start) / 1e9)
    }

    /// The latency percentiles of a sink's --stats-json line.
    func latencyPercentiles(_ output: String) -> (Double, Double)? {
        for line in output.split(separator: "\n").reversed() where line.hasPrefix("{") {
            guard let json = StatsLine(line), let p50 = json.latencyP50, let p99 = json.latencyP99 else { continue }
            return (p50, p99)
        }
        return nil
    }

    /// The median of a round's figures (the middle one; the mean of the middle two), failed
    /// runs (NaN) left out; NaN when every run failed.
    func median(_ values: [Double]) -> Double {
        let s = values.filter { !$0.isNaN }.sorted()
        guard !s.isEmpty else { return values.isEmpty ? 0 : .nan }
        return s.count % 2 == 1 ? s[s.count / 2] : (s[s.count / 2 - 1] + s[s.count / 2]) / 2
    }

    /// `budget` rounds of `measure` for each system, alternated (round 1 of every system,
    /// then round 2, ...): each system's median, nil for a system that was not run.
    func alternated(_ budget: Budget, _ systems: [(() throws -> Double)?]) throws -> [Double?] {
        var figures = [[Double]](repeating: [], count: systems.count)
        for _ in 0..<budget.rounds {
            for (i, system) in systems.enumerated() {
                if let system { figures[i].append(try system()) }
            }
        }
        return figures.map { $0.isEmpty ? nil : median($0) }
    }
}

/// 6: how often idle processes wake up.
extension Bench {
    /// A producer waiting for consumers that do not come (`produce --wait-for 2`), then the
    /// same with one lossless sink attached, which gets no frame: wake-ups per second of each
    /// process, counted as the voluntary context switches of all its threads over 2 s.
    func idleWakeups() throws {
        print("6. idle: wake-ups per second (voluntary context switches over 2 s, of all threads and of the busiest; the limit: at most 2/s):")
        let scratch = ScratchDirectory(prefix: "framesrv-bench-idle")
        let env = ["FRAMESRV_DIR": scratch.path]
        let dir = try RuntimeDirectory(path: scratch.path)
        let producer = try Child(["produce", "--pattern", "--out", "idle", "--size", "64x64", "--wait-for", "2", "--quiet"],
                                 label: "producer", environment: env, captureErrors: true)
        var sink: Child?
        defer {
            for child in [sink, producer].compactMap({ $0 }) { child.interrupt(); _ = finish(child, within: 5) }
        }
        guard waitFor(seconds: 10, { (try? StreamSnapshot.read("idle", in: dir)) != nil }) else {
            throw BenchError.notAttached(bench: "transport", who: "the idle producer's stream", seconds: 10, said: "")
        }
        usleep(500_000)
        let alone = wakeupsPerSecond([producer.pid], seconds: 2)
        sink = try Child(["sink", "--in", "idle", "--null", "--lossless", "--quiet"], label: "sink", environment: env, captureErrors: true)
        guard waitFor(seconds: 10, { (try? StreamSnapshot.read("idle", in: dir))?.consumers.contains { $0.state == "active" } ?? false }) else {
            throw BenchError.notAttached(bench: "transport", who: "the idle sink", seconds: 10, said: "")
        }
        usleep(500_000)
        let both = wakeupsPerSecond([producer.pid, sink!.pid], seconds: 2)
        printTable([["process", "wake-ups/s", "busiest thread/s", "limit"],
                    ["producer with no consumer ('produce --pattern --wait-for 2')"] + idleCells(alone[0]),
                    ["the same producer, one consumer attached (it waits for 2)"] + idleCells(both[0]),
                    ["consumer with no frames ('sink --null --lossless')"] + idleCells(both[1])])
    }

    func idleCells(_ w: (process: Double, busiestThread: Double)) -> [String] {
        [formatDouble(w.process), formatDouble(w.busiestThread), "2"]
    }

    /// Polls `condition` every 10 ms for up to `seconds`.
    func waitFor(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = monotonicNanos() + UInt64(seconds * 1e9)
        while !condition() {
            if monotonicNanos() > deadline { return false }
            usleep(10_000)
        }
        return true
    }

    /// Each process's voluntary context switches per second over `seconds`, summed over the
    /// threads alive at both ends of the window, and those of its busiest thread.
    func wakeupsPerSecond(_ pids: [Int32], seconds: Double) -> [(process: Double, busiestThread: Double)] {
        let before = pids.map(voluntarySwitches)
        usleep(UInt32(seconds * 1e6))
        let after = pids.map(voluntarySwitches)
        return zip(before, after).map { b, a in
            let threads = a.compactMap { tid, n in b[tid].map { Double(n - $0) / seconds } }
            return (threads.reduce(0, +), threads.max() ?? 0)
        }
    }

    /// voluntary_ctxt_switches of each thread of `pid` (by thread id).
    func voluntarySwitches(_ pid: Int32) -> [String: Int] {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
        var counts: [String: Int] = [:]
        for tid in tasks {
            guard let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(tid)/status", encoding: .utf8),
                  let line = status.split(separator: "\n").first(where: { $0.hasPrefix("voluntary_ctxt_switches:") }),
                  let n = line.split(separator: "\t").last.flatMap({ Int($0.trimmed) }) else { continue }
            counts[tid] = n
        }
        return counts
    }
}
