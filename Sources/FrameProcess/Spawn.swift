import FrameServer
import Glibc

/// A pipe whose two ends close on exec (a child gets one only as its 0, 1 or 2). Another
/// thread's spawn between the two calls would not get them either: `spawnChild` closes
/// every descriptor but 0, 1 and 2 in the child.
///
/// The corresponding C functions are `pipe` and `fcntl(F_SETFD, FD_CLOEXEC)` (Swift's
/// Glibc does not import `pipe2`).
struct ChildPipe {
    let read: Int32
    let write: Int32

    init(starting executable: String) throws(SystemCallError) {
        var fds: [Int32] = [-1, -1]
        guard pipe(&fds) == 0 else { throw SystemCallError("make a pipe for", path: executable, .current) }
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        read = fds[0]
        write = fds[1]
    }
}

/// What a child's standard input, output and error are: a descriptor of this process
/// (dup'ed to 0, 1 or 2), nil for /dev/null (input) or this process's own (output, error).
struct ChildStreams {
    var input: Int32? = nil
    var output: Int32? = nil
    var errors: Int32? = nil
}

/// How a reaped child ended.
enum ChildOutcome: Equatable {
    case exited(Int32)
    case signaled(Int32)

    /// From a `waitpid` status (WIFSIGNALED, WTERMSIG and WEXITSTATUS, which Swift does not import).
    init(waitStatus status: Int32) {
        let signal = status & 0x7f
        self = signal == 0 ? .exited((status >> 8) & 0xff) : .signaled(signal)
    }
}

/// Starts `argv` (argv[0] an absolute path) with posix_spawn as the leader of a new process
/// group, in `environment`, with `streams` as its 0, 1 and 2 and no other descriptor of this
/// process, and no signal blocked (those this process ignores stay ignored, as across exec).
///
/// The corresponding C functions are `posix_spawn` and `posix_spawn_file_actions_addclosefrom_np`.
func spawnChild(_ argv: [String], environment: [String: String], streams: ChildStreams) throws(SystemCallError) -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if let fd = streams.input { posix_spawn_file_actions_adddup2(&actions, fd, 0) } else {
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    }
    if let fd = streams.output { posix_spawn_file_actions_adddup2(&actions, fd, 1) }
    if let fd = streams.errors { posix_spawn_file_actions_adddup2(&actions, fd, 2) }
    closeOtherDescriptors(&actions)
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t()
    sigemptyset(&none)
    posix_spawnattr_setsigmask(&attributes, &none)
    posix_spawnattr_setpgroup(&attributes, 0)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK))
    let cArgv = argv.map { strdup($0) } + [nil]
    let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
    defer { for p in cArgv + envp { free(p) } }
    var pid: pid_t = 0
    let r = posix_spawn(&pid, argv[0], &actions, &attributes, cArgv, envp)
    guard r == 0 else { throw SystemCallError("start", path: argv[0], Errno(rawValue: r)) }
    return pid
}

/// Closes every descriptor from 3 up in the child (glibc 2.34's file action; GNU-only, so
/// looked up by name). Where it is missing, only descriptors without FD_CLOEXEC stay open.
private func closeOtherDescriptors(_ actions: inout posix_spawn_file_actions_t) {
    typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return }
    _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3)
}

/// Everything `fd` gives until its end (EINTR retried), each chunk as it arrives.
func readToEnd(_ fd: Int32, _ chunk: (ArraySlice<UInt8>) -> Void) {
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = read(fd, &buffer, buffer.count)
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return }
        chunk(buffer[..<n])
    }
}
