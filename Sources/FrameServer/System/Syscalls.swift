import CFrameServer
import Glibc

// The one internal layer that talks to the C library for files, mappings, locks and
// futexes. Everything above it speaks Swift and FrameServerError.

/// A file mapped into this process with `mmap(MAP_SHARED)`; unmapped on deinit.
///
/// The corresponding C functions are `open`, `ftruncate` and `mmap`.
final class MappedFile: @unchecked Sendable {
    // Sendable: the mapping's address and size never change; what the bytes mean and
    // who may touch them is the protocol's business (atomics in CFrameServer.h).
    let path: String
    let fd: Int32
    let base: UnsafeMutableRawPointer
    let size: Int
    let writable: Bool

    private init(path: String, fd: Int32, base: UnsafeMutableRawPointer, size: Int, writable: Bool) {
        self.path = path; self.fd = fd; self.base = base; self.size = size; self.writable = writable
    }

    /// Creates a new file of `size` zero bytes with mode 0600 (fails if it exists) and maps it read-write.
    static func create(_ path: String, size: Int) throws(FrameServerError) -> MappedFile {
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .system("create", path: path, .current) }
        // posix_fallocate, not just ftruncate: on tmpfs the memory is then really there, and a
        // pool that does not fit fails here with ENOSPC instead of SIGBUS at first touch.
        let r = posix_fallocate(fd, 0, off_t(size))
        if r != 0 {
            close(fd); unlink(path)
            throw .system("allocate \(size) bytes for", path: path, Errno(rawValue: r))
        }
        // MAP_POPULATE: the creator (the producer) writes every page; mapping them all now
        // costs one call instead of a page fault per 4 KiB in the middle of the stream.
        return try map(path, fd: fd, size: size, writable: true, populate: true)
    }

    /// Maps an existing file, read-write or read-only (`PROT_READ`: writes fault).
    static func openExisting(_ path: String, writable: Bool) throws(FrameServerError) -> MappedFile {
        let fd = Glibc.open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC)
        guard fd >= 0 else { throw .system("open", path: path, .current) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { let e = Errno.current; close(fd); throw .system("stat", path: path, e) }
        return try map(path, fd: fd, size: Int(st.st_size), writable: writable)
    }

    private static func map(_ path: String, fd: Int32, size: Int, writable: Bool,
                            populate: Bool = false) throws(FrameServerError) -> MappedFile {
        guard size > 0 else { close(fd); throw .corruptSegment(path, "it is empty") }
        let prot = writable ? (PROT_READ | PROT_WRITE) : PROT_READ
        let p = mmap(nil, size, prot, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0)
        guard let p, p != MAP_FAILED else { let e = Errno.current; close(fd); throw .system("map", path: path, e) }
        return MappedFile(path: path, fd: fd, base: p, size: size, writable: writable)
    }

    deinit {
        munmap(base, size)
        close(fd)
    }
}

/// An exclusive `flock` on a lock file, held for the life of the object.
///
/// The kernel drops the lock when the holder dies, which is how a stream's producer
/// is known to be alive regardless of PID reuse. The corresponding C function is `flock`.
final class FileLock {
    let fd: Int32
    let path: String

    /// Takes the lock or returns nil when another process holds it.
    ///
    /// After locking it checks that `path` still names the locked file: `framesrv clean`
    /// may have unlinked it in between, and a lock on an unlinked file protects nothing.
    static func tryExclusive(_ path: String) throws(FrameServerError) -> FileLock? {
        while true {
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw .system("open lock", path: path, .current) }
            if flock(fd, LOCK_EX | LOCK_NB) != 0 {
                let e = Errno.current
                close(fd)
                if e == .wouldBlock { return nil }
                throw .system("lock", path: path, e)
            }
            var held = stat(), named = stat()
            if fstat(fd, &held) == 0, stat(path, &named) == 0, held.st_ino == named.st_ino, held.st_dev == named.st_dev {
                return FileLock(fd: fd, path: path)
            }
            close(fd)   // unlinked under us: try again with the file now at `path`
        }
    }

    /// Removes the lock file while holding the lock (so no producer can hold a lock on
    /// the unlinked file: see `tryExclusive`), then releases it.
    func unlinkAndRelease() { unlink(path) }

    private init(fd: Int32, path: String) { self.fd = fd; self.path = path }
    deinit { close(fd) }
}

/// A process named by pid plus start time, so a recycled pid is never mistaken for it.
struct ProcessIdentity: Hashable, Sendable {
    let pid: Int32
    let startTime: UInt64

    static var current: ProcessIdentity {
        let pid = getpid()
        return ProcessIdentity(pid: pid, startTime: fs_sys_process_start_time(pid))
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
        let fd = fs_sys_pidfd_open(pid)
        guard fd >= 0 else {
            let e = Errno.current
            return e == .noSuchProcess ? .exited : .unknown(e)
        }
        // A pidfd is readable once the process exited, even while it is an unreaped zombie.
        var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        if fs_sys_process_start_time(pid) != startTime || poll(&p, 1, 0) != 0 { close(fd); return .exited }
        return .running(fd)
    }

    /// Whether the process still runs (a zombie, exited but not yet reaped, does not).
    var isAlive: Bool {
        switch watch() {
        case .running(let fd): close(fd); return true
        case .exited: return false
        case .unknown: return fs_sys_process_start_time(pid) == startTime
        }
    }
}

/// Nanoseconds on CLOCK_MONOTONIC, the clock every timestamp in the protocol uses.
@inline(__always) public func monotonicNanos() -> UInt64 { fs_sys_monotonic_ns() }

/// Waits until one of `fds` is readable; returns it, or nil on timeout (`timeoutMillis`
/// -1: forever) or when a signal interrupted the wait.
///
/// The corresponding C function is `poll`.
func waitReadable(_ fds: [Int32], timeoutMillis: Int32) -> Int32? {
    var pfds = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    let r = poll(&pfds, nfds_t(pfds.count), timeoutMillis)
    return r > 0 ? pfds.first { $0.revents != 0 }?.fd : nil
}
