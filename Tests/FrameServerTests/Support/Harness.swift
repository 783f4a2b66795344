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
    private var processes: [Proc] = []

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
               directory: String? = nil) throws -> Proc {
        let p = try Proc(executable: executable, args: args,
                         environment: ["FRAMESRV_DIR": path].merging(environment) { $1 }, logDirectory: path, directory: directory)
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

/// A child process with its output captured to files (no pipe can fill up and block it).
final class Proc: @unchecked Sendable {
    let process = Process()
    private let outPath: String
    private let errPath: String

    init(executable: String, args: [String], environment: [String: String], logDirectory: String,
         directory: String? = nil) throws {
        let id = UUID().uuidString.prefix(8)
        outPath = "\(logDirectory)/.out-\(id)"
        errPath = "\(logDirectory)/.err-\(id)"
        _ = FileManager.default.createFile(atPath: outPath, contents: nil)
        _ = FileManager.default.createFile(atPath: errPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = args
        process.environment = childEnvironment(environment)
        if let directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        process.standardInput = FileHandle.nullDevice
        let out = FileHandle(forWritingAtPath: outPath), err = FileHandle(forWritingAtPath: errPath)
        process.standardOutput = out
        process.standardError = err
        // The child has its own copies. Ours must not stay open for as long as this Proc
        // lives: hundreds of them pile up in the test process, and past ~1,300 open
        // descriptors Foundation's Process.run() crashes (swift-corelibs-foundation PR 5472:
        // it reads 256 bytes of each /proc/self/fd entry, past the end of readdir's buffer).
        defer { try? out?.close(); try? err?.close() }
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }
    var stdout: String { (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "" }

    /// Waits for exit; SIGKILLs the process and returns -1 if it runs past `timeout` seconds.
    @discardableResult
    func wait(timeout: Double = 60) -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(5_000) }
        if process.isRunning {
            kill()
            return -1
        }
        return process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    }

    func signal(_ sig: Int32) { if process.isRunning { Glibc.kill(pid, sig) } }

    func kill() {
        guard process.isRunning else { return }
        Glibc.kill(pid, SIGKILL)
        process.waitUntilExit()
    }

    /// CPU time (user + system) the process has used so far, in clock ticks.
    var cpuTicks: Int64 {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return -1 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
        return (Int64(fields[11]) ?? 0) + (Int64(fields[12]) ?? 0)
    }
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
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/bin/sh")
    p.arguments = ["-c", command]
    p.environment = childEnvironment(["FRAMESRV_DIR": scratch.path])
    let errPath = scratch.file(".sh-err-\(UUID().uuidString.prefix(8))")
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    let out = Pipe()
    p.standardInput = FileHandle.nullDevice
    p.standardOutput = out
    p.standardError = FileHandle(forWritingAtPath: errPath)
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return (p.terminationStatus, data, (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "")
}
