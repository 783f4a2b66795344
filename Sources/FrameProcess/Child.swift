import Foundation
import FrameServer
import Glibc

/// This program's own executable, for commands that run stages as child processes.
public let selfExecutable: String = {
    var buf = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buf, buf.count - 1)
    return n > 0 ? String(decoding: buf[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
}()

/// A child process whose standard output (and, if asked, standard error) is collected.
///
/// Each child leads its own process group (Foundation's `Process` starts it so): a
/// terminal's Ctrl-C reaches the parent only, which decides what each child gets, and
/// `interrupt()` and `kill()` reach a program's own children too (an `sh -c` stage).
public final class Child {
    public let process = Process()
    private let output = Pipe()
    private let errors: Pipe?
    private let errorText = ErrorCollector()
    private let capturesOutput: Bool
    public let label: String

    /// Starts `framesrv ARGS` (or another program with `executable`) with `environment` added.
    /// `errorLines` (with `captureErrors`): told each line of standard error as it comes
    /// (from another thread), besides collecting them.
    public init(_ arguments: [String], label: String, executable: String = selfExecutable,
         environment: [String: String] = [:], captureOutput: Bool = true, captureErrors: Bool = false,
         errorLines: (@Sendable (String) -> Void)? = nil) throws {
        self.label = label
        capturesOutput = captureOutput
        errors = captureErrors ? Pipe() : nil
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        // A framesrv stage dies with this process (`dieWithParent()`), so no stage outlives its parent.
        process.environment = ProcessInfo.processInfo.environment
            .merging(environment) { $1 }.merging([parentEnvironmentKey: String(getpid())]) { $1 }
        process.standardInput = FileHandle.nullDevice
        if captureOutput { process.standardOutput = output }
        if let errors {
            process.standardError = errors
            // Drained on its own thread, so a chatty child never blocks on a full pipe.
            let handle = errors.fileHandleForReading, box = errorText
            Thread { box.finish(Self.readLines(handle, to: errorLines)) }.start()
        }
        try process.run()
    }

    /// Everything `handle` gives until its end, each complete line (and a last one without
    /// a newline) told to `lines` as it arrives.
    private static func readLines(_ handle: FileHandle, to lines: (@Sendable (String) -> Void)?) -> String {
        guard let lines else { return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self) }
        var all = Data(), pending = Data()
        while case let chunk = handle.availableData, !chunk.isEmpty {
            all.append(chunk)
            pending.append(chunk)
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                lines(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                pending = Data(pending[(newline + 1)...])
            }
        }
        if !pending.isEmpty { lines(String(decoding: pending, as: UTF8.self)) }
        return String(decoding: all, as: UTF8.self)
    }

    /// Waits for the child and returns its exit status and everything it printed.
    public func finish() -> (status: Int32, output: String) {
        let data = capturesOutput ? output.fileHandleForReading.readDataToEndOfFile() : Data()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    /// `finish()`, plus what the child wrote to standard error (with `captureErrors`).
    public func finishWithErrors() -> (status: Int32, output: String, errors: String) {
        let (status, out) = finish()
        return (status, out, errors == nil ? "" : errorText.wait())
    }

    /// SIGINT to the child's process group: a framesrv stage finishes its work (ends its
    /// stream, closes its file) and exits.
    public func interrupt() { signalGroup(SIGINT) }

    /// SIGTERM to the child.
    public func stop() { if process.isRunning { process.terminate() } }

    /// SIGKILL to the child's process group: for a stage that did not stop when asked. The
    /// group outlives a leader that exited before its own children, so they are killed too.
    public func kill() { signalGroup(SIGKILL, evenAfterExit: true) }

    /// `signal` to the process group the child leads, or to the child alone if it left it.
    ///
    /// The corresponding C function is `kill` (with a negative pid for the group).
    private func signalGroup(_ signal: Int32, evenAfterExit: Bool = false) {
        let pid = process.processIdentifier
        guard pid > 0, evenAfterExit || process.isRunning else { return }
        if Glibc.kill(-pid, signal) != 0, process.isRunning { Glibc.kill(pid, signal) }
    }

    /// The signal that ended the child, nil while it runs or when it exited.
    public var killedBy: Int32? {
        guard !process.isRunning, process.terminationReason == .uncaughtSignal else { return nil }
        return process.terminationStatus
    }

    /// The exit status once the child has exited (a signal counts as 128 + its number), nil while it runs.
    public var exitStatus: Int32? {
        guard !process.isRunning else { return nil }
        return process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    }
}

/// Stages of a pipeline run as child processes (demo, bench chain): when one fails, the
/// others are stopped, so a parent never waits on a chain that cannot finish.
extension [Child] {
    /// The first stage (upstream first, as they were started downstream first) that exited
    /// with a failure, if any.
    public var failedStage: Child? { reversed().first { ($0.exitStatus ?? 0) != 0 } }

    /// Waits until every stage has exited, or one has failed (then stops the others); the failed one.
    public func waitForAllOrFirstFailure() -> Child? {
        while contains(where: { $0.process.isRunning }) {
            if let failed = failedStage {
                stopAll()
                return failed
            }
            usleep(20_000)
        }
        return failedStage
    }

    /// After `waitSeconds` for the stages to end by themselves, SIGINT to every stage still
    /// running; SIGKILL to any still running 5 s later.
    public func stopAll(waitSeconds: Double = 0) {
        func wait(_ seconds: Double) {
            let deadline = monotonicNanos() + UInt64(seconds * 1e9)
            while contains(where: { $0.process.isRunning }), monotonicNanos() < deadline { usleep(50_000) }
        }
        wait(waitSeconds)
        for s in reversed() { s.interrupt() }
        wait(5)
        for s in self { s.kill() }
    }
}

/// `SIGSEGV` for 11: the names kill -l gives, or `signal N` for one without a name here.
public func signalName(_ signal: Int32) -> String {
    let names = ["HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "KILL", "USR1", "SEGV", "USR2", "PIPE", "ALRM", "TERM",
                 "STKFLT", "CHLD", "CONT", "STOP", "TSTP", "TTIN", "TTOU", "URG", "XCPU", "XFSZ", "VTALRM", "PROF", "WINCH", "IO", "PWR", "SYS"]
    return signal >= 1 && Int(signal) <= names.count ? "SIG" + names[Int(signal) - 1] : "signal \(signal)"
}

/// Set in a stage's environment to its parent's pid.
public let parentEnvironmentKey = "FRAMESRV_PARENT_PID"

/// A stage started by a framesrv parent (`Child`) gets SIGTERM when that parent dies, however
/// it dies (SIGKILL too): it then stops as on SIGINT, ending its stream and removing its files.
/// If the parent is already gone, it stops at once.
///
/// The corresponding C call is `prctl(PR_SET_PDEATHSIG, SIGTERM)` (variadic in C, so called
/// through its address).
public func dieWithParent() {
    guard let text = ProcessInfo.processInfo.environment[parentEnvironmentKey], let parent = pid_t(text) else { return }
    typealias Prctl = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32
    if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "prctl") {
        _ = unsafeBitCast(symbol, to: Prctl.self)(1 /* PR_SET_PDEATHSIG */, UInt(SIGTERM), 0, 0, 0)
    }
    // The parent may have died before the call: then no signal will come.
    if getppid() != parent { kill(getpid(), SIGTERM) }
}

/// Standard error text read to the end on another thread.
final class ErrorCollector: @unchecked Sendable {
    private var text = ""
    private let done = DispatchSemaphore(value: 0)
    func finish(_ text: String) { self.text = text; done.signal() }
    func wait() -> String { done.wait(); done.signal(); return text }
}
