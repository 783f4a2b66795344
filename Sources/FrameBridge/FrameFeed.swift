import FrameRecording
import FrameServer
import Glibc
import Synchronization

/// A frame taken from A, waiting to be sent (or, lossless, to be acknowledged).
struct FeedEntry: @unchecked Sendable {
    /// Raw: A's frame itself, held until acknowledged (lossless) or sent (live).
    let frame: SharedFrame?
    /// With a codec: the frame encoded (A's slot already released).
    let packet: EncodedPacket?
    /// Frames skipped just before this one (live): replaced in the feed or missed by the consumer.
    let skipped: UInt32
}

/// The sender's reading side: a thread that consumes A and hands frames to the network
/// thread. Lossless: at most `window` frames held at once (a permit per frame, returned
/// when the receiver acknowledges it), so a slow link backpressures A's producer exactly
/// as a slow local consumer does. Live: only the newest frame waits; the ones it replaces
/// are released and counted.
final class FrameFeed: @unchecked Sendable {
    // @unchecked Sendable: `state` is behind a Mutex; the semaphore and pipe are thread-safe.
    struct State {
        var queue: [FeedEntry] = []
        var ended = false
        var failed = false
        var error: String?
        var skippedTotal: UInt64 = 0
        /// Live: frames let go before the next one came (the hold limit), counted into the next entry.
        var skippedPending: UInt32 = 0
        /// Set once attached to A: its nominal rate (nil: none).
        var attached = false
        var rate: Rational?
    }
    let state = Mutex(State())
    private var permits = sem_t()
    /// Readable when the feed has news for the network thread.
    let wakeRead: Int32
    private let wakeWrite: Int32
    let live: Bool
    private let stopping = Atomic<Bool>(false)
    private var thread: pthread_t?

    /// `--codec ffv1`: frames are encoded on the reading thread (FFV1: no delay, every frame a keyframe).
    private let codec: RecordingCodec?

    init(window: Int, live: Bool, codec: RecordingCodec? = nil) {
        self.codec = codec
        self.live = live
        sem_init(&permits, 0, UInt32(window))
        var fds: [Int32] = [-1, -1]
        _ = pipe(&fds)
        for fd in fds { _ = fcntl(fd, F_SETFL, O_NONBLOCK); _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        wakeRead = fds[0]; wakeWrite = fds[1]
    }

    deinit {
        sem_destroy(&permits)
        Glibc.close(wakeRead); Glibc.close(wakeWrite)
    }

    /// Starts reading `stream` on a thread of its own.
    func start(stream: String, options: ConsumerOptions, stop: @escaping @Sendable () -> Bool) {
        thread = spawnThread { [self] in consume(stream: stream, options: options, stop: stop) }
    }

    /// Stops the reading thread and waits for it.
    func stopAndJoin() {
        stopping.store(true, ordering: .relaxed)
        sem_post(&permits)
        if let t = thread { pthread_join(t, nil) }
        thread = nil
        state.withLock { $0.queue.removeAll() }
    }

    /// A frame acknowledged (lossless): its permit goes back.
    func returnPermit() { sem_post(&permits) }

    /// Takes what waits (lossless: every frame in order; live: the newest).
    func take() -> [FeedEntry] {
        var one: UInt8 = 0
        while Glibc.read(wakeRead, &one, 1) > 0 {}
        return state.withLock { s in defer { s.queue.removeAll() }; return s.queue }
    }

    private func wake() {
        var one: UInt8 = 1
        _ = write(wakeWrite, &one, 1)
    }

    private func consume(stream: String, options: ConsumerOptions, stop: @escaping @Sendable () -> Bool) {
        let shouldStop: () -> Bool = { [self] in stop() || stopping.load(ordering: .relaxed) }
        do {
            let consumer = try Consumer(stream: stream, options: options)
            consumer.shouldStop = shouldStop
            try consumer.attach()
            let rate = consumer.nominalRate
            let encoder = codec.map { PacketEncoder(codec: $0, rate: rate) }
            state.withLock { $0.attached = true; $0.rate = rate }
            wake()
            var missed: UInt64 = 0
            while !shouldStop() {
                // Raw lossless: a permit per frame of A held. Encoded: per packet out (below),
                // so an encoder's delay (H.264's lookahead) never waits for acknowledgements.
                guard live ? makeRoom(consumer, shouldStop) : (encoder != nil || takePermit(shouldStop)) else { break }
                guard let frame = try consumer.next() else {
                    for packet in try encoder?.flush() ?? [] where takePermit(shouldStop) { enqueue(nil, packet, missed: 0) }
                    let failed = consumer.sourceFailed
                    state.withLock { $0.ended = true; $0.failed = failed }
                    break
                }
                let newlyMissed = UInt32(clamping: consumer.missed &- missed)
                missed = consumer.missed
                guard let encoder else {
                    enqueue(frame.share(), nil, missed: newlyMissed)
                    continue
                }
                for packet in try encode(frame, encoder) {
                    guard live || takePermit(shouldStop) else { break }
                    enqueue(nil, packet, missed: newlyMissed)
                }
            }
        } catch {
            let text = "\(error)"
            state.withLock { $0.ended = true; $0.failed = true; $0.error = text }
        }
        wake()
    }

    /// Live: a live consumer holds at most its hold limit; when the waiting frame and the
    /// one being sent reach it, the waiting one goes (counted) before the next is taken.
    /// Hands one frame (raw or encoded) to the network thread. Live: a frame still waiting
    /// is replaced by this newer one, and counted.
    private func enqueue(_ shared: SharedFrame?, _ packet: EncodedPacket?, missed newlyMissed: UInt32) {
        state.withLock { s in
            var skipped = newlyMissed &+ s.skippedPending
            s.skippedPending = 0
            if live { for e in s.queue { skipped &+= 1 &+ e.skipped } }
            s.skippedTotal &+= UInt64(newlyMissed) + UInt64(live ? s.queue.count : 0)
            if live { s.queue.removeAll() }
            s.queue.append(FeedEntry(frame: shared, packet: packet, skipped: skipped))
        }
        wake()
    }

    /// The frame encoded (and released); its record carries every header field.
    private func encode(_ frame: consuming Frame, _ encoder: PacketEncoder) throws -> [EncodedPacket] {
        guard let format = frame.header.format else { return [] }
        var record = FrameRecord(format: format)
        record.description = frame.header.description
        record.sequence = frame.sequence
        record.epoch = frame.header.epoch
        record.captureOffsetNanos = Int64(clamping: frame.header.captureNanos)
        let packets = try encoder.encode(frame, record: record)
        frame.release()
        return packets
    }

    private func makeRoom(_ consumer: Consumer, _ shouldStop: () -> Bool) -> Bool {
        while consumer.heldFrames >= (consumer.liveHoldLimit ?? 2) {
            let dropped = state.withLock { s -> Bool in
                guard !s.queue.isEmpty else { return false }
                s.skippedPending &+= s.queue.reduce(0) { $0 &+ 1 &+ $1.skipped }
                s.skippedTotal &+= UInt64(s.queue.count)
                s.queue.removeAll()
                return true
            }
            if !dropped { usleep(500) }
            if shouldStop() { return false }
        }
        return true
    }

    private func takePermit(_ shouldStop: () -> Bool) -> Bool {
        while true {
            var deadline = timespec()
            clock_gettime(CLOCK_REALTIME, &deadline)
            deadline.tv_nsec += 200_000_000
            if deadline.tv_nsec >= 1_000_000_000 { deadline.tv_sec += 1; deadline.tv_nsec -= 1_000_000_000 }
            if sem_timedwait(&permits, &deadline) == 0 { return !shouldStop() }
            if shouldStop() { return false }
        }
    }
}
