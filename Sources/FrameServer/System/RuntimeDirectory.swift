import Glibc

/// The per-user directory that holds every stream's segments, locks and sockets.
///
/// Resolved from `FRAMESRV_DIR`, then `$XDG_RUNTIME_DIR/framesrv`, then
/// `/dev/shm/framesrv-<uid>`. Created with mode 0700; a directory owned by another user
/// is refused, one with group or other access is tightened to 0700.
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
    public init(path: String = RuntimeDirectory.defaultPath) throws(FrameServerError) {
        self.path = path
        if mkdir(path, 0o700) != 0 {
            let e = Errno.current
            guard e == .fileExists else { throw .system("create runtime directory", path: path, e) }
        }
        var st = stat()
        guard stat(path, &st) == 0 else { throw .system("stat runtime directory", path: path, .current) }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            throw .invalidArgument("runtime directory \(path) is not a directory")
        }
        guard st.st_uid == getuid() else {
            throw .insecureDirectory(path, "it belongs to uid \(st.st_uid), not to you (uid \(getuid()))")
        }
        if st.st_mode & 0o077 != 0, chmod(path, 0o700) != 0 {
            throw .system("restrict runtime directory to mode 0700", path: path, .current)
        }
    }

    func file(_ name: String, _ suffix: String) -> String { "\(path)/\(name)\(suffix)" }
    func controlPath(_ stream: String) -> String { file(stream, ".ctl") }
    func lockPath(_ stream: String) -> String { file(stream, ".lock") }
    func socketPath(_ stream: String) -> String { file(stream, ".sock") }
    func poolPath(_ stream: String, epoch: UInt64) -> String { file(stream, ".pool.\(epoch)") }
    func endpoint(_ stream: String) -> String { "ipc://" + socketPath(stream) }

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

    /// The stream a file of this directory belongs to: `NAME.ctl`, `NAME.sock`, `NAME.lock`,
    /// `NAME.pool.<digits>` or `NAME.ctl.tmp.<digits>`; nil for anything else. Names may
    /// contain dots, so the suffix is matched exactly from the end.
    static func stream(ofFile file: String) -> String? {
        for suffix in [".ctl", ".sock", ".lock"] where file.hasSuffix(suffix) {
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

    /// Every file in the directory that belongs to `stream` (control, pools, socket, lock, temporaries).
    func files(of stream: String) -> [String] {
        entries().filter { Self.stream(ofFile: $0) == stream }.map { path + "/" + $0 }
    }
}

/// Stream names are file-name safe: 1 to 48 of `A-Z a-z 0-9 . _ -`, not starting with a dot.
public func validateStreamName(_ name: String) throws(FrameServerError) {
    let ok = !name.isEmpty && name.utf8.count <= 48 && !name.hasPrefix(".")
        && name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
                || c == 0x2E || c == 0x5F || c == 0x2D
        }
    if !ok { throw .invalidStreamName(name) }
}
