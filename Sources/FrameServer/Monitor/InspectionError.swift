/// Why a monitor (`ls`, `inspect`, `top`, `web`) could not read a stream.
public enum InspectionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No stream of that name in the runtime directory: `framesrv ls` lists the streams there.
    case noStream(String, directory: String)
    /// Its control segment failed validation or was truncated while read (another protocol
    /// version, a foreign file, a bad field).
    case segment(SegmentError)
    /// `inspect --snapshot`: no frame came within the wait; is the stream running?
    case noFrame(String, waitedSeconds: Double)

    public var description: String {
        switch self {
        case .noStream(let name, let dir): "no stream named '\(name)' in \(dir) (see 'framesrv ls')"
        case .segment(let e): e.userMessage
        case .noFrame(let stream, let s):
            "no frame from stream '\(stream)' within \(formatDouble(s)) s (is it running? see 'framesrv ls')"
        }
    }
}
