import FrameServer

// The hub as the web server's `PreviewSource` (Sources/FrameWeb/PreviewSource.swift).

extension PreviewHub: PreviewSource {
    public func openViewer(_ stream: String, maxFPS: Double, maxWidth: Int) throws -> any PreviewFeed {
        try watch(stream, maxFPS: maxFPS, maxWidth: maxWidth)
    }

    public func snapshot(_ stream: String) throws -> [UInt8] { try snapshotPNG(stream) }

    public func shutdown() { close() }
}

extension PreviewViewer: PreviewFeed {
    public func nextJPEG(timeout: Double) -> [UInt8]? { next(timeout: timeout) }

    public func stop() { close() }
}
