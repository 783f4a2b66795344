import Glibc

/// An error number from the C library, with a readable name.
///
/// Read right after the failing call (`Errno.current`), before anything else can
/// overwrite `errno`.
public struct Errno: RawRepresentable, Hashable, Sendable, Error, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's `errno`.
    public static var current: Errno { Errno(rawValue: errno) }

    public static let notPermitted = Errno(rawValue: EPERM)
    public static let noSuchFileOrDirectory = Errno(rawValue: ENOENT)
    public static let noSuchProcess = Errno(rawValue: ESRCH)
    public static let interrupted = Errno(rawValue: EINTR)
    public static let wouldBlock = Errno(rawValue: EWOULDBLOCK)
    public static let permissionDenied = Errno(rawValue: EACCES)
    public static let fileExists = Errno(rawValue: EEXIST)
    public static let timedOut = Errno(rawValue: ETIMEDOUT)
    public static let tryAgain = Errno(rawValue: EAGAIN)
    public static let badFileDescriptor = Errno(rawValue: EBADF)
    public static let noMemory = Errno(rawValue: ENOMEM)
    public static let badAddress = Errno(rawValue: EFAULT)
    public static let busy = Errno(rawValue: EBUSY)
    public static let notDirectory = Errno(rawValue: ENOTDIR)
    public static let isDirectory = Errno(rawValue: EISDIR)
    public static let invalidArgument = Errno(rawValue: EINVAL)
    /// This process reached its file-descriptor limit (`RLIMIT_NOFILE`).
    public static let tooManyOpenFiles = Errno(rawValue: EMFILE)
    /// The whole system ran out of open-file entries.
    public static let fileTableOverflow = Errno(rawValue: ENFILE)
    public static let fileTooLarge = Errno(rawValue: EFBIG)
    public static let noSpace = Errno(rawValue: ENOSPC)
    public static let readOnlyFileSystem = Errno(rawValue: EROFS)
    public static let brokenPipe = Errno(rawValue: EPIPE)
    public static let tooManySymbolicLinks = Errno(rawValue: ELOOP)
    public static let nameTooLong = Errno(rawValue: ENAMETOOLONG)
    public static let notSupported = Errno(rawValue: EOPNOTSUPP)
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    public static let connectionAborted = Errno(rawValue: ECONNABORTED)
    public static let noDevice = Errno(rawValue: ENXIO)

    public var description: String { String(cString: strerror(rawValue)) }
}

/// A system call that failed: what it was doing, on which file, and the error number.
/// The building block of the operations' errors (`ProducerError.system`, ...), which add
/// what the caller can do about it.
public struct SystemCallError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What the call was doing, as a verb phrase ("create", "watch directory").
    public let operation: String
    /// The file it was done on, if any.
    public let path: String?
    public let errno: Errno

    public init(_ operation: String, path: String?, _ errno: Errno) {
        self.operation = operation; self.path = path; self.errno = errno
    }

    public var description: String {
        if let path { return "cannot \(operation) \(path): \(errno)" }
        return "cannot \(operation): \(errno)"
    }
}
