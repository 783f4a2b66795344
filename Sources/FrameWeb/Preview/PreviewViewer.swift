import FrameMedia
import FrameServer

/// One viewer of a stream's live preview: a latest-only mailbox of JPEG images. The
/// stream's preview consumer puts each image in and never waits for the viewer; an image
/// not taken before the next one arrives is replaced, and counted in `missed`.
public final class PreviewViewer: @unchecked Sendable {
    // @unchecked Sendable: `stream`, `maxFPS`, `maxWidth` and `onClose` are immutable; the
    // mailbox is only touched with `lock` held.
    public let stream: String
    /// The frame rate and width this viewer asked for, as capped by the hub.
    public let maxFPS: Double
    public let maxWidth: Int
    private let lock = ConditionLock()
    private let onClose: @Sendable (PreviewViewer) -> Void
    private var latest: [UInt8]?
    private var ended = false
    private var closed = false
    private var delivered: UInt64 = 0
    private var missed: UInt64 = 0

    init(stream: String, maxFPS: Double, maxWidth: Int, onClose: @escaping @Sendable (PreviewViewer) -> Void) {
        self.stream = stream
        self.maxFPS = maxFPS
        self.maxWidth = maxWidth
        self.onClose = onClose
    }

    /// The next JPEG newer than the last one returned, waiting up to `timeout` s; nil on
    /// timeout or when the stream ended (or the viewer or hub was closed).
    public func next(timeout: Double) -> [UInt8]? {
        let deadline = monotonicNanos() &+ UInt64(max(0, min(timeout, 86_400)) * 1e9)
        return lock.withLock {
            while latest == nil, !ended, !closed, monotonicNanos() < deadline { lock.wait(untilNanos: deadline) }
            defer { latest = nil }
            if latest != nil { delivered += 1 }
            return latest
        }
    }

    /// Images taken by `next` and images replaced before they were taken.
    public var counts: (delivered: UInt64, missed: UInt64) { lock.withLock { (delivered, missed) } }

    /// Whether the stream's preview ended (the producer finished, or the hub closed).
    public var hasEnded: Bool { lock.withLock { ended || closed } }

    /// Stops watching: the stream's preview consumer goes away with its last viewer. Idempotent.
    public func close() {
        let first = lock.withLock {
            defer { closed = true; latest = nil; lock.broadcast() }
            return !closed
        }
        if first { onClose(self) }
    }

    /// A new image (the preview consumer's thread): replaces one not yet taken.
    func put(_ image: [UInt8]) {
        lock.withLock {
            guard !closed else { return }
            if latest != nil { missed += 1 }
            latest = image
            lock.broadcast()
        }
    }

    /// The stream ended: `next` returns what is left, then nil without waiting.
    func end() {
        lock.withLock {
            ended = true
            lock.broadcast()
        }
    }
}
