import CFrameServer
import CZMQ
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
    /// Microseconds `next` may busy-poll the stream's wake word per frame (0: never spins).
    /// Trades a core for wake latency. On a paced stream (frames further apart than the
    /// window) the window is centred on when the next frame is due, from the pace of the
    /// frames so far, and `next` sleeps until it opens: a frame costs at most this much
    /// spinning, and still arrives within about a microsecond of its publish.
    public var pollMicros = 0
    /// Wait past a stream that already ended (before this consumer attached) for its next
    /// producer, instead of throwing `.streamEnded` (the commands' `--wait S`).
    public var waitPastEnd = false

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

    public init(stream: String, options: ConsumerOptions = ConsumerOptions(),
                directory: RuntimeDirectory? = nil) throws(FrameServerError) {
        try validateStreamName(stream)
        self.stream = stream
        self.options = options
        if let directory { self.directory = directory } else { self.directory = try RuntimeDirectory() }
        do { directoryWatch = try watchDirectory(self.directory.path) } catch {
            throw .system("watch directory", path: self.directory.path, error)
        }
    }

    deinit {
        attachment?.detach()   // then directoryWatch closes itself
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
        get throws(FrameServerError) {
            try attach()
            guard let a = attachment else { throw .producerGone(stream) }
            return try a.doorbellDescriptor()
        }
    }
    /// This consumer's index in the stream's consumer table (its holder bit), if attached.
    public var consumerIndex: Int? { attachment?.index }

    /// Attaches now (waiting for the stream as `waitSeconds` says) instead of at the first `next()`.
    public func attach() throws(FrameServerError) {
        if attachment == nil { attachment = try waitAndAttach() }
    }

    private func stopping() -> Bool { shouldStop?() ?? false }

    /// The next frame, or nil once the stream has ended and every frame owed was delivered.
    ///
    /// Blocks without using CPU: on the stream's `frame_wake` futex (after spinning up to
    /// `ConsumerOptions.pollMicros`), at most 500 ms at a time.
    public func next() throws(FrameServerError) -> Frame? {
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
    private func waitAndAttach() throws(FrameServerError) -> Attachment? {
        let start = monotonicNanos()
        let deadline = options.waitSeconds.map { start + UInt64(min(max(0, $0), 1e9) * 1e9) }
        while true {
            drainDirectoryEvents(directoryWatch.rawValue)
            if let a = try Attachment.open(stream: stream, directory: directory, options: options) {
                if !everAttached, a.control.ended, !a.control.endedAfterFailure, !a.owedFramesAfterEnd {
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

/// One attachment to one producer's instance of a stream. Frames keep it alive, so a
/// frame stays readable even after its producer exited and the consumer re-attached.
///
/// Everything it reads from shared memory goes through `ControlSegment` (validated counts
/// and offsets, checked slot indices) and `FrameHeader.validate`; both segments are
/// guarded against truncation (`Segment.truncated`), which ends the attachment.
final class Attachment {
    /// Whether a lossless entry was admitted before the stream ended, so frames up to its end
    /// are reserved for it (a fast producer can admit, publish and end while `open` returns).
    /// SYNC: read after `control.ended`'s acquire load, which orders the admission before it.
    var owedFramesAfterEnd: Bool {
        guard mode == .lossless else { return false }
        let first = control.firstSequence(index)
        return first > 0 && first <= control.endSequence
    }

    /// What `nextFrame` hands the consumer.
    enum Outcome: ~Copyable { case frame(Frame), ended, producerGone }
    /// What one look at shared memory found.
    enum Look: ~Copyable { case frame(Frame), ended, nothingYet }

    let stream: String
    /// Lossless until the producer's stall timeout demotes this consumer to live.
    private(set) var mode: DeliveryMode
    let control: ControlSegment
    let index: Int
    let bit: UInt64
    let producerPID: Int32
    /// The producer's pidfd: readable once it exits.
    private let producerFD: FileDescriptor
    /// Wakes this consumer's sleep when the producer exits (stopped before producerFD closes).
    private var exitWatch: ProducerExitWatch?
    /// The doorbell (ZeroMQ SUB), connected only when an event loop asks for a descriptor
    /// (`doorbellDescriptor`): local consumers sleep on `frame_wake` instead.
    private var socket: ZMQSocket?
    private let receiveHighWaterMark: Int32
    /// Microseconds to spin on `frame_wake` before sleeping (`ConsumerOptions.pollMicros`).
    private let pollMicros: Int
    /// The pace of the stream, for the busy-poll window: the newest frame's capture time
    /// and the smoothed interval between captures (0 until two frames arrived).
    private var lastCaptureNanos: UInt64 = 0
    private var captureIntervalNanos: UInt64 = 0
    private let directory: RuntimeDirectory
    /// The pools mapped, by epoch, and how many of each one's frames are held.
    private var pools: [UInt64: PoolMapping] = [:]
    /// The pool used last: the per-frame lookups skip the dictionary (one epoch at a time).
    private var recentPool: PoolMapping?
    private var producerExited = false
    private var detached = false
    private var expected: UInt64 = 0
    private var lastDelivered: UInt64 = 0
    /// A demoted consumer that had delivered nothing counts misses from its first owed frame.
    private var countMissesFromStart = false
    /// Frames held when the stall timeout demoted this consumer to live (see `nextLive`).
    private var heldAtDemotion = 0
    private(set) var missedTotal: UInt64 = 0
    /// Frames refused because their header failed validation.
    private(set) var badFrames: UInt64 = 0
    private var heldCount = 0
    let liveMaxHeld: Int
    /// Bookkeeping of `SharedFrame` releases (which may come from any thread) that the
    /// consumer's thread has not done yet: see `releaseShared` and `settleReleases`.
    private let pendingReleases = Mutex<[(slot: UInt32, epoch: UInt64)]>([])
    private let receiveBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 8)

    /// Opens and validates the control segment and claims a consumer entry; nil when
    /// there is no stream yet or only a dead producer's leftovers.
    static func open(stream: String, directory: RuntimeDirectory, options: ConsumerOptions) throws(FrameServerError) -> Attachment? {
        let opened: ControlSegment?
        // Another version's segment: its producer, if alive, will not change version (one
        // line, no retry); a dead one's file is a leftover to wait past (design 4).
        do { opened = try ControlSegment.open(directory.controlPath(stream), writable: true, passingLeftovers: true) } catch {
            if case .system(_, _, let e) = error, e == .noSuchFileOrDirectory { return nil }
            throw FrameServerError(error)
        }
        guard let control = opened else { return nil }
        let producer = control.producer
        guard let pidfd = producer.openExitDescriptor() else { return nil }   // a dead producer's leftover
        let producerFD = FileDescriptor(adopting: pidfd)
        // From here on, a throw closes producerFD with it.
        let me = ProcessIdentity.current
        guard let index = control.claimConsumer(pid: me.pid) else {
            throw .tooManyConsumers(stream, max: Int(FS_MAX_CONSUMERS))
        }
        if options.mode == .live, !control.admitsLiveConsumer(index) {
            let live = control.liveConsumerCount(except: index)
            control.unclaimConsumer(index)
            throw .attach(.poolTooSmallForLive(stream: stream, slots: Int(control.slotCount), liveConsumers: live,
                                               holdLimit: control.liveMaxHeld))
        }
        control.activateConsumer(index, identity: me, mode: options.mode == .live ? .live : .lossless, name: options.name)
        return Attachment(stream: stream, options: options, control: control, index: index, producerPID: producer.pid,
                          producerFD: producerFD, directory: directory)
    }

    private init(stream: String, options: ConsumerOptions, control: ControlSegment, index: Int, producerPID: Int32,
                 producerFD: consuming FileDescriptor, directory: RuntimeDirectory) {
        self.stream = stream; self.mode = options.mode; self.control = control
        self.index = index; self.bit = 1 << UInt64(index)
        self.producerPID = producerPID; self.producerFD = producerFD; self.directory = directory
        self.liveMaxHeld = control.liveMaxHeld
        self.pollMicros = min(max(options.pollMicros, 0), 1_000_000)
        self.receiveHighWaterMark = options.receiveHighWaterMark
        self.exitWatch = ProducerExitWatch(control: control, producerFD: self.producerFD.rawValue)
    }

    deinit {
        settleReleases()
        detach()
        exitWatch = nil   // joins its thread while producerFD is still open; producerFD closes after this
        receiveBuffer.deallocate()
    }

    /// Asks the producer to take this consumer out (it clears every reservation still
    /// pending). Frames already handed out stay valid until released.
    func detach() {
        guard !detached else { return }
        settleReleases()
        detached = true
        // Frames still out keep their slots until released: detach when the last one goes.
        guard heldCount == 0 else { return }
        sendDetach()
    }

    private func sendDetach() {
        guard !producerExited, !control.segment.truncated else { return }
        control.requestDetach(index)
    }

    /// Connects the doorbell (once) and returns its ZMQ_FD: readable (edge-triggered, as
    /// libzmq's) when announcements may be waiting. For event loops; `nextFrame` drains it.
    func doorbellDescriptor() throws(FrameServerError) -> Int32 {
        if let socket { return socket.descriptor }
        let s = try ZMQSocket(type: ZMQ_SUB)
        s.setOption(ZMQ_RCVHWM, receiveHighWaterMark)
        s.subscribeAll()
        try s.connect(directory.endpoint(stream))
        socket = s
        return s.descriptor
    }

    /// Reads every pending announcement; they only say "look again".
    private func drainDoorbell() {
        guard let socket else { return }
        while socket.receive(into: receiveBuffer) != nil {}
    }

    /// The longest one futex sleep lasts: the producer's SIGKILL (which bumps nothing) and
    /// a stop signal that landed just before the sleep are seen at most this late.
    static let longestSleepNanos: Int64 = 500_000_000

    /// The next frame, the end, or the producer's exit. Sleeps on `frame_wake` (design 1.3):
    /// look; spin up to `pollMicros`; announce the sleep; look again; sleep.
    func nextFrame(stop: () -> Bool) throws(FrameServerError) -> Outcome {
        var spun = false
        while true {
            settleReleases()
            drainDoorbell()
            // Read before the look: a publish between the look and the spin then ends the
            // spin at once, instead of waiting out the window.
            let seen = pollMicros > 0 ? control.frameWakeWord : 0
            if let outcome = try look() { return outcome }
            var sleepNanos = Self.longestSleepNanos
            if pollMicros > 0, !spun {
                let now = monotonicNanos(), opens = pollWindowOpens(now: now)
                if opens <= now {
                    spun = true
                    if spin(seen: seen) { continue }
                } else {
                    sleepNanos = Int64(min(opens - now, UInt64(sleepNanos)))   // then spin
                }
            }
            // SYNC: fs_consumer_wait_begin before the last look; see `ControlSegment.frameReady`.
            let w = control.beginWaitForFrame(bit)
            let last: Outcome?
            do { last = try look() } catch {
                control.endWaitForFrame(bit)
                throw error
            }
            if let last {
                control.endWaitForFrame(bit)
                return last
            }
            if waitReadable([producerFD.rawValue], timeoutMillis: 0) != nil {
                control.endWaitForFrame(bit)
                producerExited = true
                continue
            }
            _ = control.waitForFrame(seen: w, timeoutNanos: sleepNanos)
            control.endWaitForFrame(bit)
            // Asked after every sleep, not only an interrupted one: a signal that landed
            // while this thread was busy (no EINTR) is seen at the next frame's wake.
            if stop() { return .ended }
        }
    }

    /// One look at shared memory: a frame, the end, the producer gone, or nil (nothing yet).
    @inline(__always)
    private func look() throws(FrameServerError) -> Outcome? {
        do { try control.segment.checkIntact() } catch { throw .segment(error) }
        mapCurrentPool()
        switch try mode == .lossless ? nextLossless() : nextLive() {
        case .frame(let f): return .frame(f)
        case .ended: return .ended
        case .nothingYet: break
        }
        if control.ended, mode == .live || producerExited { return .ended }
        if producerExited { return .producerGone }
        if detached { return .ended }
        return nil
    }

    /// When this frame's busy-poll window opens: half the window before the next frame is
    /// due on a paced stream; `now` when the pace is unknown or faster than the window.
    private func pollWindowOpens(now: UInt64) -> UInt64 {
        let window = UInt64(pollMicros) * 1000
        guard captureIntervalNanos > window, lastCaptureNanos > 0 else { return now }
        return lastCaptureNanos + captureIntervalNanos - window / 2
    }

    /// Folds a delivered frame's capture time into the stream's pace (a 1/8 moving average).
    private func notePace(capture: UInt64) {
        if lastCaptureNanos > 0, capture > lastCaptureNanos {
            let interval = capture - lastCaptureNanos
            captureIntervalNanos = captureIntervalNanos == 0 ? interval : (captureIntervalNanos * 7 + interval) / 8
        }
        lastCaptureNanos = capture
    }

    /// Busy-polls `frame_wake` for up to `pollMicros`; whether it changed (look again).
    /// SYNC: the acquire load that sees the change orders the next look after the bump.
    private func spin(seen: UInt32) -> Bool {
        let end = monotonicNanos() + UInt64(pollMicros) * 1000
        var spins = 0
        while control.frameWakeWord == seen {
            spins &+= 1
            if spins & 63 == 0, monotonicNanos() >= end { return false }
        }
        return true
    }

    /// Lossless: the frame with sequence `expected`, reserved for us by the producer.
    private func nextLossless() throws(FrameServerError) -> Look {
        if control.consumerMode(index) == .live {
            // The producer's stall timeout demoted us (PROTOCOL.md 12.6): newest frames from
            // now on; what we did not take is counted as missed.
            mode = .live
            // Frames taken while lossless (a filter graph may keep several) do not count
            // against the live hold limit: the limit applies to what is taken from now on.
            heldAtDemotion = heldCount
            if lastDelivered == 0 {
                // Nothing delivered yet: every frame owed since admission counts as missed.
                let first = expected != 0 ? expected : control.firstSequence(index)
                lastDelivered = first > 0 ? first - 1 : 0
                countMissesFromStart = true
            }
            return try nextLive()
        }
        if expected == 0 {
            let first = control.firstSequence(index)
            if first == 0 {
                return control.ended ? .ended : .nothingYet
            }
            expected = first
        }
        if control.ended && expected > control.endSequence { return .ended }
        // A second look only after skipping frames lost to a damaged slot (bounded: a slot
        // rewritten over and over cannot keep us here).
        for _ in 0..<2 {
            if let i = slotReserved(expected) {
                // Advance first: a frame that cannot be delivered (error thrown) is skipped, not retried forever.
                expected += 1
                return .frame(try deliver(slot: i, seq: expected - 1))
            }
            guard skipLostFrames() else { break }
        }
        return .nothingYet
    }

    /// The slot that holds frame `seq` reserved for us, if any (fs_slot_held_by's acquire).
    private func slotReserved(_ seq: UInt64) -> UInt32? {
        (0..<control.slotCount).first { fs_slot_held_by(control.slot($0), bit, seq) != 0 }
    }

    /// Frame `expected` is in no slot reserved for us. The producer publishes in sequence
    /// order, so once a later frame is reserved for us (seen with acquire, after the scan
    /// that missed `expected`), `expected` can no longer arrive: a slot's `seq` was damaged
    /// in shared memory. Skips to the oldest later frame reserved for us, counting the lost
    /// ones as missed, so that one damaged slot cannot stall this consumer and, through it,
    /// the producer. A `seq` damaged to a value the producer has not published yet (past
    /// `latest`, read after the scan) proves nothing and is passed over. (A damaged last
    /// frame ends with the producer's exit, as any end does.) Returns whether
    /// `nextLossless` should look again.
    private func skipLostFrames() -> Bool {
        var next: UInt64?
        for i in 0..<control.slotCount {
            guard let seq = control.reservedSequence(i, bit: bit), seq > expected else { continue }
            next = min(next ?? seq, seq)
        }
        guard let next, next <= control.latestWord >> 8 else { return false }
        // Rescan: a frame `expected` published before `next` is visible now (sequence order).
        if slotReserved(expected) != nil { return true }
        missedTotal += next - expected
        control.countMissed(index, next - expected)
        expected = next
        return true
    }

    /// Live: the newest published frame, if newer than the last one delivered.
    private func nextLive() throws(FrameServerError) -> Look {
        guard heldCount < liveMaxHeld + heldAtDemotion else { throw .holdLimit(max: liveMaxHeld) }
        while true {
            let word = control.latestWord
            let latest: (sequence: UInt64, slot: UInt32)?
            do { latest = try control.latest() } catch { throw .segment(error) }
            guard let latest, latest.sequence > lastDelivered else { return .nothingYet }
            let (seq, slot) = latest
            if fs_slot_try_acquire(control.slot(slot), bit, seq) != 0 {
                if lastDelivered > 0 || countMissesFromStart {
                    let skipped = seq - lastDelivered - 1
                    missedTotal += skipped
                    control.countMissed(index, skipped)
                }
                return .frame(try deliver(slot: slot, seq: seq))
            }
            // Stale announcement: the slot was recycled between reading `latest` and acquiring.
            control.countStale(index)
            control.notifyProducer()
            // Still the same newest frame: its slot is being rewritten. Wait for the doorbell
            // of the frame being written instead of spinning.
            if control.latestWord == word { return .nothingYet }
        }
    }

    /// Maps the producer's current pool as soon as it exists, so frames owed to this
    /// consumer stay readable even if the producer exits and removes the file before
    /// they are delivered.
    private func mapCurrentPool() {
        let epoch = control.epoch
        guard epoch != 0, mapping(epoch) == nil, let file = try? openPool(epoch: epoch) else { return }
        addMapping(epoch, file)
        for old in pools.keys where old != epoch && pools[old]!.held <= 0 { pools[old] = nil }
    }

    /// Pool `epoch`'s mapping, if mapped.
    private func mapping(_ epoch: UInt64) -> PoolMapping? {
        if let r = recentPool, r.epoch == epoch { return r }
        let m = pools[epoch]
        if m != nil { recentPool = m }
        return m
    }

    @discardableResult
    private func addMapping(_ epoch: UInt64, _ file: (pool: Segment, slotBytes: Int)) -> PoolMapping {
        let m = PoolMapping(epoch: epoch, file: file.pool, slotBytes: file.slotBytes)
        pools[epoch] = m
        recentPool = m
        return m
    }

    /// Maps pool `epoch` read-only (`Segment.openPool` checks its size).
    private func openPool(epoch: UInt64) throws(SegmentError) -> (pool: Segment, slotBytes: Int) {
        try Segment.openPool(directory.poolPath(stream, epoch: epoch), slotCount: control.slotCount)
    }

    /// Hands out a held slot as a Frame, mapping its pool epoch (read-only) if needed.
    /// A header that fails validation, or a segment truncated under us, releases the slot
    /// before the error is thrown.
    private func deliver(slot: UInt32, seq: UInt64) throws(FrameServerError) -> Frame {
        let epoch = control.slot(slot).pointee.epoch
        let mapped: PoolMapping
        if let m = mapping(epoch) { mapped = m } else {
            do { mapped = addMapping(epoch, try openPool(epoch: epoch)) } catch {
                release(slot: slot, epoch: epoch, mapped: false)
                throw FrameServerError(error)
            }
        }
        // Each epoch's pool has its own slot size: derive it from the mapping, not the header.
        let (pool, slotBytes) = (mapped.file, mapped.slotBytes)
        let base = UnsafeRawPointer(pool.base + Int(slot) * slotBytes)
        // One copy of the header: what is validated is what the frame reports and reads through.
        let header = pool.frameHeader(slot: slot, slotBytes: slotBytes)
        // Nothing counted as held yet, so a refused header releases with mapped: false.
        if pool.truncated || control.segment.truncated {
            release(slot: slot, epoch: epoch, mapped: false)
            throw .segment(.truncated(path: pool.truncated ? pool.path : control.path))
        }
        do { try FrameHeader.validate(header, sequence: seq, slotBytes: slotBytes) } catch {
            release(slot: slot, epoch: epoch, mapped: false)
            badFrames += 1
            throw .badFrame(path: pool.path, slot: slot, error)
        }
        mapped.held += 1
        heldCount += 1
        let now = monotonicNanos()
        let capture = header.capture_ns
        let latency = now > capture ? now - capture : 0
        if pollMicros > 0 { notePace(capture: capture) }
        control.recordDelivery(index, sequence: seq, held: heldCount, now: now, latencyNanos: latency,
                               sourceDropped: header.source_dropped)
        lastDelivered = seq
        return Frame(owner: Unmanaged.passRetained(self), slot: slot, sequence: seq, epoch: epoch, base: base,
                     header: FrameHeader(header), latencyNanos: latency)
    }

    /// Why a frame header cannot be trusted, or nil if it is sound: `FrameHeader.validate`'s
    /// verdict as text (kept for callers that only want the reason).
    static func headerProblem(_ h: fs_frame, seq: UInt64, slotBytes: Int) -> String? {
        do { try FrameHeader.validate(h, sequence: seq, slotBytes: slotBytes) } catch { return error.description }
        return nil
    }

    /// Gives a slot back to the producer. SYNC: fs_slot_release (release ordering).
    func release(slot: UInt32, epoch: UInt64, mapped: Bool = true) {
        control.release(slot: slot, bit: bit)
        guard mapped else { return }
        releaseBookkeeping(epoch: epoch)
    }

    /// Frames of this attachment held now (after `settleReleases`).
    var held: Int { heldCount }

    /// Bytes of one slot of epoch `epoch`'s pool (mapped while a frame of it is held).
    func slotBytes(epoch: UInt64) -> Int {
        mapping(epoch)?.slotBytes ?? 0
    }

    /// A `SharedFrame`'s release, from whatever thread drops the last reference: the slot
    /// goes back to the producer at once (atomics in shared memory only); the consumer's
    /// own counters follow on its thread, at its next `settleReleases`.
    func releaseShared(slot: UInt32, epoch: UInt64) {
        control.release(slot: slot, bit: bit)
        pendingReleases.withLock { $0.append((slot, epoch)) }
    }

    /// Does the bookkeeping of the `SharedFrame` releases since the last call (consumer's thread).
    func settleReleases() {
        let pending = pendingReleases.withLock { p -> [(slot: UInt32, epoch: UInt64)] in
            guard !p.isEmpty else { return [] }
            defer { p.removeAll(keepingCapacity: true) }
            return p
        }
        for r in pending { releaseBookkeeping(epoch: r.epoch) }
    }

    /// What a release changes besides the slot: held counts, the entry's statistics, the
    /// deferred detach, the old pool's mapping.
    private func releaseBookkeeping(epoch: UInt64) {
        heldCount -= 1
        control.recordRelease(index, held: heldCount)
        // Last: after CLOSING the entry may be freed and claimed by another consumer.
        if detached, heldCount == 0 { sendDetach() }
        if let p = mapping(epoch) {
            p.held -= 1
            if p.held <= 0, epoch != control.epoch {
                pools[epoch] = nil
                if recentPool === p { recentPool = nil }
            }
        }
    }
}

/// One pool epoch mapped read-only by a consumer, and how many of its frames it holds.
final class PoolMapping {
    let epoch: UInt64
    let file: Segment
    let slotBytes: Int
    var held = 0

    init(epoch: UInt64, file: Segment, slotBytes: Int) {
        self.epoch = epoch; self.file = file; self.slotBytes = slotBytes
    }
}

/// A frame held by this consumer: read it in place, then let it go.
///
/// Noncopyable, so it is released exactly once: explicitly with `release()`, or when it
/// goes out of scope. The pixels are mapped read-only; a write through a cast pointer
/// faults instead of corrupting what other consumers read.
public struct Frame: ~Copyable {
    let owner: Unmanaged<Attachment>
    /// Slot index in the pool.
    public let slot: UInt32
    /// The frame's sequence number (1, 2, 3, ... per producer run).
    public let sequence: UInt64
    let epoch: UInt64
    /// The slot's first byte (its `fs_frame` header); planes lie at the header's offsets.
    public let base: UnsafeRawPointer
    /// Publish-to-acquire latency, measured through the capture clock in the header.
    public let latencyNanos: UInt64
    /// The frame header (format, plane layout, timestamps, colour, flags): the copy taken
    /// and validated at delivery, so a later write to the slot's header cannot move a plane.
    public let header: FrameHeader

    init(owner: Unmanaged<Attachment>, slot: UInt32, sequence: UInt64, epoch: UInt64, base: UnsafeRawPointer,
         header: FrameHeader, latencyNanos: UInt64) {
        self.owner = owner; self.slot = slot; self.sequence = sequence; self.epoch = epoch; self.base = base
        self.header = header; self.latencyNanos = latencyNanos
    }

    /// Plane `i`'s bytes, in place in shared memory (stride x rows, as the validated header lays them out).
    public func plane(_ i: Int) -> UnsafeRawBufferPointer { header.planeBytes(i, base: base) }

    /// Turns this frame into a reference-counted `SharedFrame` whose slot is released
    /// exactly once, when the last reference to it goes, from any thread (for example from
    /// the free callback of an FFmpeg buffer that wraps the slot). It still counts as held
    /// (`Consumer.heldFrames`, the live hold limit) until then.
    public consuming func share() -> SharedFrame {
        let attachment = owner.takeRetainedValue()
        let shared = SharedFrame(owner: attachment, slot: slot, sequence: sequence, epoch: epoch, base: base,
                                 header: header, slotBytes: attachment.slotBytes(epoch: epoch), latencyNanos: latencyNanos)
        discard self
        return shared
    }

    /// Gives the slot back now.
    public consuming func release() {
        owner.takeUnretainedValue().release(slot: slot, epoch: epoch)
        owner.release()
        discard self
    }

    deinit {
        owner.takeUnretainedValue().release(slot: slot, epoch: epoch)
        owner.release()
    }
}

/// A held frame shared by reference (`Frame.share()`): read-only pixels in place, released
/// exactly once when the last reference goes, whatever thread drops it. The slot returns
/// to the producer at that moment; the consumer's counters catch up at its next `next()`
/// (or `heldFrames`), on its own thread.
public final class SharedFrame: @unchecked Sendable {
    // @unchecked Sendable: immutable after init; the release in deinit touches only
    // shared-memory atomics and a mutex-protected list (Attachment.releaseShared).
    private let owner: Attachment
    /// Slot index in the pool.
    public let slot: UInt32
    /// The frame's sequence number.
    public let sequence: UInt64
    let epoch: UInt64
    /// The slot's first byte (its `fs_frame` header); planes are at the header's offsets.
    public let base: UnsafeRawPointer
    /// Bytes of the slot in its pool's mapping, header included: every byte from `base` to
    /// `base + slotBytes` is mapped (readable) while the frame is held.
    public let slotBytes: Int
    /// Publish-to-acquire latency.
    public let latencyNanos: UInt64
    /// The frame header, as validated at delivery (see `Frame.header`).
    public let header: FrameHeader

    init(owner: Attachment, slot: UInt32, sequence: UInt64, epoch: UInt64, base: UnsafeRawPointer,
         header: FrameHeader, slotBytes: Int, latencyNanos: UInt64) {
        self.owner = owner; self.slot = slot; self.sequence = sequence; self.epoch = epoch
        self.base = base; self.header = header; self.slotBytes = slotBytes; self.latencyNanos = latencyNanos
    }

    /// Plane `i`'s bytes, in place in shared memory (stride x rows, as the header lays them out).
    public func plane(_ i: Int) -> UnsafeRawBufferPointer { header.planeBytes(i, base: base) }

    deinit { owner.releaseShared(slot: slot, epoch: epoch) }
}
