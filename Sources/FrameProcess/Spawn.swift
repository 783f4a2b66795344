import Glibc

/// Why a child could not be started.
public struct SpawnError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// What a new process gets: its program, arguments, environment and standard streams.
struct SpawnRequest {
    /// The program's path (absolute, or relative to the working directory).
    var executable: String
    /// Its arguments, without argv[0] (the executable's path).
    var arguments: [String]
    /// "KEY=value" strings: the whole environment.
    var environment: [String]
    /// The descriptors to put at 0, 1 and 2; nil: /dev/null for 0, this process's own for 1 and 2.
    var input: Int32?
    var output: Int32?
    var errors: Int32?
    /// Whether it leads a process group of its own (a terminal's Ctrl-C then reaches the
    /// parent only, and a signal to the group reaches the program's own children too).
    var ownGroup = true
}

/// Starts `request` with posix_spawn: every signal at its default action and none blocked
/// (a supervisor's handlers and ignored signals, SIGPIPE, are not passed on), and no
/// descriptor but 0, 1 and 2: a pipe or socket of this process that a child kept open
/// (a background child of a stage, say) would hold it open after this process is done with
/// it. Returns the child's pid.
///
/// The corresponding C functions are `posix_spawn` and, for the descriptors,
/// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34; every descriptor this package
/// opens is close-on-exec too, so an older glibc still passes none of them on).
func spawnProcess(_ request: SpawnRequest) throws(SpawnError) -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    if let input = request.input { posix_spawn_file_actions_adddup2(&actions, input, 0) }
    else { posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0) }
    if let output = request.output { posix_spawn_file_actions_adddup2(&actions, output, 1) }
    if let errors = request.errors { posix_spawn_file_actions_adddup2(&actions, errors, 2) }
    if let closeFrom = closeFromAction { _ = closeFrom(&actions, 3) }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t(), all = sigset_t()
    sigemptyset(&none)
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attributes, &none)
    posix_spawnattr_setsigdefault(&attributes, &all)
    var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
    if request.ownGroup {
        posix_spawnattr_setpgroup(&attributes, 0)
        flags |= POSIX_SPAWN_SETPGROUP
    }
    posix_spawnattr_setflags(&attributes, Int16(flags))
    let argv = ([request.executable] + request.arguments).map { strdup($0) } + [nil]
    let envp = request.environment.map { strdup($0) } + [nil]
    defer { for p in argv + envp { free(p) } }
    var pid: pid_t = 0
    let r = posix_spawn(&pid, request.executable, &actions, &attributes, argv, envp)
    guard r == 0 else { throw SpawnError("cannot start '\(request.executable)': \(String(cString: strerror(r)))") }
    return pid
}

/// A pipe whose both ends are close-on-exec (a child gets one only as 0, 1 or 2).
///
/// The corresponding C function is `pipe2(O_CLOEXEC)` (a GNU extension, so called through
/// its address).
func makePipe() throws(SpawnError) -> (read: Int32, write: Int32) {
    typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32
    var fds: [Int32] = [-1, -1]
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pipe2"),
          unsafeBitCast(symbol, to: Pipe2.self)(&fds, O_CLOEXEC) == 0 else {
        throw SpawnError("cannot make a pipe: \(String(cString: strerror(errno)))")
    }
    return (fds[0], fds[1])
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np`, which Swift's Glibc module does not
/// import (a GNU extension); nil on a C library without it.
private let closeFromAction: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32)? = {
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32).self)
}()
