import CFrameServer
import Glibc

// The one internal layer that talks to the C library for files, mappings, locks and
// futexes. Everything above it speaks Swift and SystemCallError/SegmentError.

/// A file mapped into this process with `mmap(MAP_SHARED)`; unmapped on deinit.
///
/// The corresponding C functions are `open`, `posix_fallocate`, `fstat` and `mmap`.
final class MappedFile: @unchecked Sendable {
    // Sendable: the mapping's address and size never change; what the bytes mean and
    // who may touch them is the protocol's business (atomics in CFrameServer.h).
    let path: String
    private let descriptor: FileDescriptor
    let base: UnsafeMutableRawPointer
    let size: Int
    let writable: Bool

    /// The open file's descriptor number (owned by this object).
    var fd: Int32 { descriptor.rawValue }

    private init(path: String, descriptor: consuming FileDescriptor, base: UnsafeMutableRawPointer, size: Int,
                 writable: Bool) {
        self.path = path; self.descriptor = descriptor; self.base = base; self.size = size; self.writable = writable
    }

    /// Creates a new file of `size` zero bytes with mode 0600 (fails if it exists) and maps it read-write.
    static func create(_ path: String, size: Int) throws(SegmentError) -> MappedFile {
        let fd: FileDescriptor
        do { fd = try .open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600) } catch {
            throw .system(operation: "create", path: path, error)
        }
        // posix_fallocate, not just ftruncate: on tmpfs the memory is then really there, and a
        // pool that does not fit fails here with ENOSPC instead of SIGBUS at first touch.
        do { try fd.allocate(size) } catch {
            try? removeFile(path)
            throw .system(operation: "allocate \(size) bytes for", path: path, error)
        }
        // MAP_POPULATE: the creator (the producer) writes every page; mapping them all now
        // costs one call instead of a page fault per 4 KiB in the middle of the stream.
        return try map(path, fd, size: size, writable: true, populate: true)
    }

    private static func map(_ path: String, _ fd: consuming FileDescriptor, size: Int, writable: Bool,
                            populate: Bool = false) throws(SegmentError) -> MappedFile {
        guard size > 0 else { throw .tooSmall(path: path, size: 0, needed: 1) }
        let p: UnsafeMutableRawPointer
        do { p = try fd.map(size: size, writable: writable, populate: populate) } catch {
            throw .system(operation: "map", path: path, error)
        }
        return MappedFile(path: path, descriptor: fd, base: p, size: size, writable: writable)
    }

    deinit { unmap(base, size: size) }   // the descriptor closes itself
}

/// An exclusive `flock` on a lock file, held for the life of the object.
///
/// The kernel drops the lock when the holder dies, which is how a stream's producer
/// is known to be alive regardless of PID reuse. The corresponding C function is `flock`.
final class FileLock {
    private let descriptor: FileDescriptor
    let path: String

    /// The lock file's descriptor number (owned by this object).
    var fd: Int32 { descriptor.rawValue }

    /// Takes the lock or returns nil when another process holds it.
    ///
    /// After locking it checks that `path` still names the locked file: `framesrv clean`
    /// may have unlinked it in between, and a lock on an unlinked file protects nothing.
    static func tryExclusive(_ path: String) throws(SystemCallError) -> FileLock? {
        while true {
            let fd: FileDescriptor
            do { fd = try .open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK, mode: 0o600) } catch {
                throw SystemCallError("open lock", path: path, error)
            }
            do { guard try fd.tryLockExclusive() else { return nil } } catch { throw SystemCallError("lock", path: path, error) }
            if let held = try? fd.status(), let named = try? linkStatus(path),
               held.st_ino == named.st_ino, held.st_dev == named.st_dev {
                return FileLock(descriptor: fd, path: path)
            }
            // unlinked under us (fd closes here): try again with the file now at `path`
        }
    }

    /// Removes the lock file while holding the lock (so no producer can hold a lock on
    /// the unlinked file: see `tryExclusive`), then releases it.
    func unlinkAndRelease() { try? removeFile(path) }

    private init(descriptor: consuming FileDescriptor, path: String) { self.descriptor = descriptor; self.path = path }
}

/// A process named by pid plus start time, so a recycled pid is never mistaken for it.
struct ProcessIdentity: Hashable, Sendable {
    let pid: Int32
    let startTime: UInt64

    static var current: ProcessIdentity {
        let pid = getpid()
        return ProcessIdentity(pid: pid, startTime: processStartTime(pid))
    }

    /// Opens a pidfd that polls readable when this process exits, or nil when it is
    /// already gone (or the pid now belongs to another process).
    ///
    /// The start time is read after the pidfd is open: the pidfd pins the process, so a
    /// matching start time proves the descriptor refers to the right one.
    /// The corresponding C function is `pidfd_open`.
    func openExitDescriptor() -> Int32? {
        if case .running(let fd) = watch() { return fd }
        return nil
    }

    /// What `pidfd_open` says about the process.
    enum Watch {
        /// Running; the descriptor polls readable when it exits.
        case running(Int32)
        /// Gone, a zombie, or the pid now names another process.
        case exited
        /// No descriptor (out of file descriptors, ...): nothing is known.
        case unknown(Errno)
    }

    /// Opens a pidfd on the process (see `openExitDescriptor`), telling an exited process
    /// apart from a failure to watch a live one.
    func watch() -> Watch {
        guard pid > 0 else { return .exited }
        do {
            let fd = try openProcessDescriptor(pid)
            // A pidfd is readable once the process exited, even while it is an unreaped zombie.
            if processStartTime(pid) != startTime || pollReadable([fd.rawValue], timeoutMillis: 0) != nil {
                return .exited
            }
            return .running(fd.take())
        } catch {
            return error == .noSuchProcess ? .exited : .unknown(error)
        }
    }

    /// Whether the process still runs (a zombie, exited but not yet reaped, does not).
    var isAlive: Bool {
        switch watch() {
        case .running(let fd): FileDescriptor(adopting: fd).close(); return true
        case .exited: return false
        case .unknown: return processStartTime(pid) == startTime
        }
    }
}

/// Nanoseconds on CLOCK_MONOTONIC, the clock every timestamp in the protocol uses.
///
/// The corresponding C function is `clock_gettime(CLOCK_MONOTONIC)`.
@inline(__always) public func monotonicNanos() -> UInt64 { fs_sys_monotonic_ns() }

/// Nanoseconds since the Unix epoch on CLOCK_REALTIME (wall-clock creation times).
///
/// The corresponding C function is `clock_gettime(CLOCK_REALTIME)`.
public func realtimeNanos() -> UInt64 { fs_sys_realtime_ns() }

/// The start time of process `pid` in clock ticks since boot (field 22 of
/// `/proc/<pid>/stat`), or 0 when there is no such process.
///
/// Reads `/proc/<pid>/stat` (`fs_sys_process_start_time` in shim.c).
func processStartTime(_ pid: Int32) -> UInt64 { fs_sys_process_start_time(pid) }

/// Waits until one of `fds` is readable; returns it, or nil on timeout (`timeoutMillis`
/// -1: forever) or when a signal interrupted the wait.
///
/// The corresponding C function is `poll`.
func waitReadable(_ fds: [Int32], timeoutMillis: Int32) -> Int32? { pollReadable(fds, timeoutMillis: timeoutMillis) }

/// Waits until one of `fds` is readable (or hung up); returns it, or nil on timeout
/// (`timeoutMillis` -1: forever) or when a signal interrupted the wait. Not retried on
/// EINTR on purpose: the caller's loop checks its stop flag, then waits again.
///
/// The corresponding C function is `poll`.
public func pollReadable(_ fds: [Int32], timeoutMillis: Int32) -> Int32? {
    readableDescriptors(among: fds, timeoutMillis: timeoutMillis).first
}

/// Waits like `pollReadable` and returns every one of `fds` that is readable (or hung
/// up), in the order given; empty on timeout or when a signal interrupted the wait.
///
/// The corresponding C function is `poll`.
public func readableDescriptors(among fds: [Int32], timeoutMillis: Int32) -> [Int32] {
    var pfds = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    guard poll(&pfds, nfds_t(pfds.count), timeoutMillis) > 0 else { return [] }
    return pfds.filter { $0.revents != 0 }.map(\.fd)
}

// MARK: Linux-only descriptors and futexes (the fs_sys_ functions of shim.c)

/// A descriptor that polls readable when process `pid` exits (even as a zombie).
///
/// The corresponding C function is `pidfd_open`.
func openProcessDescriptor(_ pid: Int32) throws(Errno) -> FileDescriptor {
    FileDescriptor(adopting: try retryOnInterrupt { fs_sys_pidfd_open(pid) })
}

/// A non-blocking eventfd counter for waking a thread that polls it.
///
/// The corresponding C function is `eventfd` (`EFD_CLOEXEC | EFD_NONBLOCK`).
func makeEventDescriptor() throws(Errno) -> FileDescriptor {
    FileDescriptor(adopting: try retryOnInterrupt { fs_sys_eventfd() })
}

/// Adds one to an eventfd counter, making it readable.
///
/// The corresponding C function is `write` on an eventfd.
func signalEvent(_ fd: Int32) { _ = try? retryOnInterrupt { fs_sys_eventfd_signal(fd) } }

/// Resets an eventfd counter to zero (no-op when it already is).
///
/// The corresponding C function is `read` on an eventfd.
func drainEvent(_ fd: Int32) { _ = try? retryOnInterrupt { fs_sys_eventfd_drain(fd) } }

/// An inotify descriptor watching `directory` for entries created or renamed into it,
/// and for the directory's own removal. Non-blocking.
///
/// The corresponding C functions are `inotify_init1` and `inotify_add_watch`.
func watchDirectory(_ directory: String) throws(Errno) -> FileDescriptor {
    FileDescriptor(adopting: try retryOnInterrupt { fs_sys_inotify_dir(directory) })
}

/// Reads and discards every pending inotify event; returns how many bytes there were.
///
/// The corresponding C function is `read` on an inotify descriptor.
@discardableResult
func drainDirectoryEvents(_ fd: Int32) -> Int { Int(fs_sys_inotify_drain(fd)) }

/// How a futex wait ended.
enum FutexWait {
    /// Woken by `futexWake` (or spuriously: re-check the word).
    case woken
    /// The word no longer held the expected value when the wait began.
    case valueChanged
    case timedOut
    /// A signal arrived: the caller checks its stop flag.
    case interrupted
}

/// Sleeps while the shared 32-bit `word` holds `expected`, for at most `timeoutNanos`
/// (negative: forever). The word lives in memory shared between processes.
///
/// The corresponding C function is `futex` (`FUTEX_WAIT`).
func futexWait(_ word: UnsafeMutablePointer<UInt32>, expected: UInt32, timeoutNanos: Int64) -> FutexWait {
    if fs_sys_futex_wait(word, expected, timeoutNanos) == 0 { return .woken }
    switch Errno.current {
    case .tryAgain: return .valueChanged
    case .timedOut: return .timedOut
    default: return .interrupted
    }
}

/// Wakes every process and thread waiting on `word`; returns how many were woken.
///
/// The corresponding C function is `futex` (`FUTEX_WAKE`).
@discardableResult
func futexWake(_ word: UnsafeMutablePointer<UInt32>) -> Int { Int(fs_sys_futex_wake(word)) }

// MARK: The descriptor limit and connection floods

/// Raises this process's soft limit on open descriptors (`RLIMIT_NOFILE`) to the hard
/// limit, and returns the soft limit now in force. Call it once at start-up: a producer
/// needs a descriptor per connected consumer, per consumer pidfd and per pool.
///
/// The corresponding C functions are `getrlimit` and `setrlimit`.
@discardableResult
public func raiseFileDescriptorLimit() throws(SystemCallError) -> Int {
    let n = fs_sys_raise_nofile_limit()
    guard n >= 0 else { throw SystemCallError("raise the open-file limit (RLIMIT_NOFILE)", path: nil, .current) }
    return Int(clamping: n)
}

/// Opens the descriptor the accept guard keeps in reserve (idempotent): see `ZMQSocket.bind`.
///
/// The corresponding C function is `open("/dev/null")` (`fs_sys_connection_guard_arm` in shim.c).
func armConnectionGuard() throws(Errno) { _ = try retryOnInterrupt { fs_sys_connection_guard_arm() } }

/// Connections this process refused because it had run out of descriptors (see
/// `ZMQSocket.bind`): a flood of connections to a producer's socket is counted here and
/// logged on standard error (one line a second) instead of aborting inside libzmq.
public var refusedConnectionCount: UInt64 { fs_sys_refused_connections() }
