import Glibc

// The one layer that calls the C library for descriptors and paths. Every wrapper reads
// errno right after its call and names the C function it wraps; callers add the context
// (which file, which operation) when they turn an Errno into an operation's error.

/// Calls `call` again for as long as it fails with `EINTR`; returns its result, or throws
/// the error number it failed with (`call` returns -1 and sets errno on failure).
///
/// The one EINTR loop: no other code retries a system call by hand.
@inlinable
public func retryOnInterrupt<T: FixedWidthInteger>(_ call: () -> T) throws(Errno) -> T {
    while true {
        let r = call()
        if r != -1 { return r }
        let e = Errno.current
        if e != .interrupted { throw e }
    }
}

/// An open file descriptor with one owner; the descriptor is closed when the owner is done.
///
/// `~Copyable`, so it cannot be closed twice or used after `close()`/`take()`.
public struct FileDescriptor: ~Copyable {
    /// The descriptor number, valid while this value lives.
    public let rawValue: Int32

    /// Takes ownership of `rawValue` (an open descriptor nobody else will close).
    public init(adopting rawValue: Int32) { self.rawValue = rawValue }

    deinit { _ = Glibc.close(rawValue) }

    /// Closes the descriptor now (not retried on EINTR: Linux has released it anyway).
    ///
    /// The corresponding C function is `close`.
    public consuming func close() {
        _ = Glibc.close(rawValue)
        discard self
    }

    /// Gives up ownership: the caller now closes the returned number.
    public consuming func take() -> Int32 {
        let fd = rawValue
        discard self
        return fd
    }

    /// Opens `path` with `flags` plus `O_CLOEXEC` (and `mode` when creating).
    ///
    /// The corresponding C function is `open`.
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o600) throws(Errno) -> FileDescriptor {
        FileDescriptor(adopting: try retryOnInterrupt { Glibc.open(path, flags | O_CLOEXEC, mode) })
    }

    /// The file's status (type, owner, mode, size).
    ///
    /// The corresponding C function is `fstat`.
    public func status() throws(Errno) -> stat {
        var st = stat()
        _ = try retryOnInterrupt { fstat(rawValue, &st) }
        return st
    }

    /// Writes all of `bytes`, continuing after short writes and EINTR (see the free
    /// `writeAll(_:_:shouldStop:)` for `shouldStop`).
    ///
    /// The corresponding C function is `write`.
    public func writeAll(_ bytes: UnsafeRawBufferPointer, shouldStop: (() -> Bool)? = nil) throws(Errno) {
        try FrameServer.writeAll(rawValue, bytes, shouldStop: shouldStop)
    }

    /// Reads at most `buffer.count` bytes; 0 at end of file.
    ///
    /// The corresponding C function is `read`.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(Errno) -> Int {
        try retryOnInterrupt { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Reserves `size` bytes of real storage (on tmpfs: memory), so that a later write
    /// through a mapping cannot fail with SIGBUS for lack of space.
    ///
    /// The corresponding C function is `posix_fallocate`.
    func allocate(_ size: Int) throws(Errno) {
        while true {
            let r = posix_fallocate(rawValue, 0, off_t(size))   // returns the error, not -1
            if r == 0 { return }
            if r != EINTR { throw Errno(rawValue: r) }
        }
    }

    /// Sets the file's size.
    ///
    /// The corresponding C function is `ftruncate`.
    func truncate(_ size: Int) throws(Errno) {
        _ = try retryOnInterrupt { ftruncate(rawValue, off_t(size)) }
    }

    /// Sets the permission bits of the open file (never follows a path).
    ///
    /// The corresponding C function is `fchmod`.
    func changeMode(_ mode: mode_t) throws(Errno) {
        _ = try retryOnInterrupt { fchmod(rawValue, mode) }
    }

    /// Takes an exclusive lock without waiting; false when another open file holds it.
    ///
    /// The corresponding C function is `flock` (`LOCK_EX | LOCK_NB`).
    func tryLockExclusive() throws(Errno) -> Bool {
        do {
            _ = try retryOnInterrupt { flock(rawValue, LOCK_EX | LOCK_NB) }
            return true
        } catch {
            if error == .wouldBlock { return false }
            throw error
        }
    }

    /// Maps `size` bytes of the file shared, read-write or read-only (`PROT_READ`: writes fault).
    /// `populate` faults every page in now (`MAP_POPULATE`).
    ///
    /// The corresponding C function is `mmap`.
    func map(size: Int, writable: Bool, populate: Bool = false) throws(Errno) -> UnsafeMutableRawPointer {
        let prot = writable ? (PROT_READ | PROT_WRITE) : PROT_READ
        let p = mmap(nil, size, prot, MAP_SHARED | (populate ? MAP_POPULATE : 0), rawValue, 0)
        guard let p, p != MAP_FAILED else { throw Errno.current }
        return p
    }
}

/// Writes all of `bytes` to `fd`, continuing after short writes and EINTR.
///
/// `shouldStop` is for writes a stop signal must be able to end (framesrv's SIGINT and
/// SIGTERM handlers do not restart calls): after an EINTR or a short write it is asked,
/// and when it says so the write ends with `Errno.interrupted`.
///
/// The one `writeAll`. The corresponding C function is `write`.
public func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, shouldStop: (() -> Bool)? = nil) throws(Errno) {
    var done = 0
    while done < bytes.count {
        guard let n = try writeOnce(shouldStop, { Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done) })
        else { continue }
        done += n
        if done < bytes.count, shouldStop?() == true { throw .interrupted }
    }
}

/// Writes every byte `vectors` point at to `fd` (gathered, at most `IOV_MAX` at a time),
/// continuing after short writes and EINTR; `shouldStop` as for `writeAll(_:_:shouldStop:)`.
/// `vectors` is consumed: on return or throw it describes what was not written.
/// Returns the number of bytes written.
///
/// The corresponding C function is `writev`.
@discardableResult
public func writeAll(_ fd: Int32, _ vectors: inout [iovec], shouldStop: (() -> Bool)? = nil) throws(Errno) -> Int {
    var first = 0, total = 0
    while first < vectors.count, vectors[first].iov_len == 0 { first += 1 }
    while first < vectors.count {
        let count = min(vectors.count - first, 1024)   // IOV_MAX on Linux
        guard let n = try writeOnce(shouldStop, { vectors.withUnsafeBufferPointer { writev(fd, $0.baseAddress! + first, Int32(count)) } })
        else { continue }
        total += n
        var left = n
        while left > 0 {   // n never exceeds what vectors[first...] holds
            let len = vectors[first].iov_len
            let used = min(left, len)
            vectors[first].iov_base = vectors[first].iov_base.map { $0 + used }
            vectors[first].iov_len -= used
            left -= used
            if used == len { first += 1 }
        }
        while first < vectors.count, vectors[first].iov_len == 0 { first += 1 }
        if first < vectors.count, shouldStop?() == true { throw .interrupted }
    }
    return total
}

/// One `write`/`writev` of a writeAll loop: the bytes it wrote, or nil to call again (EINTR
/// and no stop requested); a stop request after EINTR throws `Errno.interrupted`.
private func writeOnce(_ shouldStop: (() -> Bool)?, _ call: () -> Int) throws(Errno) -> Int? {
    let n = call()
    if n >= 0 { return n }
    let e = Errno.current
    if e != .interrupted { throw e }
    if shouldStop?() == true { throw .interrupted }
    return nil
}

/// Unmaps a mapping made by `FileDescriptor.map`.
///
/// The corresponding C function is `munmap`.
func unmap(_ base: UnsafeMutableRawPointer, size: Int) { _ = munmap(base, size) }

/// Removes the name `path` (the file lives on while it is open or mapped).
///
/// The corresponding C function is `unlink`.
public func removeFile(_ path: String) throws(Errno) {
    _ = try retryOnInterrupt { unlink(path) }
}

/// Atomically gives the file at `source` the name `destination`, replacing what was there.
///
/// The corresponding C function is `rename`.
public func renameFile(_ source: String, to destination: String) throws(Errno) {
    _ = try retryOnInterrupt { rename(source, destination) }
}

/// Sets the permission bits of `path`. Follows symbolic links: use it only on a path in
/// a directory that `RuntimeDirectory` checked (prefer `FileDescriptor.changeMode`).
///
/// The corresponding C function is `chmod`.
public func changeMode(_ path: String, _ mode: mode_t) throws(Errno) {
    _ = try retryOnInterrupt { chmod(path, mode) }
}

/// The status of `path` itself: a symbolic link is described, not followed.
///
/// The corresponding C function is `lstat`.
func linkStatus(_ path: String) throws(Errno) -> stat {
    var st = stat()
    _ = try retryOnInterrupt { lstat(path, &st) }
    return st
}

/// Creates the directory `path` with `mode`; false when something already has that name.
///
/// The corresponding C function is `mkdir`.
func makeDirectory(_ path: String, mode: mode_t) throws(Errno) -> Bool {
    do {
        _ = try retryOnInterrupt { mkdir(path, mode) }
        return true
    } catch {
        if error == .fileExists { return false }
        throw error
    }
}
