import Foundation
import Testing

// The C and Python clients as test programs: libframesrv's tools (clients/c/build, built by
// `make -C clients/c`) and the Python package's `python -m framesrv` (installed into
// .build/python-venv by scripts/python-env), started in a Scratch runtime directory next to
// the Swift `framesrv produce` and `framesrv sink`. Each is built or installed once per run.

/// A language the stream can be produced or consumed in.
enum ClientLanguage: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case swift, c, python
    var testDescription: String { rawValue }
}

enum ClientTools {
    private static let cache = Locked<[String: Result<String, TestFailure>]>([:])

    /// Runs `make` (or a script) once per test run; the result (a path, or the failure) is kept.
    private static func once(_ key: String, _ body: () throws(TestFailure) -> String) throws -> String {
        try cache.withLock { (built: inout [String: Result<String, TestFailure>]) throws(TestFailure) -> String in
            if built[key] == nil {
                do throws(TestFailure) { built[key] = .success(try body()) } catch { built[key] = .failure(error) }
            }
            return try built[key]!.get()
        }
    }

    /// Runs `argv` in `directory` (default: the repository) to completion: status, standard
    /// output, standard error (-1 after `timeout` seconds, the process killed). A Spawned
    /// child, so a test suite it runs can stop its own children with SIGINT or SIGTERM.
    static func run(_ argv: [String], timeout: Double = 600, environment: [String: String] = [:],
                    directory: String = repositoryRoot.path) throws(TestFailure) -> (status: Int32, stdout: String, stderr: String) {
        let r = try Spawned.run(argv, timeout: timeout, environment: environment, directory: directory)
        return (r.status, String(decoding: r.stdout, as: UTF8.self), r.stderr)
    }

    /// clients/c/build, after `make -C clients/c` (libframesrv and its tools).
    static func cBuildDirectory() throws -> String {
        try once("c") { () throws(TestFailure) -> String in
            let make = try run(["make", "-s", "-C", "clients/c"])
            guard make.status == 0 else {
                throw TestFailure("make -C clients/c failed (status \(make.status)):\n\(make.stdout)\n\(make.stderr)")
            }
            return repositoryRoot.appendingPathComponent("clients/c/build").path
        }
    }

    /// libframesrv's stand-in CUDA driver (clients/c/tests/fakecuda), for FRAMESRV_LIBCUDA: a
    /// CUDA stream's CPU-side paths on a machine without a GPU.
    static func fakeCUDA() throws -> String {
        let directory = try cBuildDirectory()
        return try once("fakecuda") { () throws(TestFailure) -> String in
            let make = try run(["make", "-s", "-C", "clients/c", "build/tests/libfakecuda.so"])
            guard make.status == 0 else { throw TestFailure("make -C clients/c build/tests/libfakecuda.so failed:\n\(make.stderr)") }
            return directory + "/tests/libfakecuda.so"
        }
    }

    /// clients/c/build/framesrv-consume or framesrv-produce.
    static func cTool(_ name: String) throws -> String {
        let path = try cBuildDirectory() + "/" + name
        try #require(FileManager.default.isExecutableFile(atPath: path), "make -C clients/c did not build \(path)")
        return path
    }

    /// examples/c/NAME.c compiled against the static libframesrv in clients/c/build, into
    /// .build/client-examples/NAME (examples/c's own pkg-config build is ClientPackagingTests').
    static func cExample(_ name: String) throws -> String {
        let library = try cBuildDirectory()
        return try once("example-\(name)") { () throws(TestFailure) -> String in
            let out = repositoryRoot.appendingPathComponent(".build/client-examples").path
            try? FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
            let cc = try run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-I", "clients/c/include",
                              "examples/c/\(name).c", library + "/libframesrv.a", "-lzmq", "-lpthread", "-o", out + "/" + name])
            guard cc.status == 0 else { throw TestFailure("cc examples/c/\(name).c failed:\n\(cc.stderr)") }
            return out + "/" + name
        }
    }

    /// The venv's python with the framesrv package installed (scripts/python-env).
    static func python() throws -> String { try projectPython.get() }
}

/// What a consumer reported: its summary and the sequence numbers it logged, in order.
struct ConsumerReport: CustomStringConvertible {
    var received: UInt64, first: UInt64, last: UInt64, corrupt: UInt64
    var seqs: [UInt64]
    /// The sequence numbers per attachment (one run per producer the consumer attached to).
    var runs: [[UInt64]]

    var description: String { "received \(received), first \(first), last \(last), corrupt \(corrupt), \(runs.count) attachment(s)" }
}

/// A C or Python client's summary line: `<prefix>: received N frames, first F, last L, corrupt C`
/// (with --audio, `, samples S` after it).
func parseClientSummary(_ output: String, prefix: String) -> (received: UInt64, first: UInt64, last: UInt64, corrupt: UInt64)? {
    for line in output.split(separator: "\n").reversed() where line.hasPrefix("\(prefix): received ") {
        let numbers = line.split(whereSeparator: { !$0.isNumber }).compactMap { UInt64($0) }
        guard numbers.count == 4 || (numbers.count == 5 && line.contains(", samples ")) else { continue }
        return (numbers[0], numbers[1], numbers[2], numbers[3])
    }
    return nil
}

/// A C or Python client's --seq-log (one sequence number per line), split into runs where the
/// numbers start again (a new producer starts at 1).
func readClientSeqLog(_ path: String) -> [[UInt64]] {
    splitRuns(procFile(path).split(separator: "\n").compactMap { UInt64($0.trimmingCharacters(in: .whitespaces)) })
}

/// Sequence numbers split where they do not increase (each run one producer's frames).
func splitRuns(_ seqs: [UInt64]) -> [[UInt64]] {
    seqs.reduce(into: [[UInt64]]()) { runs, n in
        if let last = runs.last?.last, n > last { runs[runs.count - 1].append(n) } else { runs.append([n]) }
    }
}

/// A consumer process of one language with its sequence log.
struct ClientConsumer {
    let language: ClientLanguage
    let process: Spawned
    let seqLog: String

    /// Starts a consumer of `stream` that verifies the test pattern and logs every sequence number.
    /// `extra`: more options of the C/Python tools (`--count N`, ...). The Swift sink waits
    /// for the next producer after its producer died only with `reattach`.
    static func start(_ language: ClientLanguage, stream: String, live: Bool = false, reattach: Bool = false,
                      extra: [String] = [], _ scratch: Scratch) throws -> ClientConsumer {
        let log = scratch.file("\(language)-\(UUID().uuidString.prefix(6)).seq")
        let process: Spawned
        switch language {
        case .swift:
            process = try scratch.start(["sink", "--in", stream, "--null", live ? "--live" : "--lossless", "--verify",
                                         "--seq-log", log, "--stats-json", "--quiet", "--wait", "30"] + (reattach ? [] : ["--no-reattach"]))
        case .c:
            let args = ["--in", stream, "--verify-pattern", "--seq-log", log, "--wait", "30"] + (live ? ["--live"] : []) + extra
            process = try scratch.start(args, executable: try ClientTools.cTool("framesrv-consume"))
        case .python:
            let args = ["-m", "framesrv", "consume", "--in", stream, "--verify-pattern", "--seq-log", log, "--wait", "30"]
                + (live ? ["--live"] : []) + extra
            process = try scratch.start(args, executable: try ClientTools.python())
        }
        return ClientConsumer(language: language, process: process, seqLog: log)
    }

    /// Its summary and log, once it has exited.
    func report() throws -> ConsumerReport {
        switch language {
        case .swift:
            let stats = try #require(SinkStats.parse(process.stdout), "the Swift sink printed no statistics: \(process.stdout)")
            let (runs, corrupt) = readSeqLog(seqLog)
            return ConsumerReport(received: UInt64(stats.received), first: stats.first, last: stats.last,
                                  corrupt: UInt64(max(stats.corrupt, corrupt.count)), seqs: runs.flatMap { $0 }, runs: runs)
        case .c, .python:
            let prefix = language == .c ? "c" : "py"
            let s = try #require(parseClientSummary(process.stdout, prefix: prefix),
                                 "the \(language) consumer printed no summary: \(process.stdout)\n\(process.stderr)")
            let runs = readClientSeqLog(seqLog).filter { !$0.isEmpty }
            return ConsumerReport(received: s.received, first: s.first, last: s.last, corrupt: s.corrupt,
                                  seqs: runs.flatMap { $0 }, runs: runs)
        }
    }
}

/// Starts a producer of the test pattern in `language` (the same options for all three).
func startPatternProducer(_ language: ClientLanguage, stream: String, size: String = "320x240", pixFmt: String = "yuv420p",
                          frames: Int, rate: String = "max", slots: Int = 4, waitFor: Int = 1,
                          _ scratch: Scratch) throws -> Spawned {
    let common = ["--out", stream, "--size", size, "--pix-fmt", pixFmt, "--frames", "\(frames)", "--rate", rate,
                  "--slots", "\(slots)", "--wait-for", "\(waitFor)"]
    switch language {
    case .swift: return try scratch.start(["produce", "--pattern", "--quiet"] + common)
    case .c: return try scratch.start(common, executable: try ClientTools.cTool("framesrv-produce"))
    case .python: return try scratch.start(["-m", "framesrv", "produce"] + common, executable: try ClientTools.python())
    }
}

/// The published count in a producer's closing line (`c: published N frames`, `py: ...`).
func parsePublished(_ output: String, prefix: String) -> Int? {
    for line in output.split(separator: "\n").reversed() where line.hasPrefix("\(prefix): published ") {
        return line.split(separator: " ").dropFirst(2).first.flatMap { Int($0) }
    }
    return nil
}

/// Waits for a consumer, then its producer: a consumer that failed first stops the producer
/// (which would otherwise wait for it until its timeout). Both exit statuses.
func finishPair(producer: Spawned, consumer: Spawned) -> (producer: Int32, consumer: Int32) {
    let consumerStatus = consumer.wait(timeout: 90)
    if consumerStatus != 0 { producer.kill() }
    return (producer.wait(timeout: 30), consumerStatus)
}
