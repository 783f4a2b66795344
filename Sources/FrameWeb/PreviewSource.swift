/// What the web server needs of the previews (FrameWeb/Preview's PreviewHub): live JPEGs of a
/// stream while someone watches, and a PNG of its newest frame.
public protocol PreviewSource: Sendable {
    /// A viewer of `stream`'s preview, at most `maxFPS` frames/s and `maxWidth` pixels wide.
    func openViewer(_ stream: String, maxFPS: Double, maxWidth: Int) throws -> any PreviewFeed
    func snapshot(_ stream: String) throws -> [UInt8]
    func shutdown()
}

/// One viewer's JPEGs, newest only.
public protocol PreviewFeed: Sendable {
    /// The next JPEG newer than the last one, waiting up to `timeout` s; nil on timeout or end.
    func nextJPEG(timeout: Double) -> [UInt8]?
    func stop()
}
