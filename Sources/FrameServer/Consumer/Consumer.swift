// PROTOCOL.md 8, Attaching and detaching, from the application's side: the consumer's options
// and the reattach loop (wait for the stream, attach, 15.3 a producer that dies, attach again).
// One attachment's own work is in Attachment.swift and the Attachment+*.swift files.

import CFrameServer
import Glibc
import Synchronization

/// How a consumer receives a stream. Each consumer of one stream chooses its own.
public enum DeliveryMode: String, Sendable {
    /// Never slows the producer: always takes the newest frame and counts what it missed.
    case live
    /// Every frame published after attaching, exactly once, in order; the producer waits
    /// for this consumer when the pool is full.
    case lossless
}

/// How a consumer attaches.
public struct ConsumerOptions: Sendable {
    public var mode: DeliveryMode = .lossless
    /// How long to wait for the stream to appear (nil: forever).
    public var waitSeconds: Double? = nil
    /// After the producer exits without ending the stream, wait for a new one and re-attach.
    public var reattach = true
    /// What the consumer calls itself in `ls`/`top`/`inspect`.
    public var name = "consumer"
    /// ZeroMQ receive high-water mark, in messages, of the doorbell socket (connected only
    /// when `Consumer.descriptor` is asked for: consumers sleep on shared memory otherwise).
    public var receiveHighWaterMark: Int32 = 1000
    /// Microseconds `next` may busy-poll the stream's wake word per frame. Trades a core for
    /// wake latency. On a paced stream (frames further apart than the window) the window is
    /// centred on when the next frame is due, from the pace of the frames so far, and `next`
    /// sleeps until it opens: a frame costs at most this much spinning, and still arrives
    /// within about a microsecond of its publish. 0: no window; `next` then spins only on a
    /// stream faster than 20,000 frames a second, up to twice its frame interval (PROTOCOL.md
    /// 11.3's catch-up spin), and sleeps at once on any slower one.
    public var pollMicros = 0
    /// Wait past a stream that already ended (before this consumer attached) for its next
    /// producer, instead of throwing `.streamEnded` (the commands' `--wait S`).
    public var waitPastEnd = false
    /// The kind of frames this consumer reads (PROTOCOL.md 4.6): a stream of the other kind
    /// is refused at attach with `.wrongMedia`, taking no entry. nil: either kind (look at
    /// `Consumer.media` and at each frame's `header.media`).
    public var media: MediaKind? = .video

    public init(mode: DeliveryMode = .lossless) { self.mode = mode }
}

/// Something that happened to a consumer's attachment, for the application to report.
public enum ConsumerEvent: Sendable {
    /// Attached to a producer (its pid).
    case attached(producerPID: Int32)
    /// The producer exited without ending the stream; the consumer waits for a new one.
    case producerGone(producerPID: Int32)
    /// The stream does not exist yet: the consumer waits for it (sent once, before the
    /// first attachment).
    case waiting
}

/// The reading side of a stream.
///
/// ```swift
/// let consumer = try Consumer(stream: "cam", options: .init(mode: .lossless))
/// while let frame = try consumer.next() {
///     use(frame.plane(0))      // read in place; released at the end of the iteration
/// }
/// ```
/// Use it from one thread (`next()` is not reentrant; a `SharedFrame` may be released
/// from any thread).
public final class Consumer {
    public let stream: String
    public let options: ConsumerOptions
    public let directory: RuntimeDirectory
    /// Called on attach and when the producer goes away.
    public var onEvent: ((ConsumerEvent) -> Void)?
    /// Asked whenever a signal interrupts a wait; returning true makes `next()` return nil
    /// (for example after SIGINT, so a command can print its statistics and exit).
    public var shouldStop: (() -> Bool)?
    private var attachment: Attachment?
    /// Frames delivered, across re-attachments.
    public private(set) var delivered: UInt64 = 0
    /// Frames a live consumer skipped because newer ones were there (or that were recycled under it).
    public private(set) var missed: UInt64 = 0
    /// Watches the runtime directory for a control segment renamed into place (inotify).
    private let directoryWatch: FileDescriptor
    /// The process that opened this consumer: in a forked child of it, every call throws
    /// `.forked` and nothing shared is touched (the child's copy names the parent's entry).
    private let opener = ForkCheck.currentPID

    public init(stream: String, options: ConsumerOptions = ConsumerOptions(),
                directory: RuntimeDirectory? = nil) throws(ConsumerError) {
        do { try validateStreamName(stream) } catch { throw .invalidStreamName(stream) }
        self.stream = stream
        self.options = options
        if let directory { self.directory = directory } else {
            do { self.directory = try RuntimeDirectory() } catch { throw .directory(error) }
        }
        do { directoryWatch = try watchDirectory(self.directory.path) } catch {
            throw .system(SystemCallError("watch directory", path: self.directory.path, error))
        }
    }

    deinit {
        if ForkCheck.isForkedChild(of: opener) {
            // The parent's entry, frames and watcher thread: kept as they are (the child's
            // copy of the attachment is never detached nor freed).
            if let attachment { _ = Unmanaged.passRetained(attachment) }
            return
        }
        attachment?.detach()   // then directoryWatch closes itself
    }

    /// Throws `.forked` in a forked child of the process that opened this consumer.
    private func refuseInForkedChild() throws(ConsumerError) {
        if ForkCheck.isForkedChild(of: opener) { throw .forked(stream: stream, opener: opener, child: getpid()) }
    }

    /// The attached producer's pid, if attached.
    public var producerPID: Int32? { attachment?.producerPID }
    /// Frames of the current attachment this consumer holds now: `Frame`s and `SharedFrame`s
    /// not yet released (a live consumer's `next()` throws `.holdLimit` at `liveHoldLimit`).
    public var heldFrames: Int {
        guard let a = attachment else { return 0 }
        a.settleReleases()
        return a.held
    }
    /// The most frames a live consumer may hold at once (the producer's `live_max_held`);
    /// nil for a lossless consumer or before attaching.
    public var liveHoldLimit: Int? { attachment.flatMap { $0.mode == .live ? $0.liveMaxHeld : nil } }
    /// Slots in the attached producer's pool, nil before attaching.
    public var slotCount: Int? { attachment.map { Int($0.control.slotCount) } }
    /// What the stream carries, once attached.
    public var media: MediaKind? { attachment?.control.media }
    /// The attached producer's nominal frame rate (`fs_control.rate_num/rate_den`),
    /// exact; nil when unknown (as fast as possible) or before attaching.
    public var nominalRate: Rational? { attachment?.control.nominalRate }
    /// The time base matching `nominalRate` (its inverse), nil when the rate is unknown.
    /// Each frame carries its own time base too (`Frame.description.timeBase`).
    public var nominalTimeBase: Rational? { nominalRate.map { Rational($0.den, $0.num) } }
    /// `nominalRate` in frames per second, for display and pacing.
    public var nominalFramesPerSecond: Double? { nominalRate.map(\.doubleValue) }
    /// Whether the stream ended because its source failed (the producer's
    /// `finish(failed: true)`): every frame it published was delivered, but the input was
    /// not read to its end. Valid once `next()` returned nil.
    public private(set) var sourceFailed = false
    /// Whether the producer's stall timeout demoted this lossless consumer to live (it then
    /// receives the newest frames and counts the rest in `missed`).
    public var demotedToLive: Bool { options.mode == .lossless && attachment?.mode == .live }
    /// Frames refused because their header failed validation (each also threw `.badFrame`).
    public var badFrames: UInt64 { badFramesBefore + (attachment?.badFrames ?? 0) }
    private var badFramesBefore: UInt64 = 0
    /// A descriptor for event loops (attaching first if needed): the ZMQ_FD of the doorbell,
    /// which is connected on the first call (consumers do not subscribe otherwise). When it
    /// polls readable, call `next()` until it would block. libzmq's descriptor is
    /// edge-triggered, and ZeroMQ may drop an announcement: poll it with a timeout.
    public var descriptor: Int32 {
        get throws(ConsumerError) {
            try attach()   // refuses in a forked child
            guard let a = attachment else { throw .producerGone(stream) }
            return try a.doorbellDescriptor()
        }
    }
    /// This consumer's index in the stream's consumer table (its holder bit), if attached.
    public var consumerIndex: Int? { attachment?.index }

    /// Attaches now (waiting for the stream as `waitSeconds` says) instead of at the first `next()`.
    public func attach() throws(ConsumerError) {
        try refuseInForkedChild()
        if attachment == nil { attachment = try waitAndAttach() }
    }

    private func stopping() -> Bool { shouldStop?() ?? false }

    /// The next frame, or nil once the stream has ended and every frame owed was delivered.
    ///
    /// Blocks without using CPU: on the stream's `frame_wake` futex (after spinning up to
    /// `ConsumerOptions.pollMicros`), at most 500 ms at a time.
    public func next() throws(ConsumerError) -> Frame? {
        try refuseInForkedChild()
        while true {
            if attachment == nil { attachment = try waitAndAttach() }
            guard let a = attachment else { return nil }   // stopped while waiting
            let outcome: Attachment.Outcome
            do { outcome = try a.nextFrame(stop: stopping) } catch {
                // A segment truncated under us: detach cleanly and report it in one line.
                if case .segment(.truncated) = error { dropAttachment(a) }
                throw error
            }
            switch consume outcome {
            case .frame(let f):
                delivered += 1
                missed = a.missedTotal + missedBefore
                return f
            case .ended:
                sourceFailed = a.control.endedAfterFailure
                return nil
            case .producerGone:
                let pid = a.producerPID
                dropAttachment(a)
                onEvent?(.producerGone(producerPID: pid))
                if !options.reattach { throw .producerGone(stream) }
            }
        }
    }
    private var missedBefore: UInt64 = 0
    /// Whether this consumer ever attached, and whether it said it waits (`.waiting`).
    private var everAttached = false
    private var saidWaiting = false

    /// Detaches and forgets the current attachment, keeping its counts.
    private func dropAttachment(_ a: Attachment) {
        missedBefore += a.missedTotal
        badFramesBefore += a.badFrames
        a.detach()
        attachment = nil
    }

    /// Waits until the stream's control segment exists and belongs to a live producer, then attaches.
    private func waitAndAttach() throws(ConsumerError) -> Attachment? {
        let start = monotonicNanos()
        let deadline = options.waitSeconds.map { start + UInt64(min(max(0, $0), 1e9) * 1e9) }
        while true {
            drainDirectoryEvents(directoryWatch.rawValue)
            if let a = try Attachment.open(stream: stream, directory: directory, options: options) {
                if !everAttached, a.endedBeforeAttach, !a.control.endedAfterFailure, !a.owedFramesAfterEnd {
                    // Ended before we came: nothing is owed to us. Say so, or wait for the next producer.
                    // (A failed end is reported as such by `next()`: its reason matters more.)
                    let frames = a.control.statistics.published
                    a.detach()
                    if !options.waitPastEnd { throw .streamEnded(stream, frames: frames) }
                } else {
                    everAttached = true
                    onEvent?(.attached(producerPID: a.producerPID))
                    return a
                }
            } else if !everAttached, !options.waitPastEnd, let frames = Producer.endedNote(stream, in: directory) {
                throw .streamEnded(stream, frames: frames)
            }
            if !everAttached, !saidWaiting {
                saidWaiting = true
                onEvent?(.waiting)
            }
            var timeout: Int32 = -1
            if let deadline {
                let now = monotonicNanos()
                if now >= deadline {
                    throw .streamNotFound(stream, directory: directory.path, waitedSeconds: options.waitSeconds ?? 0)
                }
                timeout = Int32(min(UInt64(Int32.max), (deadline - now + 999_999) / 1_000_000))
            }
            // inotify fires when a producer renames its control segment into place. The wait
            // is bounded (see `stopRecheckMillis`) so that a stop request is always seen.
            if stopping() { return nil }
            let wait = timeout < 0 ? Self.stopRecheckMillis : min(timeout, Self.stopRecheckMillis)
            if waitReadable([directoryWatch.rawValue], timeoutMillis: wait) == nil, stopping() { return nil }
        }
    }

    /// The longest a wait for the stream sleeps before asking `shouldStop` again.
    ///
    /// A stop signal's handler only sets a flag (framesrv's handlers do not restart calls,
    /// so a signal during `poll` ends it with EINTR, and then `shouldStop` is asked). A
    /// signal that lands after that check but before `poll` starts interrupts nothing:
    /// with an unbounded wait a sink waiting for its producer would then hang. Bounding the
    /// wait closes that race (the stop is seen at most this late), and also serves a
    /// `shouldStop` set by another thread. Between checks the stream is looked for again,
    /// which costs one failed `open` while it does not exist.
    static let stopRecheckMillis: Int32 = 250
}
