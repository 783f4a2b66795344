import CFrameServer

/// Why a shared-memory segment (a control segment or a pool) cannot be used. Every case
/// names the file, and where a value is at fault the field and the value, in one line.
public enum SegmentError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The path is not a regular file (a FIFO, a device, a directory, a symlink).
    case notRegularFile(path: String)
    /// The file is smaller than its header says it must be.
    case tooSmall(path: String, size: Int, needed: Int)
    /// The file does not start with the expected magic.
    case badMagic(path: String, found: UInt32)
    /// The file speaks another protocol version.
    case versionMismatch(path: String, found: UInt32)
    /// A header field holds a value the protocol does not allow.
    case badField(path: String, field: String, value: UInt64, expected: String)
    /// The file was truncated while mapped (caught SIGBUS): what it held is gone.
    case truncated(path: String)
    /// A system call on the file failed.
    case system(operation: String, path: String, Errno)

    public var path: String {
        switch self {
        case .notRegularFile(let p), .tooSmall(let p, _, _), .badMagic(let p, _), .versionMismatch(let p, _),
             .badField(let p, _, _, _), .truncated(let p), .system(_, let p, _): p
        }
    }

    /// What is wrong, without the path (for messages that name the file once already).
    public var reason: String {
        switch self {
        case .notRegularFile: "it is not a regular file"
        case .tooSmall(_, let size, let needed): "it has \(size) bytes, its header needs \(needed)"
        case .badMagic(_, let found): "it is not a framesrv control segment (magic 0x\(String(found, radix: 16)))"
        case .versionMismatch(_, let found):
            "it speaks framesrv protocol version \(found), but this program speaks version \(FS_PROTOCOL_VERSION)"
        case .badField(_, let field, let value, let expected): "\(field) is \(value), expected \(expected)"
        case .truncated: "it was truncated while mapped"
        case .system(let op, _, let e): "cannot \(op) it: \(e)"
        }
    }

    /// One line: the file, then what is wrong with it.
    public var description: String { "\(path): \(reason)" }

    /// The one line a producer, consumer or monitor reports for it, with what to do: a
    /// wrong magic or version names both sides, a failed call names the file, the rest
    /// points at `framesrv clean`.
    public var userMessage: String {
        switch self {
        case .versionMismatch(let path, let found):
            versionMismatchLine("control segment \(path)", found: found)
        case .badMagic(let path, let found):
            "control segment \(path) is not a framesrv control segment \(path) (magic 0x\(String(found, radix: 16))); is something else using this path?"
        case .system(let op, let path, let e):
            SystemCallError(op, path: path, e).description
        default:
            "shared-memory segment \(path) is unusable: \(reason); run 'framesrv clean' to remove leftovers"
        }
    }
}

/// What is said when a segment or message speaks another protocol version: both versions, and what to do.
func versionMismatchLine(_ what: String, found: UInt32) -> String {
    "\(what) speaks framesrv protocol version \(found), but this program speaks version \(FS_PROTOCOL_VERSION); run the same framesrv version on both sides"
}

/// Why a frame header in a pool slot cannot be trusted. The reader adds the file and slot.
public enum FrameHeaderError: Error, Equatable, Sendable, CustomStringConvertible {
    case badMagic(found: UInt32)
    case versionMismatch(found: UInt32)
    /// A field holds a value the protocol does not allow, or one that disagrees with others.
    case badField(field: String, value: Int64, expected: String)

    public var description: String {
        switch self {
        case .badMagic(let found): "not a framesrv frame header (magic 0x\(String(found, radix: 16)))"
        case .versionMismatch(let found): "frame header speaks protocol version \(found), expected \(FS_PROTOCOL_VERSION)"
        case .badField(let field, let value, let expected): "\(field) is \(value), expected \(expected)"
        }
    }
}
