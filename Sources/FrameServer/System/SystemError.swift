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

    public var description: String { String(cString: strerror(rawValue)) }
}
