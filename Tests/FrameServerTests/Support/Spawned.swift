import Foundation
import Glibc

/// A child process started with posix_spawn and reaped with waitpid, for tests that start
/// processes from several threads at once (Foundation's Process crashed in `run()` under the
/// file fuzzer's parallel workers). Output goes to files; stdin is /dev/null; the child
/// starts with every signal at its default action and none blocked.
final class Spawned: @unchecked Sendable {
    let pid: pid_t
    private let outPath: String
    private let errPath: String
    private var ended: ProcessOutcome?

    init(_ executable: String, _ args: [String], environment: [String: String], logDirectory: String) throws {
        let id = UUID().uuidString.prefix(8)
        outPath = "\(logDirectory)/.out-\(id)"
        errPath = "\(logDirectory)/.err-\(id)"
        let env = childEnvironment(environment).map { "\($0.key)=\($0.value)" }
        pid = try spawnWithDefaultSignals([executable] + args, environment: env, stdout: outPath, stderr: errPath)
    }

    deinit { kill() }

    var stdout: String { (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "" }
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

    /// The outcome once the process has ended (waitpid), nil while it runs.
    private func reap(blocking: Bool) -> ProcessOutcome? {
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

/// Starts `argv` with posix_spawn: stdin /dev/null, stdout and stderr to the files named
/// (created 0600), every signal at its default action and none blocked (Foundation's
/// Process passes on the test runner's blocked signals, and Xvfb would then ignore SIGTERM).
/// `environment` as "KEY=value" strings.
func spawnWithDefaultSignals(_ argv: [String], environment: [String], stdout: String, stderr: String) throws -> pid_t {
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
    let cArgv = argv.map { strdup($0) } + [nil]
    let envp = environment.map { strdup($0) } + [nil]
    defer { for p in cArgv + envp { free(p) } }
    var child: pid_t = 0
    let r = posix_spawn(&child, argv[0], &actions, &attributes, cArgv, envp)
    guard r == 0 else { throw TestFailure("posix_spawn \(argv[0]): \(String(cString: strerror(r)))") }
    return child
}
