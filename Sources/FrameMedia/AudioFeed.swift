import CFFmpeg
import FrameServer
import Glibc
import Synchronization

/// An audio stream read beside a video one (`sink --record FILE --audio NAME`): its own
/// consumer on its own thread, so that neither stream's lossless producer waits for the
/// other's reader, each frame copied out of its slot (released at once) into a queue that the
/// video side takes from in timestamp order.
///
/// The queue holds at most `limit` frames (about 20 s of 48 kHz AAC): past it the audio
/// thread waits, as a lossless consumer would, until the video side takes some.
public final class AudioFeed: @unchecked Sendable {
    public let stream: String
    /// The thread's own from `start()` on; released (detached) when the stream ends.
    private var consumer: Consumer?
    private let lock = ThreadLock()
    private var shared = State()
    private let limit = 1024
    private var tid: pthread_t?
    private let shouldStop: @Sendable () -> Bool
    private let stopped = Atomic<Bool>(false)

    private struct State {
        var queue: [(frame: UnsafeMutablePointer<AVFrame>, format: AudioFormat, seconds: Double)] = []
        var format: AudioFormat?
        var ended = false
        var failure: String?
        var received = 0
    }

    /// Attaches to `stream` as a lossless audio consumer (the options' media is set to audio).
    public init(stream: String, options: ConsumerOptions, shouldStop: @escaping @Sendable () -> Bool) throws(ConsumerError) {
        var options = options
        options.media = .audio
        self.stream = stream
        self.shouldStop = shouldStop
        let consumer = try Consumer(stream: stream, options: options)
        self.consumer = consumer
        consumer.shouldStop = { [unowned self] in self.stopped.load(ordering: .relaxed) || shouldStop() }
    }

    deinit {
        if let tid { pthread_join(tid, nil) }
        lock.withLock { for item in shared.queue { var f: UnsafeMutablePointer<AVFrame>? = item.frame; av_frame_free(&f) } }
    }

    /// Starts the reading thread.
    public func start() { tid = spawnThread { [self] in run() } }

    /// Ends the reading (the thread detaches its consumer and ends) and waits for the thread.
    public func stop() {
        stopped.store(true, ordering: .relaxed)
        if let tid { pthread_join(tid, nil) }
        tid = nil
    }

    /// Frames read so far.
    public var received: Int { lock.withLock { shared.received } }

    /// The first frame's format: waits for it (or for the stream's end), saying once after
    /// 2 s what it waits for. nil when the stream ended or failed without a frame.
    func firstFormat(say: (String) -> Void) -> AudioFormat? {
        let start = monotonicNanos()
        var said = false
        while true {
            let (format, over) = lock.withLock { (shared.format, shared.ended || shared.failure != nil) }
            if let format { return format }
            if over || shouldStop() { return nil }
            if !said, monotonicNanos() - start > 2_000_000_000 {
                say("waiting for the first audio frame of '\(stream)' before writing the recording's header (Ctrl-C to stop)")
                said = true
            }
            usleep(1000)
        }
    }

    /// Hands every queued frame up to `seconds` (all of them with nil, after waiting for the
    /// stream's end) to `body` in order, freeing each after it.
    func take(upTo seconds: Double?, _ body: (UnsafeMutablePointer<AVFrame>, AudioFormat) throws(MediaOutputError) -> Void) throws(MediaOutputError) {
        if seconds == nil {
            while !lock.withLock({ shared.ended || shared.failure != nil }), !shouldStop() { try drainQueue(upTo: nil, body); usleep(1000) }
        }
        try drainQueue(upTo: seconds, body)
        if let failure = lock.withLock({ shared.failure }) { throw .audio(stream, failure) }
    }

    private func drainQueue(upTo seconds: Double?, _ body: (UnsafeMutablePointer<AVFrame>, AudioFormat) throws(MediaOutputError) -> Void) throws(MediaOutputError) {
        while true {
            let next = lock.withLock { () -> (UnsafeMutablePointer<AVFrame>, AudioFormat)? in
                guard let first = shared.queue.first, seconds.map({ first.seconds <= $0 }) ?? true else { return nil }
                shared.queue.removeFirst()
                return (first.frame, first.format)
            }
            guard let (frame, format) = next else { return }
            var f: UnsafeMutablePointer<AVFrame>? = frame
            defer { av_frame_free(&f) }
            try body(frame, format)
        }
    }

    /// The thread: every frame copied into the queue until the stream ends.
    private func run() {
        do {
            while !shouldStop(), !stopped.load(ordering: .relaxed), let consumer, let frame = try consumer.next() {
                guard let format = frame.header.audioFormat, let copy = Self.copy(frame, format) else {
                    frame.release()
                    continue
                }
                let d = frame.header.description
                let seconds = d.pts.map { Double($0) * d.timeBase.doubleValue } ?? 0
                frame.release()
                while lock.withLock({ shared.queue.count >= limit }), !shouldStop(), !stopped.load(ordering: .relaxed) { usleep(1000) }
                lock.withLock {
                    shared.queue.append((copy, format, seconds))
                    if shared.format == nil { shared.format = format }
                    shared.received += 1
                }
            }
        } catch {
            lock.withLock { shared.failure = error.description }
        }
        consumer = nil
        lock.withLock { shared.ended = true }
    }

    /// The frame's samples in an AVFrame of their own (FFmpeg's buffers), with its pts.
    private static func copy(_ frame: borrowing Frame, _ format: AudioFormat) -> UnsafeMutablePointer<AVFrame>? {
        guard let f = av_frame_alloc() else { return nil }
        AudioSampleConverter.describe(f, format, pts: frame.header.description.pts)
        var out: UnsafeMutablePointer<AVFrame>? = f
        guard av_frame_get_buffer(f, 0) >= 0 else { av_frame_free(&out); return nil }
        for row in 0..<format.rows {
            let source = frame.audioRow(row)
            guard let target = f.pointee.extended_data[row], let base = source.baseAddress else { continue }
            memcpy(target, base, source.count)
        }
        return f
    }
}
