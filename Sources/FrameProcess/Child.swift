import Dispatch
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
/// children too (an `sh -c` stage). It gets no descriptor of this process but its 0, 1 and 2
/// (`spawnChild`). Reaped by whichever thread asks first (`isRunning`, `finish`).
public final class Child: @unchecked Sendable {
    public let pid: pid_t
    public let label: String
    /// The write end of the child's standard input (with `feedInput`), else -1: `closeInput()` ends it.
    public private(set) var input: Int32 = -1
    private var output: Int32 = -1
    private let errorText = ErrorCollector()
    private let capturesErrors: Bool
    private let ended = ThreadLock()
    private var outcome: ChildOutcome?

    /// Starts `framesrv ARGS` (or another program with `executable`, an absolute path) with
    /// `environment` added. `errorLines` (with `captureErrors`): told each line of standard
    /// error as it comes (from another thread), besides collecting them. `feedInput`: standard
    /// input is a pipe whose write end is `input` (else /dev/null).
    public init(_ arguments: [String], label: String, executable: String = selfExecutable,
         environment: [String: String] = [:], captureOutput: Bool = true, captureErrors: Bool = false,
         feedInput: Bool = false, errorLines: (@Sendable (String) -> Void)? = nil) throws {
        self.label = label
        capturesErrors = captureErrors
        let pipes = try (feedInput ? ChildPipe(starting: executable) : nil,
                         captureOutput ? ChildPipe(starting: executable) : nil,
                         captureErrors ? ChildPipe(starting: executable) : nil)
        defer { for p in [pipes.0?.read, pipes.1?.write, pipes.2?.write] { if let p { close(p) } } }
        // A framesrv stage dies with this process (`dieWithParent()`), so no stage outlives its parent.
        let childEnvironment = ProcessInfo.processInfo.environment
            .merging(environment) { $1 }.merging([parentEnvironmentKey: String(getpid())]) { $1 }
        do {
            pid = try spawnChild([executable] + arguments, environment: childEnvironment,
                                 streams: ChildStreams(input: pipes.0?.read, output: pipes.1?.write, errors: pipes.2?.write))
        } catch {
            for p in [pipes.0?.write, pipes.1?.read, pipes.2?.read] { if let p { close(p) } }
            throw error
        }
        input = pipes.0?.write ?? -1
        output = pipes.1?.read ?? -1
        if let fd = pipes.2?.read {
            // Drained on its own thread, so a chatty child never blocks on a full pipe.
            let box = errorText
            pthread_detach(spawnThread {
                box.finish(Self.readLines(fd, to: errorLines))
                close(fd)
            })
        }
    }

    deinit {
        closeInput()
        if output >= 0 { close(output) }
    }

    /// Everything `fd` gives until its end, each complete line (and a last one without
    /// a newline) told to `lines` as it arrives.
    private static func readLines(_ fd: Int32, to lines: (@Sendable (String) -> Void)?) -> String {
        var all: [UInt8] = [], pending: [UInt8] = []
        readToEnd(fd) { chunk in
            all += chunk
            guard let lines else { return }
            pending += chunk
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                lines(String(decoding: pending[..<newline], as: UTF8.self))
                pending.removeSubrange(...newline)
            }
        }
        if let lines, !pending.isEmpty { lines(String(decoding: pending, as: UTF8.self)) }
        return String(decoding: all, as: UTF8.self)
    }

    /// Ends the child's standard input (with `feedInput`).
    public func closeInput() {
        if input >= 0 { close(input) }
        input = -1
    }

    /// Waits for the child and returns its exit status (the signal's number if a signal
    /// ended it) and everything it printed.
    public func finish() -> (status: Int32, output: String) {
        var data: [UInt8] = []
        if output >= 0 {
            readToEnd(output) { data += $0 }
            close(output)
            output = -1
        }
        switch waitForExit() {
        case .exited(let code), .signaled(let code): return (code, String(decoding: data, as: UTF8.self))
        }
    }

    /// `finish()`, plus what the child wrote to standard error (with `captureErrors`).
    public func finishWithErrors() -> (status: Int32, output: String, errors: String) {
        let (status, out) = finish()
        return (status, out, capturesErrors ? errorText.wait() : "")
    }

    /// Whether the child has not exited yet (reaping it if it has).
    public var isRunning: Bool { reap() == nil }

    /// How the child ended, once it has (waitpid, without blocking), nil while it runs.
    private func reap() -> ChildOutcome? {
        ended.withLock {
            if let outcome { return outcome }
            var status: Int32 = 0
            var r: pid_t
            repeat { r = waitpid(pid, &status, WNOHANG) } while r < 0 && errno == EINTR
            // ECHILD: someone else reaped it; its status is lost, and it has certainly ended.
            if r == pid { outcome = ChildOutcome(waitStatus: status) } else if r < 0 { outcome = .exited(255) }
            return outcome
        }
    }

    /// Blocks until the child has ended: waitid with WNOWAIT leaves it a zombie (its pid
    /// still its own) for `reap` to collect under the lock, so several threads may wait.
    private func waitForExit() -> ChildOutcome {
        while true {
            if let o = reap() { return o }
            var info = siginfo_t()
            _ = waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT)
        }
    }

    /// SIGINT to the child's process group: a framesrv stage finishes its work (ends its
    /// stream, closes its file) and exits.
    public func interrupt() { signalGroup(SIGINT) }

    /// SIGTERM to the child.
    public func stop() { if isRunning { Glibc.kill(pid, SIGTERM) } }

    /// SIGKILL to the child's process group: for a stage that did not stop when asked. The
    /// group outlives a leader that exited before its own children, so they are killed too.
    public func kill() { signalGroup(SIGKILL, evenAfterExit: true) }

    /// `signal` to the process group the child leads, or to the child alone if it left it.
    ///
    /// The corresponding C function is `kill` (with a negative pid for the group).
    private func signalGroup(_ signal: Int32, evenAfterExit: Bool = false) {
        guard evenAfterExit || isRunning else { return }
        if Glibc.kill(-pid, signal) != 0, isRunning { Glibc.kill(pid, signal) }
    }

    /// The signal that ended the child, nil while it runs or when it exited.
    public var killedBy: Int32? {
        guard case .signaled(let signal) = reap() else { return nil }
        return signal
    }

    /// The exit status once the child has exited (a signal counts as 128 + its number), nil while it runs.
    public var exitStatus: Int32? {
        switch reap() {
        case .exited(let code): code
        case .signaled(let signal): 128 + signal
        case nil: nil
        }
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
        while contains(where: { $0.isRunning }) {
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
            while contains(where: { $0.isRunning }), monotonicNanos() < deadline { usleep(50_000) }
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
