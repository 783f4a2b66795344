import FrameMedia
import FrameServer
import Synchronization

/// The live previews and snapshots of `framesrv web`.
///
/// One live consumer per watched stream (named "web preview", so `top` shows it), shared by
/// that stream's viewers: started with the first `watch` and stopped when the last viewer
/// closes, so frames are encoded only while someone watches. It encodes at the highest rate
/// any viewer asked for and at each viewer's width, and releases each slot right after the
/// conversion. Each viewer holds at most one JPEG (latest-only): a viewer that stops reading
/// misses images, counted, and never holds a slot nor slows the consumer or other viewers.
public final class PreviewHub: Sendable {
    public let directory: RuntimeDirectory
    /// The most viewers of one stream, and of all streams together.
    public let viewersPerStream: Int
    public let viewersInAll: Int
    /// The previews' JPEG quality (ffmpeg's -q:v: 2 best ... 31).
    public let jpegQuality: Int
    /// The highest preview rate and width a viewer may ask for (higher asks are capped).
    public static let fpsCap = 30.0
    public static let widthCap = 1920
    /// The narrowest preview (smaller asks are raised to it).
    public static let widthFloor = 16

    private struct State: Sendable {
        /// The feed each watched stream's new viewers join.
        var feeds: [String: StreamPreview] = [:]
        /// Every feed whose consumer has not ended yet (also those stopping).
        var running: [ObjectIdentifier: StreamPreview] = [:]
        var viewers = 0
        var closed = false
    }
    private let state = Mutex(State())

    public init(directory: RuntimeDirectory, viewersPerStream: Int = 32, viewersInAll: Int = 64, jpegQuality: Int = 5) {
        self.directory = directory
        self.viewersPerStream = max(1, viewersPerStream)
        self.viewersInAll = max(1, viewersInAll)
        self.jpegQuality = min(max(jpegQuality, PreviewEncoder.jpegQualities.lowerBound), PreviewEncoder.jpegQualities.upperBound)
    }

    /// A viewer of `stream`'s live preview, at most `maxFPS` frames/s and `maxWidth` pixels wide,
    /// once the preview's consumer is attached; throws why it could not be (the stream did not admit it).
    public func watch(_ stream: String, maxFPS: Double, maxWidth: Int) throws(PreviewError) -> PreviewViewer {
        try checkExists(stream)
        let fps = maxFPS.isFinite ? min(max(maxFPS, 0.1), Self.fpsCap) : Self.fpsCap
        let width = min(max(maxWidth, Self.widthFloor), Self.widthCap)
        let (viewer, joined, started) = try state.withLock { (s) throws(PreviewError) -> (PreviewViewer, StreamPreview, StreamPreview?) in
            guard !s.closed else { throw .closed }
            guard s.viewers < viewersInAll else { throw .tooManyViewersInAll(limit: viewersInAll) }
            var feed = s.feeds[stream], started: StreamPreview?
            if (feed?.viewerCount ?? 0) >= viewersPerStream { throw .tooManyViewers(stream: stream, limit: viewersPerStream) }
            let viewer = PreviewViewer(stream: stream, maxFPS: fps, maxWidth: width) { [weak self] v in self?.closed(v) }
            if feed == nil || !feed!.add(viewer) {
                let made = newFeed(stream)
                _ = made.add(viewer)
                (feed, started) = (made, made)
                s.feeds[stream] = made
                s.running[ObjectIdentifier(made)] = made
            }
            s.viewers += 1
            return (viewer, feed!, started)
        }
        started?.start()
        // Answered only once the stream admitted the feed's consumer: a refusal is the error, not an empty preview.
        do { try joined.waitAttached() } catch {
            viewer.close()
            throw error
        }
        return viewer
    }

    /// A PNG of `stream`'s newest frame (waiting up to 2 s for one), at its own size, in RGB
    /// converted with its own matrix and range. Taken by a short-lived live consumer ("web snapshot").
    public func snapshotPNG(_ stream: String) throws(PreviewError) -> [UInt8] {
        let encoder = PreviewEncoder(.png)
        if isOnDevice(stream) {
            try withNewestCUDAPicture(stream) { header, base throws(PreviewError) in
                do { try encoder.convert(header, base: base) } catch { throw .failed(stream, "\(error)") }
            }
        } else {
            try withNewestFrame(stream, name: "web snapshot", media: .video) { frame throws(PreviewError) in
                do { try encoder.convert(frame) } catch { throw .failed(stream, "\(error)") }
            }
        }
        do { return try encoder.encodeConverted() } catch { throw .failed(stream, "\(error)") }
    }

    /// Whether `stream`'s frames are in CUDA device memory, as its control segment says (one
    /// that cannot be read is taken as host: its consumer then says what is wrong).
    private func isOnDevice(_ stream: String) -> Bool {
        (try? StreamSnapshot.read(stream, in: directory))?.memory == StreamMemory.cuda(device: "").kind
    }

    /// Hands the newest frame of CUDA stream `stream` (waiting up to 2 s), copied to host
    /// memory by a short-lived `CUDAPreviewReader` ("web snapshot"), to `body`.
    private func withNewestCUDAPicture(_ stream: String,
                                       _ body: (FrameHeader, UnsafeRawPointer) throws(PreviewError) -> Void) throws(PreviewError) {
        try checkExists(stream)
        let wait = 2.0
        let reader: CUDAPreviewReader, next: CUDAPreviewReader.Next
        do {
            reader = try CUDAPreviewReader(stream: stream, name: "web snapshot", waitSeconds: wait)
            next = try reader.next(timeoutMillis: Int32(wait * 1000))
        } catch {
            throw .failed(stream, error.description)
        }
        defer { withExtendedLifetime(reader) {} }   // the picture is the reader's
        guard case .picture(let header, let base) = next else { throw .noFrame(stream, seconds: wait) }
        try body(header, base)
    }

    /// An audio stream's levels (peak and RMS per channel) in its newest frame, read as a
    /// short-lived live consumer ("web levels"), as a snapshot is.
    public func levels(_ stream: String) throws(PreviewError) -> AudioLevels {
        var levels: AudioLevels?
        try withNewestFrame(stream, name: "web levels", media: .audio) { frame throws(PreviewError) in levels = AudioLevels(frame) }
        guard let levels else { throw PreviewError.failed(stream, "not an audio frame") }
        return levels
    }

    /// Hands `stream`'s newest frame (waiting up to 2 s for one) to `body`, taken by a
    /// short-lived live consumer of `media` called `name`, and releases it.
    private func withNewestFrame(_ stream: String, name: String, media: MediaKind,
                                 _ body: (borrowing Frame) throws(PreviewError) -> Void) throws(PreviewError) {
        try checkExists(stream)
        let wait = 2.0
        var options = ConsumerOptions(mode: .live)
        options.name = name
        options.waitSeconds = wait
        options.reattach = false
        options.media = media
        do {
            let consumer = try Consumer(stream: stream, options: options, directory: directory)
            let deadline = monotonicNanos() + UInt64(wait * 1e9)
            consumer.shouldStop = { monotonicNanos() > deadline }
            guard let frame = try consumer.next() else { throw PreviewError.noFrame(stream, seconds: wait) }
            do { try body(frame) } catch {
                frame.release()
                throw error
            }
            frame.release()
        } catch let e as PreviewError {
            throw e
        } catch {
            throw .failed(stream, "\(error)")
        }
    }

    /// Viewers watching now, over all streams.
    public var viewerCount: Int { state.withLock { $0.viewers } }

    /// Ends every preview (viewers' `next` returns nil) and waits up to 2 s for the consumers to detach.
    public func close() {
        let feeds = state.withLock { s in
            s.closed = true
            s.feeds = [:]
            return Array(s.running.values)
        }
        for f in feeds { f.stop() }
        let deadline = monotonicNanos() + 2_000_000_000
        for f in feeds { f.waitFinished(untilNanos: deadline) }
    }

    private func checkExists(_ stream: String) throws(PreviewError) {
        do { try validateStreamName(stream) } catch { throw .invalidStreamName(stream) }
        guard directory.streamNames().contains(stream) else { throw .noSuchStream(stream) }
    }

    private func newFeed(_ stream: String) -> StreamPreview {
        StreamPreview(stream: stream, directory: directory, quality: jpegQuality) { [weak self] feed in self?.ended(feed) }
    }

    /// A viewer closed: one fewer, and its stream's feed stops with its last viewer.
    private func closed(_ viewer: PreviewViewer) {
        state.withLock { s in
            s.viewers -= 1
            if let feed = s.feeds[viewer.stream], feed.remove(viewer) { s.feeds[viewer.stream] = nil }
        }
    }

    /// A feed's consumer ended (the stream ended or failed): watching again starts a new one.
    private func ended(_ feed: StreamPreview) {
        state.withLock { s in
            if s.feeds[feed.stream] === feed { s.feeds[feed.stream] = nil }
            s.running[ObjectIdentifier(feed)] = nil
        }
    }
}
