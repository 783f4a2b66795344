/// What can go wrong recording or replaying; each case says what to do.
public enum RecordingError: Error, CustomStringConvertible, Sendable {
    /// The file cannot be created or written (path, FFmpeg's or the system's reason).
    case cannotWrite(String, String)
    /// The file cannot be opened or is not a framesrv recording (path, reason).
    case cannotRead(String, String)
    /// `--codec h264` and a pixel format libx264 does not take (format, what it takes).
    case codecRefusesFormat(String, String, String)
    /// An FFmpeg call failed (its name, FFmpeg's message).
    case ffmpeg(String, String)
    /// The snapshot ring would need more memory than --snapshot-max-mb allows (needed MB, allowed MB, what).
    case snapshotTooLarge(Int, Int, String)

    public var description: String {
        switch self {
        case .cannotWrite(let path, let why): "cannot write '\(path)': \(why)"
        case .cannotRead(let path, let why): "cannot read '\(path)': \(why)"
        case .codecRefusesFormat(let codec, let format, let takes):
            "\(codec) does not take \(format) frames (it takes \(takes)); record them with --codec ffv1 or raw"
        case .ffmpeg(let call, let why): "\(call) failed: \(why)"
        case .snapshotTooLarge(let need, let allowed, let what):
            "--snapshot needs up to \(need) MB (\(what)), more than --snapshot-max-mb \(allowed) allows: shorten --snapshot or raise --snapshot-max-mb"
        }
    }
}

/// A recording's file that stopped being readable before its end: which file, and why
/// (FFmpeg's message). Said as `path: reason`.
public struct FileReadError: Equatable, Sendable, CustomStringConvertible {
    public let path: String
    public let reason: String

    public init(path: String, reason: String) { self.path = path; self.reason = reason }

    public var description: String { "\(path): \(reason)" }
}
