import CFrameServer

/// Everything that can go wrong in framesrv, each case saying what happened and what to do.
public enum FrameServerError: Error, CustomStringConvertible, Equatable, Sendable {
    /// A stream name that cannot be used as a file name.
    case invalidStreamName(String)
    /// Another live process already produces this stream.
    case streamBusy(String, producerPID: Int32)
    /// No producer appeared for the stream within the wait time.
    case streamNotFound(String, directory: String, waitedSeconds: Double)
    /// The stream ended before this consumer attached (its frames went to no consumer).
    case streamEnded(String, frames: UInt64)
    /// A segment or message speaks another protocol version.
    case versionMismatch(what: String, found: UInt32, expected: UInt32)
    /// A segment or message does not start with the expected magic.
    case badMagic(what: String, found: UInt32)
    /// A segment's contents make no sense.
    case corruptSegment(String, String)
    /// All consumer entries of the stream are taken.
    case tooManyConsumers(String, max: Int)
    /// A live consumer tried to hold more frames than the stream allows at once.
    case holdLimit(max: Int)
    /// The runtime directory is not private to this user.
    case insecureDirectory(String, String)
    /// A system call failed.
    case system(String, path: String?, Errno)
    /// libzmq refused an operation.
    case zeromq(String, String)
    /// A value from the caller is out of range.
    case invalidArgument(String)
    /// The producer is gone and the stream cannot continue.
    case producerGone(String)
    /// A shared-memory segment failed validation or was truncated while mapped.
    case segment(SegmentError)
    /// A frame header in a pool slot failed validation: the frame was released and
    /// skipped (`Consumer.badFrames` counts it); the next `next()` goes on after it.
    case badFrame(path: String, slot: UInt32, FrameHeaderError)
    /// A consumer found the stream but could not attach.
    case attach(AttachError)
    /// A producer could not start or reserve a slot.
    case produce(ProduceError)

    public var description: String {
        switch self {
        case .invalidStreamName(let n):
            return "invalid stream name '\(n)': use 1 to 48 letters, digits, '.', '_' or '-', not starting with '.'"
        case .streamBusy(let n, let pid):
            return "stream '\(n)' already has a running producer (pid \(pid)); stop it or pick another --out name"
        case .streamNotFound(let n, let dir, let s):
            return "no stream named '\(n)' appeared in \(dir) within \(s) s; start a producer with --out \(n) (or check FRAMESRV_DIR)"
        case .streamEnded(let n, let frames):
            return "stream '\(n)' ended before this consumer attached (\(frames) frames published to no consumer);"
                + " start consumers first (the producer waits for one unless --no-wait), or --wait S for its next producer"
        case .versionMismatch(let what, let found, let expected):
            return "\(what) speaks framesrv protocol version \(found), but this program speaks version \(expected); run the same framesrv version on both sides"
        case .badMagic(let what, let found):
            return "\(what) is not a framesrv \(what) (magic 0x\(String(found, radix: 16))); is something else using this path?"
        case .corruptSegment(let path, let why):
            return "shared-memory segment \(path) is unusable: \(why); run 'framesrv clean' to remove leftovers"
        case .tooManyConsumers(let n, let max):
            return "stream '\(n)' already has \(max) consumers, the most one stream supports; stop one first"
        case .holdLimit(let max):
            return "a live consumer may hold at most \(max) frames at once; release a frame before taking the next"
        case .insecureDirectory(let path, let why):
            return "refusing runtime directory \(path): \(why); set FRAMESRV_DIR to a private directory"
        case .system(let op, let path, let e):
            if let path { return "cannot \(op) \(path): \(e)" }
            return "cannot \(op): \(e)"
        case .zeromq(let op, let msg):
            return "ZeroMQ could not \(op): \(msg)"
        case .invalidArgument(let msg):
            return msg
        case .producerGone(let n):
            return "the producer of stream '\(n)' exited"
        case .segment(let e):
            return "shared-memory segment \(e.path) is unusable: \(e.reason); run 'framesrv clean' to remove leftovers"
        case .badFrame(let path, let slot, let e):
            return "bad frame header in \(path) slot \(slot): \(e); frame skipped"
        case .attach(let e):
            return e.description
        case .produce(let e):
            return e.description
        }
    }
}

extension FrameServerError {
    /// A segment error as the consumer and monitors report it: a wrong magic or version
    /// keeps its own case (the message names both versions); the rest is `.segment`.
    public init(_ e: SegmentError) {
        switch e {
        case .versionMismatch(let path, let found):
            self = .versionMismatch(what: "control segment \(path)", found: found, expected: FS_PROTOCOL_VERSION)
        case .badMagic(let path, let found):
            self = .badMagic(what: "control segment \(path)", found: found)
        case .system(let op, let path, let errno):
            self = .system(op, path: path, errno)
        default:
            self = .segment(e)
        }
    }
}
