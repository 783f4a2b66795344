import Foundation
import Glibc

/// The one way the tests start a process (every framesrv, ffmpeg, client, compiler and shell
/// line): posix_spawn, reaped with waitpid. Safe from several threads at once (Foundation's
/// Process crashed in `run()` under the file fuzzer's parallel workers, and past ~1,300 open
/// descriptors: swift-corelibs-foundation PR 5472). Output goes to files in `logDirectory`
/// (no pipe can fill up and block the child); stdin is /dev/null; the child starts with every
/// signal at its default action and none blocked (Foundation's Process passes on the test
/// runner's blocked signals: Xvfb then ignored SIGTERM, and a suite a test runs could not
/// stop its own children).
final class Spawned: @unchecked Sendable {
    let pid: pid_t
    private let outPath: String
    private let errPath: String
    /// How the process ended, once reaped (by whichever thread asked first).
    private let ended = Locked<ProcessOutcome?>(nil)

    /// Starts `executable ARGS` (an absolute path) in `directory` (default: the test's), in
    /// `childEnvironment(environment)`: the runner's, the project's venv first on PATH.
    convenience init(_ executable: String, _ args: [String], environment: [String: String] = [:], logDirectory: String,
                     directory: String? = nil) throws {
        try self.init(executable, args, exactEnvironment: childEnvironment(environment), logDirectory: logDirectory, directory: directory)
    }

    /// Starts it in exactly `exactEnvironment` (for what `childEnvironment` itself needs first).
    init(_ executable: String, _ args: [String], exactEnvironment: [String: String], logDirectory: String,
         directory: String? = nil) throws {
        let id = UUID().uuidString.prefix(8)
        outPath = "\(logDirectory)/.out-\(id)"
        errPath = "\(logDirectory)/.err-\(id)"
        pid = try spawnWithDefaultSignals([executable] + args, environment: exactEnvironment.map { "\($0.key)=\($0.value)" },
                                          stdout: outPath, stderr: errPath, directory: directory)
    }

    deinit { kill() }

    var stdout: String { String(decoding: stdoutBytes, as: UTF8.self) }
    var stdoutBytes: Data { (try? Data(contentsOf: URL(fileURLWithPath: outPath))) ?? Data() }
    var stderr: String { (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "" }

    /// Whether the process has not been reaped yet.
    var isRunning: Bool { reap(blocking: false) == nil }

    /// How the process ended; SIGKILLed and `.hung` when it runs past `timeout` seconds.
    func outcome(timeout: Double) -> ProcessOutcome {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let o = reap(blocking: false) { return o }
            usleep(2_000)
        }
        if let o = reap(blocking: false) { return o }
        kill()
        return .hung
    }

    /// Waits for exit: the exit status, 128 + the signal that ended it, or -1 (the process
    /// SIGKILLed) when it runs past `timeout` seconds.
    @discardableResult
    func wait(timeout: Double = 60) -> Int32 {
        switch outcome(timeout: timeout) {
        case .exited(let code): code
        case .signaled(let signal): 128 + signal
        case .hung: -1
        }
    }

    func signal(_ sig: Int32) { if isRunning { Glibc.kill(pid, sig) } }

    /// SIGKILLs the process (if it still runs) and reaps it.
    func kill() {
        guard isRunning else { return }
        Glibc.kill(pid, SIGKILL)
        _ = reap(blocking: true)
    }

    func removeLogs() {
        unlink(outPath)
        unlink(errPath)
    }

    /// CPU time (user + system) the process has used so far, in clock ticks.
    var cpuTicks: Int64 {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return -1 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
        return (Int64(fields[11]) ?? 0) + (Int64(fields[12]) ?? 0)
    }

    /// Runs `argv` (argv[0] looked up on the child's PATH) in `directory` to completion:
    /// status as `wait` gives it, standard output as bytes, standard error as text.
    static func run(_ argv: [String], timeout: Double = 600, environment: [String: String] = [:],
                    directory: String? = nil) throws(TestFailure) -> (status: Int32, stdout: Data, stderr: String) {
        let logs = TemporaryFolder("framesrv-run")
        do {
            let p = try Spawned("/usr/bin/env", argv, environment: environment, logDirectory: logs.path, directory: directory)
            let status = p.wait(timeout: timeout)
            return (status, p.stdoutBytes, p.stderr)
        } catch {
            throw TestFailure("cannot run \(argv.joined(separator: " ")): \(error)")
        }
    }

    /// The outcome once the process has ended (waitpid), nil while it runs.
    private func reap(blocking: Bool) -> ProcessOutcome? {
        ended.withLock { ended in
            if let ended { return ended }
            var status: Int32 = 0
            var r: pid_t
            repeat { r = waitpid(pid, &status, blocking ? 0 : WNOHANG) } while r < 0 && errno == EINTR
            guard r == pid else { return nil }
            // WIFSIGNALED / WTERMSIG / WEXITSTATUS, which Swift does not import as functions.
            let signal = status & 0x7f
            ended = signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
            return ended
        }
    }
}

/// Starts `argv` with posix_spawn in `directory` (default: the test's): stdin /dev/null,
/// stdout and stderr to the files named (created 0600), every signal at its default action
/// and none blocked. `environment` as "KEY=value" strings.
func spawnWithDefaultSignals(_ argv: [String], environment: [String], stdout: String, stderr: String,
                             directory: String? = nil) throws -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t(), all = sigset_t()
    sigemptyset(&none)
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attributes, &none)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    // Swift's Glibc does not import posix_spawn_file_actions_addchdir_np: env -C changes directory.
    let argv = directory.map { ["/usr/bin/env", "-C", $0] + argv } ?? argv
    let cArgv = argv.map { strdup($0) } + [nil]
    let envp = environment.map { strdup($0) } + [nil]
    defer { for p in cArgv + envp { free(p) } }
    var child: pid_t = 0
    let r = posix_spawn(&child, argv[0], &actions, &attributes, cArgv, envp)
    guard r == 0 else { throw TestFailure("posix_spawn \(argv[0]): \(String(cString: strerror(r)))") }
    return child
}
