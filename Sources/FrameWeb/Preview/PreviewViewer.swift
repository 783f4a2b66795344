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
    private var endedBy: PreviewError?
    private var closed = false
    private var images: UInt64 = 0
    private var delivered: UInt64 = 0
    private var missed: UInt64 = 0
    /// When this viewer is due its next image (CLOCK_MONOTONIC ns). Only the stream's preview
    /// thread touches it.
    private(set) var nextDue: UInt64 = 0

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

    /// Images given to this viewer, those taken by `next`, and those replaced before they were taken.
    public var counts: (images: UInt64, delivered: UInt64, missed: UInt64) { lock.withLock { (images, delivered, missed) } }

    /// Whether the stream's preview ended (the producer finished, or the hub closed).
    public var hasEnded: Bool { lock.withLock { ended || closed } }

    /// Why the preview ended early, if it failed (the consumer could not attach or read, or
    /// a frame could not be converted or encoded); nil while it runs or after a normal end.
    public var failure: PreviewError? { lock.withLock { endedBy } }

    /// Stops watching: the stream's preview consumer goes away with its last viewer. Idempotent.
    public func close() {
        let first = lock.withLock {
            defer { closed = true; latest = nil; lock.broadcast() }
            return !closed
        }
        if first { onClose(self) }
    }

    /// Whether a frame taken at `now` is due to this viewer (its rate: `maxFPS`, 2 ms of jitter allowed).
    func isDue(_ now: UInt64) -> Bool { now &+ 2_000_000 >= nextDue }

    /// A new image, of a frame taken at `now` (the preview consumer's thread): replaces one not
    /// yet taken. The next is due one interval later, on the viewer's own grid (so 25/s of a
    /// 30/s stream is 25/s), restarting from `now` after a pause.
    func put(_ image: [UInt8], at now: UInt64) {
        let interval = UInt64(1e9 / maxFPS)
        nextDue = max(nextDue, now &- min(now, interval)) &+ interval
        lock.withLock {
            guard !closed else { return }
            images += 1
            if latest != nil { missed += 1 }
            latest = image
            lock.broadcast()
        }
    }

    /// The stream ended (or the preview failed: `failure`): `next` returns what is left, then
    /// nil without waiting.
    func end(_ failure: PreviewError?) {
        lock.withLock {
            ended = true
            endedBy = failure
            lock.broadcast()
        }
    }
}
