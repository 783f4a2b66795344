import FrameServer

/// Why a preview or a snapshot cannot be had, each case saying what to do.
public enum PreviewError: Error, CustomStringConvertible, Sendable, Equatable {
    /// Not a stream name framesrv accepts.
    case invalidStreamName(String)
    /// No such stream in the runtime directory.
    case noSuchStream(String)
    /// The stream already has `limit` preview viewers.
    case tooManyViewers(stream: String, limit: Int)
    /// All streams together already have `limit` preview viewers.
    case tooManyViewersInAll(limit: Int)
    /// No frame came from the stream within `seconds` (snapshots).
    case noFrame(String, seconds: Double)
    /// The frame could not be read or encoded (the reason).
    case failed(String, String)
    /// The hub was closed (the server is stopping).
    case closed

    public var description: String {
        switch self {
        case .invalidStreamName(let n): return "'\(n)' is not a stream name"
        case .noSuchStream(let n): return "no stream '\(n)' (see 'framesrv ls')"
        case .tooManyViewers(let n, let limit):
            return "stream '\(n)' already has \(limit) preview viewers, the most allowed: close one first"
        case .tooManyViewersInAll(let limit): return "\(limit) previews are open, the most allowed: close one first"
        case .noFrame(let n, let s): return "no frame from stream '\(n)' within \(s) s (is it running? see 'framesrv ls')"
        case .failed(let n, let why): return "cannot preview stream '\(n)': \(why)"
        case .closed: return "the preview server is stopping"
        }
    }
}
