import FoundationEssentials
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
/// Each child leads its own process group: a terminal's Ctrl-C reaches the parent only,
/// which decides what each child gets, and `interrupt()` and `kill()` reach a program's own
/// children too (an `sh -c` stage). It gets descriptors 0, 1 and 2 only, every signal at
/// its default (`spawnProcess`), and its end is its exit (`ChildProcess`), whatever its own
/// children keep open.
public final class Child {
    public let process: ChildProcess
    private let output: PipeReader?
    private let errors: PipeReader?
    public let label: String
    /// The write end of the child's standard input (with `feedInput`), else -1: `closeInput()` ends it.
    public private(set) var input: Int32 = -1

    /// Starts `framesrv ARGS` (or another program with `executable`) with `environment` added.
    /// `errorLines` (with `captureErrors`): told each line of standard error as it comes
    /// (from another thread), besides collecting them. `feedInput`: its standard input is a
    /// pipe this process writes (`input`), else /dev/null.
    public init(_ arguments: [String], label: String, executable: String = selfExecutable,
         environment: [String: String] = [:], captureOutput: Bool = true, captureErrors: Bool = false,
         feedInput: Bool = false, errorLines: (@Sendable (String) -> Void)? = nil) throws(SpawnError) {
        self.label = label
        let feed = feedInput ? try makePipe() : nil
        // A framesrv stage dies with this process (`dieWithParent()`), so no stage outlives its parent.
        let environment = ProcessInfo.processInfo.environment
            .merging(environment) { $1 }.merging([parentEnvironmentKey: String(getpid())]) { $1 }
        let out: (read: Int32, write: Int32)?
        do { out = captureOutput ? try makePipe() : nil } catch { Self.close(feed); throw error }
        let err: (read: Int32, write: Int32)?
        do { err = captureErrors ? try makePipe() : nil } catch { Self.close(out); Self.close(feed); throw error }
        defer { for fd in [out?.write, err?.write, feed?.read] { if let fd { Glibc.close(fd) } } }
        let pid: pid_t
        do {
            pid = try spawnProcess(SpawnRequest(executable: executable, arguments: arguments,
                                                environment: environment.map { "\($0.key)=\($0.value)" },
                                                input: feed?.read, output: out?.write, errors: err?.write))
        } catch {
            for fd in [out?.read, err?.read, feed?.write] { if let fd { Glibc.close(fd) } }
            throw error
        }
        input = feed?.write ?? -1
        process = ChildProcess(pid)
        output = out.map { PipeReader($0.read, lines: nil) }
        errors = err.map { PipeReader($0.read, lines: errorLines) }
    }

    /// The child's pid.
    public var pid: pid_t { process.processIdentifier }

    /// Whether the child has not exited yet.
    public var isRunning: Bool { process.isRunning }

    /// Closes the child's standard input (with `feedInput`): it reads the end of its input.
    public func closeInput() {
        if input >= 0 { Glibc.close(input); input = -1 }
    }

    private static func close(_ pipe: (read: Int32, write: Int32)?) {
        if let pipe { Glibc.close(pipe.read); Glibc.close(pipe.write) }
    }

    /// How long `finish()` waits, once the child has exited, for the end of its pipes: a
    /// descendant of the child that inherited one may hold it open for ever.
    public static let pipeGraceSeconds = 2.0

    /// Waits for the child and returns its exit status and everything it printed.
    public func finish() -> (status: Int32, output: String) {
        process.waitUntilExit()
        let text = output?.finish(within: Self.pipeGraceSeconds) ?? ""
        return (process.terminationStatus ?? 0, text)
    }

    /// `finish()`, plus what the child wrote to standard error (with `captureErrors`).
    public func finishWithErrors() -> (status: Int32, output: String, errors: String) {
        let (status, out) = finish()
        return (status, out, errors?.finish(within: Self.pipeGraceSeconds) ?? "")
    }

    /// SIGINT to the child's process group: a framesrv stage finishes its work (ends its
    /// stream, closes its file) and exits.
    public func interrupt() { signalGroup(SIGINT) }

    /// SIGTERM to the child.
    public func stop() { if process.isRunning { Glibc.kill(process.processIdentifier, SIGTERM) } }

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
    public var killedBy: Int32? { process.terminatingSignal }

    /// The exit status once the child has exited (a signal counts as 128 + its number), nil while it runs.
    public var exitStatus: Int32? {
        guard let status = process.terminationStatus else { return nil }
        return process.terminatingSignal == nil ? status : 128 + status
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
    _ = prctl(1 /* PR_SET_PDEATHSIG */, UInt(SIGTERM))
    // The parent may have died before the call: then no signal will come.
    if getppid() != parent { kill(getpid(), SIGTERM) }
}
