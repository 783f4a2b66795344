import Foundation
import FrameServer
import Glibc
import Testing

// Real processes, real ZeroMQ, real shared memory: the harness starts the framesrv
// executable that SwiftPM built next to this test bundle, each test in its own runtime
// directory (FRAMESRV_DIR), and kills whatever it started.

/// The `framesrv` executable built alongside the tests.
let framesrvPath: String = {
    var buf = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buf, buf.count - 1)
    let exe = String(decoding: buf[..<max(0, n)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
    // The test binary lives in .build/<triple>/<config>/framesrvPackageTests.xctest (a file on Linux).
    while !FileManager.default.isExecutableFile(atPath: dir.appendingPathComponent("framesrv").path), dir.path != "/" {
        dir = dir.deletingLastPathComponent()
    }
    return dir.appendingPathComponent("framesrv").path
}()

/// The repository's root (for protocol/ and clients/).
let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A private runtime directory (a TemporaryFolder), removed with its contents at the end,
/// after every process started in it is killed.
final class Scratch: @unchecked Sendable {
    private let folder = TemporaryFolder("framesrv-test")
    let directory: RuntimeDirectory
    private var processes: [Spawned] = []

    var path: String { folder.path }

    init() throws {
        directory = try RuntimeDirectory(path: folder.path)
    }

    deinit {
        for p in processes { p.kill() }
    }

    /// Starts `framesrv ARGS` with FRAMESRV_DIR set to this directory (in `directory`, else the test's).
    @discardableResult
    func start(_ args: [String], executable: String = framesrvPath, environment: [String: String] = [:],
               directory: String? = nil) throws -> Spawned {
        let p = try Spawned(executable, args, environment: ["FRAMESRV_DIR": path].merging(environment) { $1 }, logDirectory: path,
                            directory: directory)
        processes.append(p)
        return p
    }

    /// Runs `framesrv ARGS` to completion (with a timeout) and returns status and output.
    func run(_ args: [String], timeout: Double = 60) throws -> (status: Int32, stdout: String, stderr: String) {
        let p = try start(args)
        let status = p.wait(timeout: timeout)
        return (status, p.stdout, p.stderr)
    }

    func file(_ name: String) -> String { folder.file(name) }

    /// The stream's shared statistics, or nil if it does not exist (yet).
    func snapshot(_ stream: String) -> StreamSnapshot? { try? StreamSnapshot.read(stream, in: directory) }
}

/// How a child process ended.
enum ProcessOutcome: Equatable, Sendable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)
    case hung

    var description: String {
        switch self {
        case .exited(let status): "exit \(status)"
        case .signaled(let signal): signalName(signal)
        case .hung: "hang"
        }
    }
}

/// SIGSEGV, SIGBUS, ... for a signal number.
func signalName(_ signal: Int32) -> String {
    let names: [Int32: String] = [SIGILL: "SIGILL", SIGTRAP: "SIGTRAP", SIGABRT: "SIGABRT", SIGBUS: "SIGBUS", SIGFPE: "SIGFPE",
                                  SIGKILL: "SIGKILL", SIGSEGV: "SIGSEGV", SIGPIPE: "SIGPIPE", SIGTERM: "SIGTERM", SIGINT: "SIGINT"]
    return names[signal] ?? "signal \(signal)"
}

/// A value shared between threads behind a lock.
final class Locked<Value>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()

    init(_ value: Value) { self.value = value }

    func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}

/// Waits until `condition` holds, checking every 2 ms; false if `timeout` seconds pass first.
/// (A deadline on an observable condition, never a sleep standing in for synchronisation.)
func eventually(timeout: Double = 30, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        usleep(2_000)
    }
    return condition()
}

/// Parses the `--stats-json` line a sink prints.
struct SinkStats: Decodable {
    let received: Int
    let first: UInt64
    let last: UInt64
    let missed: UInt64
    let corrupt: Int
    let latency_p50_us: Double

    static func parse(_ output: String) -> SinkStats? {
        for line in output.split(separator: "\n").reversed() where line.hasPrefix("{") {
            if let s = try? JSONDecoder().decode(SinkStats.self, from: Data(line.utf8)) { return s }
        }
        return nil
    }
}

/// Reads a sink's --seq-log: the 'frame N' sequence numbers, split at each 'attach'.
func readSeqLog(_ path: String) -> (attachments: [[UInt64]], corrupt: [UInt64]) {
    let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
    var runs: [[UInt64]] = []
    var corrupt: [UInt64] = []
    for line in text.split(separator: "\n") {
        let parts = line.split(separator: " ")
        guard parts.count == 2 else { continue }
        switch parts[0] {
        case "attach": runs.append([])
        case "frame": if let n = UInt64(parts[1]) { if runs.isEmpty { runs.append([]) }; runs[runs.count - 1].append(n) }
        case "corrupt": if let n = UInt64(parts[1]) { corrupt.append(n) }
        default: break
        }
    }
    return (runs, corrupt)
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// Reserves a slot or fails the test (`#require` cannot hold a noncopyable value).
func reserve(_ producer: Producer, _ format: FrameFormat) throws -> WritableFrame {
    guard let frame = try producer.reserve(format) else { throw TestFailure("no slot for \(format)") }
    return frame
}

/// Reserves a frame of `format`, fills it with the test pattern of the sequence number it
/// will carry, and publishes it.
func publishPattern(_ producer: Producer, _ format: FrameFormat) throws {
    let frame = try reserve(producer, format)
    TestPattern.fill(frame, sequence: producer.nextSequence)
    frame.publish()
}

/// A producer of `stream` with `slots` slots in `scratch`, and one lossless consumer it has admitted.
func producerAndConsumer(_ stream: String, slots: Int, _ scratch: Scratch) throws -> (Producer, Consumer) {
    var options = ProducerOptions()
    options.slots = slots
    let producer = try Producer(stream: stream, options: options, directory: scratch.directory)
    let consumer = try Consumer(stream: stream, directory: scratch.directory)
    try consumer.attach()
    guard producer.waitForLosslessConsumers(1, timeoutSeconds: 10) else {
        producer.close()
        throw TestFailure("the consumer of \(stream) was not admitted")
    }
    return (producer, consumer)
}

/// The next frame, or a test failure if the stream ended.
func nextFrame(_ consumer: Consumer) throws -> Frame {
    guard let frame = try consumer.next() else { throw TestFailure("stream ended early") }
    return frame
}

/// Whether `next()` reports the end of the stream.
func reachesEnd(_ consumer: Consumer) throws -> Bool {
    switch try consumer.next() {
    case .none: return true
    case .some(let frame): frame.release(); return false
    }
}

/// Reads a /proc file completely (their reported size is 0, so read until end of file).
func procFile(_ path: String) -> String {
    guard let handle = FileHandle(forReadingAtPath: path) else { return "" }
    defer { try? handle.close() }
    return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
}

/// Runs `command` with /bin/sh (FRAMESRV_DIR set to the scratch directory): status,
/// standard output as bytes, standard error as text.
@discardableResult
func shell(_ command: String, _ scratch: Scratch) throws -> (status: Int32, stdout: Data, stderr: String) {
    // The oracle must be there: its absence fails with the setup step that installs it.
    if let oracle = [RequiredTool.ffmpeg, .ffprobe].first(where: { command.hasPrefix($0.name + " ") }) { _ = try oracle.path() }
    return try Spawned.run(["/bin/sh", "-c", command], environment: ["FRAMESRV_DIR": scratch.path])
}
