import CFrameServer

/// framesrv's release (the C library's and the Python package's are the same number) and the
/// protocol version it speaks (the layout header's FS_PROTOCOL_VERSION).
public enum FrameServerVersion {
    public static let release = "2.0.0"
    public static let protocolVersion = FS_PROTOCOL_VERSION

    /// What `framesrv --version` prints.
    public static var line: String { "framesrv \(release) (protocol version \(protocolVersion))" }
}
