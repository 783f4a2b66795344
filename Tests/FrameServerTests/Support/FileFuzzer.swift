import Foundation
import Glibc

// The multi-process file fuzzer's machinery (FileFuzzTests drives it): mutations of a
// stream's .ctl and pool files under a running, a stopped and a dead producer, the
// framesrv commands run against each, and the checks on every process they start.

/// Settings, from the environment so that a soak can run longer than CI.
struct FileFuzzConfiguration: Sendable {
    /// FRAMESRV_FILE_FUZZ_MUTATIONS: how many mutations (default: one pass of the catalogue, every
    /// mutation once, the producer's state and the command rotating across it; `make fuzz-files`
    /// runs 20,000, every mutation under every state and many commands).
    var mutations = FileMutation.catalogue.count
    /// FRAMESRV_FILE_FUZZ_SEED: the seed of every random choice (printed; default fixed, so CI is reproducible).
    var seed: UInt64 = 0x5EED_F11E
    /// FRAMESRV_FILE_FUZZ_WORKERS: mutations run in parallel, each worker in its own runtime directory.
    var workers = 4
    /// FRAMESRV_FILE_FUZZ_ONLY: a comma-separated list of mutation numbers to run alone (to reproduce one).
    var only: [Int]?
    /// Seconds after which a process counts as hung and is killed.
    var timeout = 20.0

    static func fromEnvironment(_ env: [String: String] = ProcessInfo.processInfo.environment) -> FileFuzzConfiguration {
        var c = FileFuzzConfiguration()
        if let n = env["FRAMESRV_FILE_FUZZ_MUTATIONS"].flatMap(Int.init), n > 0 { c.mutations = n }
        if let s = env["FRAMESRV_FILE_FUZZ_SEED"].flatMap({ UInt64($0) ?? UInt64($0.replacingOccurrences(of: "0x", with: ""), radix: 16) }) {
            c.seed = s
        }
        if let w = env["FRAMESRV_FILE_FUZZ_WORKERS"].flatMap(Int.init), w > 0 { c.workers = w }
        c.only = env["FRAMESRV_FILE_FUZZ_ONLY"].map { $0.split(separator: ",").compactMap { Int($0) } }
        return c
    }

    /// The mutation numbers to run.
    var indices: [Int] { only ?? Array(0..<mutations) }
}

/// What the stream's producer is doing when its files change.
enum FuzzState: Int, Sendable, CustomStringConvertible {
    /// Publishing: the mutation races with it.
    case running
    /// SIGSTOPped while the change is made and the monitors run, then SIGCONT: it meets the change.
    case stopped
    /// SIGKILLed: its files stay behind.
    case dead

    var description: String { ["running", "stopped", "dead"][rawValue] }
}

/// One framesrv command the fuzzer runs against the damaged stream.
struct FuzzCommand: Sendable {
    let label: String
    /// Arguments, given the stream's name, a directory for output files, and whether the
    /// command attaches before the mutation (a sink then holds each frame 5 ms and reads
    /// more frames, so that frames published before the change are still to be read after it).
    let arguments: @Sendable (_ stream: String, _ out: String, _ early: Bool) -> [String]
    /// A consumer (sink, snapshot): started after the monitors, while a stopped producer resumes.
    let consumes: Bool
    /// A command whose output must list every healthy stream of the directory.
    let lists: Bool

    /// A sink: with a live producer it attaches before the mutation and meets it in frames
    /// already published.
    var attachesEarly: Bool { label.hasPrefix("sink ") }

    static func monitor(_ label: String, lists: Bool = false, _ args: @escaping @Sendable (String) -> [String]) -> FuzzCommand {
        FuzzCommand(label: label, arguments: { s, _, _ in args(s) }, consumes: false, lists: lists)
    }

    static func sink(_ label: String, _ output: @escaping @Sendable (String) -> [String]) -> FuzzCommand {
        FuzzCommand(label: "sink " + label, arguments: { s, out, early in
            ["sink", "--in", s] + output(out) + ["--frames", early ? "12" : "3", "--wait", "1", "--no-reattach", "--quiet"]
                + (early ? ["--hold-us", "5000"] : [])
        }, consumes: true, lists: false)
    }

    /// Every command, in rotation order.
    static let all: [FuzzCommand] = [
        .monitor("ls", lists: true) { _ in ["ls"] },
        .monitor("ls --json", lists: true) { _ in ["ls", "--json"] },
        .monitor("top -b -n 1", lists: true) { _ in ["top", "-b", "-n", "1"] },
        .monitor("top --json -n 1", lists: true) { _ in ["top", "--json", "-n", "1"] },
        .monitor("inspect") { ["inspect", $0] },
        .monitor("inspect --json") { ["inspect", $0, "--json"] },
        FuzzCommand(label: "inspect --snapshot", arguments: { s, out, _ in ["inspect", s, "--snapshot", out + "/snap.png", "--wait", "1"] },
                    consumes: true, lists: false),
        .sink("--null") { _ in ["--null"] },
        .sink("--null --live") { _ in ["--null", "--live"] },
        .sink("--null --verify") { _ in ["--null", "--verify"] },
        .sink("--framemd5") { ["--framemd5", $0 + "/out.framemd5"] },
        .sink("--y4m") { ["--y4m", $0 + "/out.y4m"] },
        .sink("--raw") { ["--raw", $0 + "/out.raw"] },
        .sink("--record") { ["--record", $0 + "/out.mkv"] },
        .monitor("clean") { _ in ["clean"] },
    ]

    /// The command mutation `index` runs (one: each framesrv process costs about 0.1 s of CPU
    /// to start, so the fuzzer's budget is counted in processes; the producer and an attached
    /// sink are processes under test too). Within the first pass over the catalogue every
    /// command meets every state; later passes give each mutation the other commands in turn.
    static func rotation(_ index: Int) -> FuzzCommand {
        let n = all.count, size = FileMutation.catalogue.count
        // A step that is coprime with n, so that a mutation's command cycles through all n.
        let step = (0...).first { gcd(size + $0, n) == 1 }!
        return all[(index + step * (index / size)) % n]
    }

    /// The producer's state for mutation `index`: blocks of `all.count` mutations take turns,
    /// and each pass over the catalogue shifts them by one.
    static func state(_ index: Int) -> FuzzState {
        let size = FileMutation.catalogue.count
        return FuzzState(rawValue: ((index % size) / all.count + index / size) % 3)!
    }
}

func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }

/// One thing that went wrong with one process.
struct FuzzFailure: Sendable {
    let seed: UInt64
    let index: Int
    let state: FuzzState
    let mutation: String
    let applied: String
    let command: String
    let problem: String
    let stderr: String

    /// A signal or a hang (else a broken rule: error lines, listing, delivery).
    var isCrash: Bool { problem.hasPrefix("SIG") || problem.hasPrefix("signal") || problem == "hang" }

    /// What makes two failures the same bug: for a crash, command, signal and mutation (not
    /// the run's numbers); for a broken rule, command and rule (one message, many mutations).
    var signature: String { isCrash ? "\(command) | \(problem) | \(mutation)" : "\(command) | \(problem)" }

    var reproduction: String {
        "FRAMESRV_FILE_FUZZ_SEED=\(seed) FRAMESRV_FILE_FUZZ_ONLY=\(index) (\(state): \(applied))"
    }
}

/// A runtime directory with one healthy stream that must keep working while the fuzzer
/// damages other streams next to it, and the processes of one mutation at a time.
final class FuzzWorker: @unchecked Sendable {
    let config: FileFuzzConfiguration
    let scratch: Scratch
    let out: String
    let failures: Locked<[FuzzFailure]>
    let healthy = "steady"
    private let healthyProducer: Spawned
    private let healthySink: Spawned
    private let healthyLog: String
    /// `framesrv web` on this worker's directory, asked after every mutation.
    private let web: FuzzWeb
    /// The files of a stream whose producer (and one consumer) were SIGKILLed.
    private var deadTemplate: [String: [UInt8]] = [:]
    private let deadName = "gone"

    init(config: FileFuzzConfiguration, failures: Locked<[FuzzFailure]>) throws {
        self.config = config
        self.failures = failures
        scratch = try Scratch()
        out = scratch.path + "/out"
        mkdir(out, 0o700)
        healthyLog = scratch.path + "/steady.seqlog"
        // Their output outside `out`, which is emptied after every mutation.
        let dir = scratch.path
        func spawn(_ args: [String]) throws -> Spawned {
            try Spawned(framesrvPath, args, environment: ["FRAMESRV_DIR": dir], logDirectory: dir)
        }
        healthyProducer = try spawn(["produce", "--pattern", "--out", healthy, "--size", "64x48", "--rate", "30", "--slots", "8", "--quiet"])
        healthySink = try spawn(["sink", "--in", healthy, "--null", "--verify", "--lossless", "--seq-log", healthyLog,
                                 "--stats-json", "--name", "steady-verify"])
        let log = healthyLog
        guard eventually(timeout: 30, { (regularFileSize(log) ?? 0) > 0 }) else { throw TestFailure("the healthy stream delivers no frame") }
        web = try FuzzWeb(directory: dir, listing: healthy)
        try makeDeadTemplate()
    }

    /// A stream left behind by a SIGKILLed producer, with a SIGKILLed consumer's entry in it.
    private func makeDeadTemplate() throws {
        let files = StreamFiles(directory: scratch.path, name: deadName)
        let producer = try spawn(["produce", "--pattern", "--out", deadName, "--size", "64x48", "--rate", "200", "--slots", "4", "--quiet"])
        let holder = try spawn(["sink", "--in", deadName, "--null", "--lossless", "--hold-us", "10000000", "--quiet"])
        defer { for p in [producer, holder] { p.kill(); p.removeLogs() } }
        guard eventually(timeout: 30, { (files.published ?? 0) >= 3 && files.deliveringConsumers >= 1 }) else {
            throw TestFailure("the stream for the dead template did not start")
        }
        producer.kill()
        holder.kill()
        deadTemplate = files.save()
    }


    /// Frames the healthy stream's verifying sink has logged (its log only grows).
    func healthyFrames() -> Int { regularFileSize(healthyLog) ?? 0 }

    func spawn(_ args: [String]) throws -> Spawned {
        try Spawned(framesrvPath, args, environment: ["FRAMESRV_DIR": scratch.path], logDirectory: out)
    }

    /// The processes of one mutation against a live producer.
    private struct Victim {
        var producer: Spawned?
        /// A sink attached before the change (for changes that reach consumers).
        var attached: Spawned?
        /// The mutation's own command, when it is a sink attached before the change.
        var early: Spawned?
        var all: [Spawned] { [producer, attached, early].compactMap { $0 } }
    }

    /// Runs mutation `index`: the mutation, its command, and every check.
    func run(_ index: Int) {
        let mutation = FileMutation.catalogue[index % FileMutation.catalogue.count]
        let state = FuzzCommand.state(index), command = FuzzCommand.rotation(index)
        var rng = SplitMix64(seed: config.seed ^ (UInt64(index) &* 0x9E37_79B9_7F4A_7C15))
        var record = FuzzRecord(seed: config.seed, index: index, state: state, mutation: mutation.symbol)
        defer { finish(&record) }
        let name = state == .dead ? deadName : "v\(index)"
        let files = StreamFiles(directory: scratch.path, name: name)
        var victim = Victim()
        defer { for p in victim.all { p.kill(); p.removeLogs() }; files.remove() }
        do {
            if state == .dead {
                files.restore(deadTemplate)
            } else {
                try start(&victim, name, files, mutation, command, &record)
                guard victim.producer != nil else { return }
            }
            record.healthyBefore = healthyFrames()
            record.applied = mutation.apply(to: files, rng: &rng)
            if state == .running, mutation.isFrameHeader {
                // Race the producer's own header writes for a while, so consumers read some.
                for _ in 0..<25 { usleep(2_000); _ = mutation.apply(to: files, rng: &rng) }
            }
            try runCommand(command, on: name, victim, &record)
            if let producer = victim.producer {
                // Let the producer meet the change (a few frames, or half a second), then stop it.
                let before = files.published ?? 0
                _ = eventually(timeout: 0.5) { (files.published ?? 0) >= before &+ 3 }
                producer.signal(SIGINT)
                record.check(producer, as: state == .stopped ? "produce (resumed)" : "produce (running)", timeout: config.timeout)
            }
            if let attached = victim.attached { record.check(attached, as: "sink --null (attached before)", timeout: config.timeout) }
        } catch {
            record.setupFailed("\(error)")
        }
    }

    /// Starts the producer, the consumers that attach before the change, and (stopped state)
    /// stops the producer. Leaves `victim.producer` nil after a setup failure.
    private func start(_ victim: inout Victim, _ name: String, _ files: StreamFiles, _ mutation: FileMutation,
                       _ command: FuzzCommand, _ record: inout FuzzRecord) throws {
        // An audio mutation meets an audio stream: a sine at 5x real time (about 235 frames/s).
        let source = mutation.isAudio ? ["-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000", "--readrate", "5"]
                                      : ["--pattern", "--size", "64x48", "--rate", "250"]
        let producer = try spawn(["produce"] + source + ["--out", name, "--slots", "4", "--quiet"])
        guard eventually(timeout: config.timeout, { (files.published ?? 0) >= 3 }) else {
            producer.kill()
            producer.removeLogs()
            return record.setupFailed("the producer published no frame")
        }
        victim.producer = producer
        // (A command that is a sink attaches before the change itself: no second one then.)
        if mutation.reachesConsumers && !command.attachesEarly {
            victim.attached = try spawn(["sink", "--in", name, "--null", "--no-reattach", "--quiet", "--name", "attached"])
        }
        if command.attachesEarly { victim.early = try spawn(command.arguments(name, out, true)) }
        let expected = (victim.attached == nil ? 0 : 1) + (victim.early == nil ? 0 : 1)
        // Each reading frames, so that frames published before the change are still to be
        // read after it. Not a failure if one never does: an early sink may fail on its own.
        _ = eventually(timeout: 5) { files.deliveringConsumers >= expected }
        if record.state == .stopped {
            producer.signal(SIGSTOP)
            _ = eventually(timeout: 5) { procFile("/proc/\(producer.pid)/stat").contains(") T ") }
        }
    }

    /// Runs the mutation's command (a monitor to completion, then the web routes, then
    /// consumers while a stopped producer resumes) and checks it.
    private func runCommand(_ command: FuzzCommand, on name: String, _ victim: Victim, _ record: inout FuzzRecord) throws {
        if !command.consumes {
            let p = try spawn(command.arguments(name, out, false))
            record.check(p, as: command.label, timeout: config.timeout, mustList: command.lists ? healthy : nil)
        }
        web.check(name, &record)
        let consumer = command.consumes && victim.early == nil ? try spawn(command.arguments(name, out, false)) : nil
        if record.state == .stopped { victim.producer?.signal(SIGCONT) }
        if let consumer { record.check(consumer, as: command.label, timeout: config.timeout) }
        if let early = victim.early { record.check(early, as: command.label + " (attached before)", timeout: config.timeout) }
    }

    /// Checks that the healthy stream still delivers, then files the mutation's failures.
    private func finish(_ record: inout FuzzRecord) {
        if let before = record.healthyBefore, !eventually(timeout: config.timeout, { self.healthyFrames() > before }) {
            record.add(command: "sink --null --verify (healthy stream)", problem: "no frame delivered after the mutation", stderr: "")
        }
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: out)) ?? [] { unlink(out + "/" + entry) }
        let found = record.failures
        failures.withLock { $0 += found }
    }

    /// Ends the healthy stream and checks that its verifying sink saw every frame intact.
    func close() {
        healthyProducer.signal(SIGINT)
        var record = FuzzRecord(seed: config.seed, index: -1, state: .running, mutation: "none (end of run)")
        web.close(&record)
        record.check(healthyProducer, as: "produce (healthy stream)", timeout: config.timeout)
        let stdout = record.check(healthySink, as: "sink --null --verify (healthy stream)", timeout: config.timeout)
        let log = readSeqLog(healthyLog)
        let stats = SinkStats.parse(stdout)
        if !log.corrupt.isEmpty || stats == nil || stats!.corrupt != 0 || stats!.received == 0 {
            record.add(command: "sink --null --verify (healthy stream)",
                       problem: "corrupt or no frames: \(log.corrupt.prefix(5)), \(stdout)", stderr: "")
        }
        let found = record.failures
        failures.withLock { $0 += found }
    }
}

/// What one mutation found.
struct FuzzRecord {
    let seed: UInt64
    let index: Int
    let state: FuzzState
    let mutation: String
    var applied = "(not applied)"
    var healthyBefore: Int?
    var failures: [FuzzFailure] = []

    mutating func add(command: String, problem: String, stderr: String) {
        failures.append(FuzzFailure(seed: seed, index: index, state: state, mutation: mutation, applied: applied,
                                    command: command, problem: problem, stderr: stderr))
    }

    mutating func setupFailed(_ why: String) { add(command: "(fuzzer setup)", problem: why, stderr: "") }

    /// Waits for `p` and records every rule it broke: ended by a signal, hung, more than one
    /// line on stderr, or (a listing command) a healthy stream missing from its output.
    /// Returns its standard output.
    @discardableResult
    mutating func check(_ p: Spawned, as label: String, timeout: Double, mustList healthy: String? = nil) -> String {
        defer { p.removeLogs() }
        let outcome = p.outcome(timeout: timeout)
        let stdout = p.stdout, stderr = p.stderr
        switch outcome {
        case .signaled, .hung:
            // A crash's backtrace is not counted as error lines: the signal is the failure.
            add(command: label, problem: "\(outcome)", stderr: stderr)
            return stdout
        case .exited(let status):
            let lines = stderr.split(separator: "\n").filter { !$0.allSatisfy(\.isWhitespace) }
            if lines.count > 1 { add(command: label, problem: "more than one line on stderr", stderr: stderr) }
            guard let healthy else { return stdout }
            if status != 0 {
                add(command: label, problem: "exit status \(status): healthy stream '\(healthy)' not listed", stderr: stderr)
            } else if !stdout.contains(healthy) {
                add(command: label, problem: "healthy stream '\(healthy)' not listed", stderr: stderr)
            }
            return stdout
        }
    }
}

/// The failures grouped by signature (crashes first), each with its count, the producer
/// states it happened in and one way to reproduce it.
func fileFuzzSummary(_ failures: [FuzzFailure]) -> String {
    let groups = Dictionary(grouping: failures, by: \.signature)
        .sorted { ($0.value[0].isCrash ? 0 : 1, $0.key) < ($1.value[0].isCrash ? 0 : 1, $1.key) }
    return groups.map { signature, all in
        let first = all.min { $0.index < $1.index }!
        let states = Set(all.map(\.state.description)).sorted().joined(separator: ",")
        let detail = crashSite(first.stderr) ?? first.stderr.split(separator: "\n").prefix(2).joined(separator: " / ")
        let mutations = first.isCrash ? "" : " (\(Set(all.map(\.mutation)).count) mutations, e.g. \(first.mutation))"
        return "\(all.count)x [\(states)] \(signature)\(mutations)\n    e.g. \(first.reproduction)"
            + (detail.isEmpty ? "" : "\n    stderr: \(detail.prefix(300))")
    }.joined(separator: "\n")
}

/// Where a Swift backtrace on stderr says the process crashed: the fatal error message and
/// the first frame in framesrv's own code, as "function at File.swift:line".
func crashSite(_ stderr: String) -> String? {
    let lines = stderr.split(separator: "\n")
    guard let crashed = lines.firstIndex(where: { $0.contains(" crashed:") }) else { return nil }
    let fatal = lines.first { $0.contains("Fatal error") }.map { String($0) + "; " } ?? ""
    guard let frame = lines[crashed...].first(where: { $0.contains(" in framesrv at ") }),
          let inRange = frame.range(of: " in framesrv at ") else { return fatal.isEmpty ? nil : fatal }
    let function = frame[..<inRange.lowerBound].split(separator: " ", omittingEmptySubsequences: true).dropFirst(2)
        .filter { !$0.hasPrefix("0x") && !$0.hasPrefix("[") }.joined(separator: " ")
    let file = frame[inRange.upperBound...].split(separator: "/").last ?? ""
    return fatal + function + " at " + file
}
