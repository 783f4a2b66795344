import Glibc

/// The per-user directory that holds every stream's segments, locks and sockets.
///
/// Resolved from `FRAMESRV_DIR`, then `$XDG_RUNTIME_DIR/framesrv`, then
/// `/dev/shm/framesrv-<uid>`. Created with mode 0700; a directory owned by another user
/// is refused, one with group or other access is tightened to 0700. A symbolic link in
/// its place is followed only when the link and the directory it names are both yours.
public struct RuntimeDirectory: Sendable, Hashable {
    public let path: String

    /// The directory this process would use, without touching the file system.
    public static var defaultPath: String {
        if let dir = getenv("FRAMESRV_DIR").map({ String(cString: $0) }), !dir.isEmpty { return dir }
        if let xdg = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !xdg.isEmpty {
            return xdg + "/framesrv"
        }
        var st = stat()
        if stat("/dev/shm", &st) == 0 { return "/dev/shm/framesrv-\(getuid())" }
        return "/tmp/framesrv-\(getuid())"
    }

    /// Opens (and creates, with mode 0700) the runtime directory at `path`.
    public init(path: String = RuntimeDirectory.defaultPath) throws(RuntimeDirectoryError) {
        do { _ = try makeDirectory(path, mode: 0o700) } catch {
            throw .system(SystemCallError("create runtime directory", path: path, error))
        }
        try self.init(checking: path)
    }

    /// Opens the runtime directory at `path` if it exists, without creating it (for
    /// monitors: listing streams must not leave a directory behind). Nil when there is
    /// nothing at `path`; the same checks as `init(path:)` otherwise.
    public static func existing(path: String = RuntimeDirectory.defaultPath) throws(RuntimeDirectoryError) -> RuntimeDirectory? {
        do { _ = try linkStatus(path) } catch {
            if error == .noSuchFileOrDirectory { return nil }
            throw .system(SystemCallError("stat runtime directory", path: path, error))
        }
        return try RuntimeDirectory(checking: path)
    }

    /// Checks what is at `path`: a directory of ours, or a link of ours to a directory of ours.
    ///
    /// The directory is opened once (`O_NOFOLLOW` unless the link was vetted) and checked
    /// and tightened through that descriptor (`fstat`, `fchmod`), so nothing reached
    /// through another user's link is ever changed.
    private init(checking path: String) throws(RuntimeDirectoryError) {
        self.path = path
        let uid = getuid()
        let entry: stat
        do { entry = try linkStatus(path) } catch { throw .system(SystemCallError("stat runtime directory", path: path, error)) }
        let isLink = (entry.st_mode & S_IFMT) == S_IFLNK
        if isLink, entry.st_uid != uid {
            throw .notPrivate(path: path, why: "it is a symbolic link owned by uid \(entry.st_uid), not by you (uid \(uid))")
        }
        let dir: FileDescriptor
        do { dir = try .open(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK | (isLink ? 0 : O_NOFOLLOW)) } catch {
            if error == .notDirectory || error == .tooManySymbolicLinks {
                throw .notDirectory(path: path)
            }
            throw .system(SystemCallError(isLink ? "open the directory the runtime directory links to" : "open runtime directory",
                                          path: path, error))
        }
        let st: stat
        do { st = try dir.status() } catch { throw .system(SystemCallError("stat runtime directory", path: path, error)) }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            throw .notDirectory(path: path)
        }
        if !isLink, st.st_dev != entry.st_dev || st.st_ino != entry.st_ino {
            throw .notPrivate(path: path, why: "it was replaced while being checked")
        }
        guard st.st_uid == uid else {
            let what = isLink ? "the directory it links to belongs" : "it belongs"
            throw .notPrivate(path: path, why: "\(what) to uid \(st.st_uid), not to you (uid \(uid))")
        }
        if st.st_mode & 0o077 != 0 {
            do { try dir.changeMode(0o700) } catch {
                throw .system(SystemCallError("restrict runtime directory to mode 0700", path: path, error))
            }
        }
    }

    func file(_ name: String, _ suffix: String) -> String { "\(path)/\(name)\(suffix)" }
    func controlPath(_ stream: String) -> String { file(stream, ".ctl") }
    func lockPath(_ stream: String) -> String { file(stream, ".lock") }
    func socketPath(_ stream: String) -> String { file(stream, ".sock") }
    func poolPath(_ stream: String, epoch: UInt64) -> String { file(stream, ".pool.\(epoch)") }
    /// A stream that ended with frames no consumer received leaves this note (its frame
    /// count), so that a consumer started too late is told instead of waiting forever.
    /// The next producer of the name, and `framesrv clean`, remove it.
    func endedPath(_ stream: String) -> String { file(stream, ".ended") }
    func endpoint(_ stream: String) -> String { "ipc://" + socketPath(stream) }
    /// The control socket of a producer that reads a file (`framesrv ctl`): a ZeroMQ REP
    /// socket, mode 0600, removed with the stream (PROTOCOL.md 3.2).
    public func controlSocketPath(_ stream: String) -> String { file(stream, ".control") }

    /// Names of the streams that have a control segment in this directory.
    public func streamNames() -> [String] {
        entries().compactMap { $0.hasSuffix(".ctl") ? String($0.dropLast(4)) : nil }.sorted()
    }

    /// The names of the directory's entries.
    func entries() -> [String] {
        guard let d = opendir(path) else { return [] }
        defer { closedir(d) }
        var out: [String] = []
        while let entry = readdir(d) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            if name != ".", name != ".." { out.append(name) }
        }
        return out
    }

    /// The stream a file of this directory belongs to: `NAME.ctl`, `NAME.sock`, `NAME.cuda`, `NAME.lock`, `NAME.ended`,
    /// `NAME.control`, `NAME.pool.<digits>` or `NAME.ctl.tmp.<digits>`; nil for anything else. Names may
    /// contain dots, so the suffix is matched exactly from the end.
    static func stream(ofFile file: String) -> String? {
        for suffix in [".ctl", ".sock", ".cuda", ".lock", ".ended", ".control"] where file.hasSuffix(suffix) {
            let s = String(file.dropLast(suffix.count))
            return s.isEmpty ? nil : s
        }
        // NAME.pool.<digits> / NAME.ctl.tmp.<digits>
        let digits = file.reversed().prefix { $0.isASCII && $0.isNumber }.count
        guard digits > 0 else { return nil }
        let head = file.dropLast(digits)
        for marker in [".pool.", ".ctl.tmp."] where head.hasSuffix(marker) {
            let s = String(head.dropLast(marker.count))
            return s.isEmpty ? nil : s
        }
        return nil
    }

    /// Every file in the directory that belongs to `stream` (control, pools, sockets, lock, temporaries).
    func files(of stream: String) -> [String] {
        entries().filter { Self.stream(ofFile: $0) == stream }.map { path + "/" + $0 }
    }
}

/// Stream names are file-name safe: 1 to 48 of `A-Z a-z 0-9 . _ -`, not starting with a dot.
public func validateStreamName(_ name: String) throws(StreamNameError) {
    let ok = !name.isEmpty && name.utf8.count <= 48 && !name.hasPrefix(".")
        && name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                || c == 0x2E || c == 0x5F || c == 0x2D
        }
    if !ok { throw .invalid(name) }
}

/// Why the runtime directory (`FRAMESRV_DIR`) cannot be used.
public enum RuntimeDirectoryError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Another user owns it (or the link to it), or it was swapped while checked: set
    /// FRAMESRV_DIR to a private directory.
    case notPrivate(path: String, why: String)
    /// Something other than a directory is at its path: remove it or set FRAMESRV_DIR.
    case notDirectory(path: String)
    /// Creating, opening, checking or restricting it failed.
    case system(SystemCallError)

    public var description: String {
        switch self {
        case .notPrivate(let path, let why): "refusing runtime directory \(path): \(why); set FRAMESRV_DIR to a private directory"
        case .notDirectory(let path): "runtime directory \(path) is not a directory"
        case .system(let e): e.description
        }
    }
}

/// Why a stream name was refused (`validateStreamName`).
public enum StreamNameError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Not a file-name-safe name: use 1 to 48 of `A-Z a-z 0-9 . _ -`, not starting with a dot.
    case invalid(String)

    public var description: String {
        switch self {
        case .invalid(let n): "invalid stream name '\(n)': use 1 to 48 letters, digits, '.', '_' or '-', not starting with '.'"
        }
    }
}
