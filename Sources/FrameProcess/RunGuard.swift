import FoundationEssentials
import FrameServer
import Glibc

/// A process that outlives a supervisor to stop what the supervisor started, should it die
/// without doing so itself (SIGKILL, a crash): its stages, framesrv's or any program's
/// (PR_SET_PDEATHSIG reaches a framesrv stage only, and a stage's own children never), and
/// what they started.
///
/// The supervisor starts it with a socket as its standard input and tells it, a line each,
/// the stages' process groups and the runtime directory. When the socket ends without
/// `release()`'s last line (the supervisor is gone: the kernel closes its end), the guard
/// stops every process of the run (`Leftovers`, by the stages' groups and the run's mark in
/// their environments) and removes the streams their producers left (`removeOrphans`).
public final class RunGuard {
    private let socket: Int32
    public let process: ChildProcess

    /// Starts `executable ARGS`, a program that calls `RunGuard.serve` (framesrv run
    /// --guard MARK), in a process group of its own (a terminal's Ctrl-C is the supervisor's
    /// to handle) and without the parent mark of `dieWithParent()` (it is to outlive its parent).
    public init(executable: String, arguments: [String]) throws(SpawnError) {
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw SpawnError("cannot make a socket pair: \(String(cString: strerror(errno)))")
        }
        defer { close(pair[1]) }
        var environment = ProcessInfo.processInfo.environment
        environment[parentEnvironmentKey] = nil
        let pid: pid_t
        do {
            pid = try spawnProcess(SpawnRequest(executable: executable, arguments: arguments,
                                                environment: environment.map { "\($0.key)=\($0.value)" }, input: pair[1]))
        } catch {
            close(pair[0])
            throw error
        }
        socket = pair[0]
        process = ChildProcess(pid)
    }

    deinit { close(socket) }

    /// Tells the guard a stage's process group.
    public func watch(group: pid_t) { say("group \(group)") }

    /// Tells the guard the runtime directory of the run's streams.
    public func watch(directory: String) { say("directory \(directory)") }

    /// Tells the guard that the supervisor stopped everything itself, and waits for it to exit.
    public func release() {
        say(Self.releaseLine)
        shutdown(socket, Int32(SHUT_WR))
        process.waitUntilExit()
    }

    /// Not sent when the guard is gone (MSG_NOSIGNAL: no SIGPIPE for it).
    private func say(_ line: String) {
        var text = line + "\n"
        _ = text.withUTF8 { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    static let releaseLine = "released"

    /// The guard's side: reads `input` to its end; unless the supervisor released it, stops
    /// the run's processes (those in the groups it was told and those whose environment has
    /// `mark`, and what is below them) and removes the orphaned streams of the directory
    /// it was told. SIGINT and SIGHUP are ignored (a closed terminal sends the latter to the
    /// run that it is here to outlive). Returns how many processes it stopped.
    public static func serve(mark: String, input: Int32 = 0) -> Int {
        signal(SIGINT, SIG_IGN)
        signal(SIGHUP, SIG_IGN)
        var groups = Set<pid_t>(), directory: String?, released = false
        for line in readLines(input) {
            let words = line.split(separator: " ", maxSplits: 1).map(String.init)
            switch (words.first, words.count) {
            case ("group", 2): if let g = pid_t(words[1]) { groups.insert(g) }
            case ("directory", 2): directory = words[1]
            case (releaseLine, 1): released = true
            default: break
            }
        }
        guard !released else { return 0 }
        let stopped = Leftovers(mark: mark, groups: groups, root: nil).stop(graceSeconds: stopGraceSeconds)
        if let directory, let dir = try? RuntimeDirectory(path: directory) { _ = dir.removeOrphans() }
        return stopped
    }

    /// How long the run's processes have between SIGTERM and SIGKILL when the guard stops them.
    public static let stopGraceSeconds = 5.0

    /// Every line of `fd` until its end.
    private static func readLines(_ fd: Int32) -> [String] {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            bytes += buffer[..<n]
        }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
    }
}
