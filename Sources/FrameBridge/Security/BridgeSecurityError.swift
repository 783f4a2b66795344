/// Why the bridge's security could not be set up: one line each, saying what to do.
public enum BridgeSecurityError: Error, CustomStringConvertible, Equatable, Sendable {
    /// Neither key files nor --insecure: the bridge does not fall back to plaintext.
    case noKeys(role: String)
    /// A key option is missing for CURVE (the option, what it holds).
    case missingKey(option: String, what: String)
    /// Key files and --insecure together.
    case conflictingInsecure
    /// A key file or allow-list could not be read (path, reason).
    case unreadable(path: String, reason: String)
    /// A key file or allow-list that is not in its format (path, reason).
    case malformed(path: String, reason: String)
    /// A secret key file that others may read, or an allow-list others may change (path, mode).
    case badPermissions(path: String, mode: UInt32, reason: String)
    /// An allow-list line that is not a Z85 key (path, line number, reason).
    case allowListLine(path: String, line: Int, reason: String)
    /// Refusing to overwrite an existing key file.
    case exists(path: String)
    /// A key file could not be written (path, reason).
    case unwritable(path: String, reason: String)
    /// libzmq refused a security option or the ZAP handler's socket (what, libzmq's reason).
    case zeromq(String, String)

    public var description: String {
        switch self {
        case .noKeys(let role):
            return "bridge \(role): no keys: make them with 'framesrv bridge keygen -o NAME' and pass "
                + (role == "recv" ? "--key NAME.key_secret --allow CLIENTS" : "--key NAME.key_secret --server-key RECEIVER.key")
                + ", or pass --insecure for plaintext"
        case .missingKey(let option, let what):
            return "missing \(option): \(what) (CURVE needs it; see 'framesrv bridge --help')"
        case .conflictingInsecure:
            return "--insecure turns CURVE off: give it or the key options (--key, --server-key, --allow), not both"
        case .unreadable(let path, let reason):
            return "\(path): cannot read: \(reason)"
        case .malformed(let path, let reason):
            return "\(path): \(reason)"
        case .badPermissions(let path, let mode, let reason):
            return "\(path): mode \(String(mode & 0o7777, radix: 8)): \(reason)"
        case .allowListLine(let path, let line, let reason):
            return "\(path):\(line): \(reason)"
        case .exists(let path):
            return "\(path) already exists: not overwriting a key file (remove it or choose another -o NAME)"
        case .unwritable(let path, let reason):
            return "\(path): cannot write: \(reason)"
        case .zeromq(let what, let reason):
            return "cannot \(what): \(reason)"
        }
    }
}
