import CFrameServer
import CZMQ
import Glibc
import Synchronization

/// How a producer runs its stream.
public struct ProducerOptions: Sendable {
    /// Slots in the pool (1 to 64). Memory is slots x slot size, allocated once per epoch.
    public var slots = 8
    /// A live source (camera, screen, `-re`) never waits for a slot: when none is free the
    /// frame is dropped at the source and counted. Otherwise the producer waits (backpressure).
    public var liveSource = false
    /// ZeroMQ send high-water mark, in messages. Announcements past it are dropped by
    /// ZeroMQ; consumers recover from shared memory.
    public var sendHighWaterMark: Int32 = 1000
    /// Frames a live consumer may hold at once.
    public var liveMaxHeld = 2
    /// Nominal frame rate in frames per second, exact (nil: unknown or as fast as possible).
    public var nominalRate: Rational? = nil
    /// Minimum bytes per slot (a later, larger format still starts a new epoch).
    public var minimumSlotBytes = 0
    /// Seconds a lossless consumer may go without taking a frame while the producer waits
    /// for a slot, before it is demoted to live (nil: wait for it forever). A demoted
    /// consumer stays attached, gets the newest frames from then on and counts the ones it
    /// missed; `fs_control.demoted` (`Producer.demotedCount`, `ls`) counts demotions.
    public var stallTimeout: Double? = nil
    /// What monitors show for this producer (`fs_control.producer_name`, at most 31 bytes:
    /// see `ClientName.fit`), by role: `produce in.mp4`, `filter blur=4 -> soft`.
    public var name = "producer"

    public init() {}
}

/// State shared between the publishing thread and the consumer watcher threads.
struct ProducerShared {
    var nextSeq: UInt64 = 1
    /// Consumers that get every new frame reserved for them.
    var losslessMask: UInt64 = 0
    /// Whether any consumer was ever admitted (see `RuntimeDirectory.endedPath`).
    var everAdmitted = false
    /// Consumer index -> (pidfd, identity) for every consumer being watched.
    var watched: [Int: (fd: Int32, identity: ProcessIdentity)] = [:]
    /// pidfds the reaper thread must close (only it closes them, so it never polls a reused number).
    var toClose: [Int32] = []
    var running = true
}

/// The writing side of a stream: owns the control segment, the pool and the PUB socket.
///
/// Use it from one thread, and end it with `close()` (which also ends the stream): its
/// watcher threads keep it alive until then. Internally two watcher threads block in the kernel (one on
/// the `attach_seq` futex, one in `poll` on consumers' pidfds) to admit new consumers
/// and to reclaim the slots of consumers that exit or die; they touch only atomics in
/// shared memory and the mutex-protected `ProducerShared`.
public final class Producer: @unchecked Sendable {
    // @unchecked Sendable: see above; everything the watcher threads share is behind `shared`.
    public let stream: String
    public let directory: RuntimeDirectory
    public let options: ProducerOptions

    // Lock order (outer first; never take an outer lock while holding an inner one):
    //   slotLock -> SlotLease.state -> shared -> announceLock
    // `leased` is an atomic and takes no lock. The watcher threads take only `shared`
    // (scanConsumers, reclaim) and never `slotLock`; `announceLock` is innermost and
    // held only around one send.
    private var lock: FileLock?
    /// The control segment. Its slot count and record offsets are this producer's own
    /// values, never re-read from shared memory (another process can write there).
    let control: ControlSegment
    /// The segment's header (tests poke at it).
    var ctl: UnsafeMutablePointer<fs_control> { control.header }
    /// Serialises everything that takes slots or changes the pool (`reserve`, `lease`,
    /// publishing), which may run on the publishing thread and on a decoder's thread.
    private let slotLock = ThreadLock()
    /// Serialises the PUB socket (ZeroMQ sockets are not thread-safe).
    private let announceLock = ThreadLock()
    /// Slots held by a `SlotLease` (bit i: slot i), set by `lease`, cleared by `SlotLease.end`.
    private let leased = Atomic<UInt64>(0)
    /// Earlier epochs whose pool files stay because, when the epoch changed, some of their
    /// slots (the mask) still held frames consumers had (see `startEpoch`).
    private var retired: [(epoch: UInt64, slots: UInt64)] = []
    /// The largest slot a lease asked for in vain (its frames were copied): the next epoch
    /// the publishing thread starts is at least this large, so decoding in place resumes.
    private var leaseBytesWanted = 0
    private var pool: Segment?
    private var slotStride = 0
    private(set) var epoch: UInt64 = 0
    private let socket: ZMQSocket
    let shared = Mutex(ProducerShared())
    private var nextSlotHint: UInt32 = 0
    /// Per lossless consumer: the `delivered` count last seen and when it last changed
    /// (the stall timeout's evidence of progress). Touched under `slotLock` only.
    private var progress: [Int: (delivered: UInt64, since: UInt64)] = [:]
    /// The newest published frame (this producer's own record of `latest`).
    private var latestPublished: (sequence: UInt64, slot: UInt32)?
    private let announceBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 128, alignment: 8)
    private var templateFormat: FrameFormat?
    private var template = fs_frame()
    /// Wakes the reaper thread's poll (an eventfd): closed with the object.
    private let wakeFD: FileDescriptor
    private var threads: [pthread_t] = []
    /// Asked whenever a signal interrupts a wait for a slot; returning true makes `reserve`
    /// return nil (for example after SIGINT, so a command can end its stream and exit).
    public var shouldStop: (() -> Bool)?
    private var closed = false
    /// Reserved frames not yet published or dropped.
    private var outstanding = 0

    /// Creates stream `stream` in the runtime directory, cleaning any leftovers of a dead producer.
    ///
    /// Throws `.streamBusy` when a live producer already owns the name.
    public init(stream: String, options: ProducerOptions = ProducerOptions(),
                directory: RuntimeDirectory? = nil) throws(FrameServerError) {
        try validateStreamName(stream)
        guard (1...Int(FS_MAX_SLOTS)).contains(options.slots) else {
            throw .produce(.slotCount(options.slots))
        }
        let dir: RuntimeDirectory
        if let directory { dir = directory } else { dir = try RuntimeDirectory() }
        self.stream = stream
        self.directory = dir
        self.options = options

        self.lock = try Self.takeStreamLock(stream, in: dir)
        // Holding the lock proves every other file of this stream is a dead producer's leftover.
        for f in dir.files(of: stream) where f != dir.lockPath(stream) { try? removeFile(f) }

        let tmp = dir.controlPath(stream) + ".tmp.\(getpid())"
        control = try ControlSegment.create(tmp, .init(stream: stream, slots: options.slots, liveSource: options.liveSource,
                                                       liveMaxHeld: options.liveMaxHeld, nominalRate: options.nominalRate,
                                                       producerName: options.name))

        socket = try ZMQSocket(type: ZMQ_XPUB)
        socket.setOption(ZMQ_SNDHWM, options.sendHighWaterMark)
        do {
            try socket.bind(dir.endpoint(stream))
        } catch {
            try? removeFile(tmp)
            throw error
        }
        try? changeMode(dir.socketPath(stream), 0o600)   // a failure is harmless: the directory is 0700 anyway
        do { wakeFD = try makeEventDescriptor() } catch {
            try? removeFile(tmp)
            throw .system("create the reaper's eventfd", path: nil, error)
        }
        // Publishing the control segment under its real name is the moment the stream exists.
        do { try renameFile(tmp, to: dir.controlPath(stream)) } catch {
            try? removeFile(tmp)
            throw .system("publish control segment", path: dir.controlPath(stream), error)
        }
        // The watcher threads hold the producer until close() stops them.
        threads.append(spawnThread { self.watchAttachments() })
        threads.append(spawnThread { self.reapExitedConsumers() })
    }

    deinit {
        close()
        announceBuffer.deallocate()
    }

    /// The stream's lock proves this process is its only producer. When it is taken but
    /// no live producer is behind it, `framesrv clean` holds it for a moment: retry for 1 s.
    private static func takeStreamLock(_ stream: String, in dir: RuntimeDirectory) throws(FrameServerError) -> FileLock {
        let deadline = monotonicNanos() + 1_000_000_000
        while true {
            if let lock = try FileLock.tryExclusive(dir.lockPath(stream)) { return lock }
            let snapshot = try? StreamSnapshot.read(stream, in: dir)
            if let snapshot, snapshot.state != "dead" || monotonicNanos() > deadline {
                throw .streamBusy(stream, producerPID: snapshot.producerPID)
            }
            if snapshot == nil, monotonicNanos() > deadline { throw .streamBusy(stream, producerPID: 0) }
            usleep(10_000)
        }
    }

    /// Ends the stream (if not already ended), stops the watcher threads and removes the
    /// stream's files. Consumers keep their mappings and read what they still hold.
    public func close() {
        guard !closed else { return }
        closed = true
        if !ended { finish() }
        waitForReleases(timeoutSeconds: 2)
        shared.withLock { $0.running = false }
        control.announceConsumerChange()
        control.frameReady()
        signalEvent(wakeFD.rawValue)
        for t in threads { pthread_join(t, nil) }
        shared.withLock { s in
            for (_, w) in s.watched { FileDescriptor(adopting: w.fd).close() }
            for fd in s.toClose { FileDescriptor(adopting: fd).close() }
            s.watched.removeAll(); s.toClose.removeAll()
        }
        // wakeFD closes with the object (deinit): the watcher threads that used it are joined.
        try? removeFile(directory.controlPath(stream))
        try? removeFile(directory.socketPath(stream))
        // A consumer that still holds (or is owed) frames but has not mapped the pool yet
        // must still find it: leave it for the next producer of this name or 'framesrv clean'.
        if epoch > 0, !control.anySlotHeld(countingWriter: true) {
            try? removeFile(directory.poolPath(stream, epoch: epoch))
            for r in retired { try? removeFile(directory.poolPath(stream, epoch: r.epoch)) }
        }
        leaveEndedNote()
        lock?.unlinkAndRelease()   // unlinked while held, then released (PROTOCOL.md 14 step 4)
        lock = nil   // the name is free for the next producer
    }

    /// Frames published to nobody: a note says the stream ended (`RuntimeDirectory.endedPath`),
    /// written while the lock is still held. Nothing when a consumer ever attached.
    private func leaveEndedNote() {
        guard ended, publishedCount > 0, !shared.withLock({ $0.everAdmitted }) else { return }
        let text = "\(publishedCount)\n"
        guard let fd = try? FileDescriptor.open(directory.endedPath(stream), O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600) else { return }
        text.utf8CString.withUnsafeBytes { _ = try? fd.writeAll(UnsafeRawBufferPointer(rebasing: $0.dropLast())) }
        fd.close()
    }

    /// Frames of the stream that ended before this consumer came, from its note; nil without one.
    static func endedNote(_ stream: String, in directory: RuntimeDirectory) -> UInt64? {
        guard let fd = try? FileDescriptor.open(directory.endedPath(stream), O_RDONLY) else { return nil }
        var bytes = [UInt8](repeating: 0, count: 32)
        let n = bytes.withUnsafeMutableBytes { read(fd.rawValue, $0.baseAddress, $0.count) }
        fd.close()
        return UInt64(String(decoding: bytes.prefix(max(n, 0)).prefix { $0 != 0x0A }, as: UTF8.self)) ?? 0
    }

    // MARK: Writing frames

    /// Reserves a free slot for a frame of `format`.
    ///
    /// Waits while every slot is held (backpressure), unless the stream is a live source:
    /// then it returns nil and counts a drop. Also nil when `shouldStop` says so during the
    /// wait. A format larger than the current slots starts a new pool epoch at once (frames
    /// consumers still hold stay in the old pool).
    public func reserve(_ format: FrameFormat) throws(FrameServerError) -> WritableFrame? {
        try format.validate()
        try checkSegmentsIntact()
        return try slotLock.withLock { () throws(FrameServerError) -> WritableFrame? in
            if pool == nil || format.slotBytes > slotStride {
                guard outstanding == 0 else {
                    throw .produce(.framesOutstanding(outstanding, format))
                }
                try startEpoch(bytes: max(format.slotBytes, leaseBytesWanted))
            } else if leaseBytesWanted > slotStride, outstanding == 0 {
                // The decoder's frames no longer fit (a new size or format): give it larger
                // slots. Only an optimisation: if the pool cannot grow, go on copying.
                do { try startEpoch(bytes: leaseBytesWanted) } catch { leaseBytesWanted = 0 }
            }
            guard let slot = takeFreeSlot(wait: !options.liveSource) else {
                // A live source found no free slot; otherwise `shouldStop` ended the wait.
                if options.liveSource { control.countDropped(); droppedSincePublish &+= 1; noteDrop() }
                return nil
            }
            let base = pool!.base + Int(slot) * slotStride
            outstanding += 1
            return WritableFrame(producer: Unmanaged.passRetained(self), slot: slot, base: base, format: format)
        }
    }

    /// Slots a lease may never take, so that the publishing thread always has slots that
    /// only consumers can hold (and release without the decoder's help).
    public static let slotsKeptFromLeases = 2

    private enum LeaseAttempt: ~Copyable { case leased(SlotLease), wait, cannot }

    /// Reserves a free slot of at least `bytes` bytes (header included) for a frame the
    /// caller writes in place, publishes with `publish(_:format:layout:description:)` and
    /// may keep referencing afterwards (see `SlotLease`). Safe to call from another thread
    /// than the one that publishes (a decoder's `get_buffer2`).
    ///
    /// Returns nil (the caller then writes elsewhere and copies, through `reserve`) when
    /// the slots are too small for `bytes`, when leases already hold all but
    /// `slotsKeptFromLeases` slots, or when no slot is free and either `wait` is false or
    /// no consumer holds a slot (waiting would then wait for the caller itself).
    /// Starts the first epoch when there is no pool yet. Free the decoder (ending its
    /// leases) before `close()`: a slot still leased at close keeps its pool file.
    public func lease(bytes: Int, wait: Bool) throws(FrameServerError) -> SlotLease? {
        while true {
            let attempt = try slotLock.withLock { () throws(FrameServerError) -> LeaseAttempt in
                if pool == nil { try startEpoch(bytes: bytes) }
                let n = Int(control.slotCount)
                if bytes > slotStride { leaseBytesWanted = max(leaseBytesWanted, bytes) }
                guard bytes <= slotStride, let pool,
                      leased.load(ordering: .acquiring).nonzeroBitCount < n - Self.slotsKeptFromLeases else { return .cannot }
                if let slot = tryTakeFreeSlot() {
                    leased.bitwiseOr(1 << UInt64(slot), ordering: .sequentiallyConsistent)
                    // The decoder's own from the start: a monitor tells it from a copy being written.
                    fs_slot_hold_set(slotCtl(slot))
                    return .leased(SlotLease(producer: self, pool: pool, slot: slot, epoch: epoch,
                                             base: pool.base + Int(slot) * slotStride, capacity: slotStride))
                }
                return control.anySlotHeld(countingWriter: false) ? .wait : .cannot
            }
            switch consume attempt {
            case .leased(let lease): return lease
            case .cannot: return nil
            case .wait:
                guard wait else { return nil }
                let start = monotonicNanos()
                // As takeFreeSlot: the stall timeout applies here too, and a stop gives up (the
                // decoder then allocates from FFmpeg and the frame takes the copy path).
                let woke = sleepOnWake(until: nil) { () -> Bool? in
                    if (0..<control.slotCount).contains(where: { fs_slot_is_free(slotCtl($0)) != 0 }) { return true }
                    if slotLock.withLock({ demoteStalledConsumers(waitingSince: start) }) { return true }
                    return shouldStop?() == true ? false : nil
                }
                control.addBlocked(nanos: monotonicNanos() - start)
                if woke != true { return nil }
            }
        }
    }

    /// Publishes the frame written into `lease`'s slot, laid out as `layout`, without a
    /// copy; the slot keeps `producer_hold` until the lease ends. Returns false (nothing
    /// published: copy the frame through `reserve` instead) when the lease was already
    /// published or ended, or belongs to an earlier epoch.
    public func publish(_ lease: SlotLease, format: FrameFormat, layout: PlaneLayout,
                        description: FrameDescription) -> Bool {
        guard layout.fits(format, in: lease.capacity) else { return false }
        return slotLock.withLock {
            lease.state.withLock { state in
                guard state == .writing, lease.epoch == epoch else { return false }
                fs_slot_hold_set(slotCtl(lease.slot))
                commit(lease.slot, format: format, layout: layout, description: description)
                state = .published
                return true
            }
        }
    }

    /// A lease ended (any thread): its slot may be free now.
    func leaseEnded(_ slot: UInt32) {
        leased.bitwiseAnd(~(1 << UInt64(slot)), ordering: .sequentiallyConsistent)
        wakeWaiters()
    }

    /// Frames a live source dropped since its last publish: the next frame carries the
    /// count (`fs_frame.source_dropped`) and the discontinuity flag. Guarded by `slotLock`.
    private var droppedSincePublish: UInt32 = 0

    /// Told, at the first frame a live source drops for want of a free slot and then at
    /// most once a second, how many it dropped since and who held the pool (`poolHolders`):
    /// `dropped 12 frames (no free slot): consumer 'slow' (pid 123) holds 7 of 8 slots`.
    /// Called with the slot lock held (from `reserve`): it must not call back into the producer.
    public var onDropped: ((String) -> Void)?
    private var dropsUnreported = 0
    private var lastDropReport: UInt64?

    /// Counts a drop and reports it as `onDropped` says. Guarded by `slotLock`.
    private func noteDrop() {
        dropsUnreported += 1
        let now = monotonicNanos()
        guard let onDropped, lastDropReport.map({ now - $0 >= 1_000_000_000 }) ?? true else { return }
        lastDropReport = now
        let n = dropsUnreported
        dropsUnreported = 0
        onDropped("dropped \(n) frame\(n == 1 ? "" : "s") (no free slot): \(poolHolders())")
    }

    /// Who holds the slots, most first: `consumer 'slow' (pid 123) holds 7 of 8 slots,
    /// the decoder keeps 1 as a reference`.
    public func poolHolders() -> String {
        var held: [Int: Int] = [:], references = 0
        for slot in 0..<control.slotCount {
            let h = control.holders(slot)
            for c in 0..<Int(FS_MAX_CONSUMERS) where h & (1 << UInt64(c)) != 0 { held[c, default: 0] += 1 }
            if h & ~FS_HOLDER_WRITER == 0, control.producerHolds(slot) { references += 1 }
        }
        var parts = held.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.map { c, count in
            "consumer '\(readCString(control.consumer(c).pointee.name))' (pid \(control.consumerPID(c))) holds \(count) of \(control.slotCount) slots"
        }
        if references > 0 { parts.append("the decoder keeps \(references) as reference\(references == 1 ? "" : "s")") }
        return parts.isEmpty ? "no consumer holds a slot" : parts.joined(separator: ", ")
    }

    /// Frames published without a copy, from leases.
    public private(set) var publishedInPlace: UInt64 = 0

    /// Waits until at least `count` lossless consumers are attached (for deterministic
    /// scripted pipelines: a reader attached first gets every frame). Returns false if
    /// `timeoutSeconds` passed first (nil: forever), or when `shouldStop` says so.
    public func waitForLosslessConsumers(_ count: Int, timeoutSeconds: Double? = nil) -> Bool {
        let deadline = timeoutSeconds.map { monotonicNanos() + UInt64(min(max($0, 0), 1e9) * 1e9) }
        return sleepOnWake(until: deadline) {
            if losslessConsumerCount >= count { return true }
            return shouldStop?() == true ? false : nil
        } ?? false
    }

    /// Gives consumers up to `timeoutSeconds` to release what they hold (the last frames
    /// of an ended stream), so the pool can be removed with the stream. Sleeps on `wake`.
    private func waitForReleases(timeoutSeconds: Double) {
        let deadline = monotonicNanos() + UInt64(timeoutSeconds * 1e9)
        _ = sleepOnWake(until: deadline) { control.anySlotHeld(countingWriter: false) ? nil : true }
    }

    /// The one way the producer waits for consumers: sleeps on the `wake` futex until
    /// `ready` returns a value, or returns nil once `deadline` (CLOCK_MONOTONIC ns, nil:
    /// never) has passed. `beforeSleep` runs each time just before sleeping.
    /// SYNC: see fs_producer_wait_begin: any release after it changes `wake`, so the
    /// futex wait returns at once and `ready` is asked again (no lost wake-up).
    private func sleepOnWake<T>(until deadline: UInt64?, beforeSleep: () -> Void = {}, _ ready: () -> T?) -> T? {
        while true {
            let w = control.beginWaitForRelease()
            defer { control.endWaitForRelease() }
            if let value = ready() { return value }
            // A truncated control segment (now private zero pages) wakes nobody: give up.
            if control.segment.truncated { return nil }
            var timeout = longestSleepNanos
            if let deadline {
                let now = monotonicNanos()
                guard now < deadline else { return nil }
                timeout = min(timeout, Int64(deadline - now))
            }
            beforeSleep()
            control.waitForRelease(seen: w, timeoutNanos: timeout)
        }
    }

    /// The longest a producer thread sleeps on a futex before it looks again (1 s): a
    /// lost wake-up (a truncated segment, see `sleepOnWake`) then costs at most this long.
    static let longestWaitNanos: Int64 = 1_000_000_000
    /// What `sleepOnWake` sleeps at most: a second, or a quarter of the stall timeout.
    private var longestSleepNanos: Int64 {
        guard let t = options.stallTimeout else { return Self.longestWaitNanos }
        return max(1_000_000, min(Self.longestWaitNanos, Int64(min(max(t, 0), 1e9) * 0.25e9)))
    }

    /// Bumps `wake` and wakes whoever sleeps on it (this producer's own waits).
    func wakeWaiters() { control.wakeProducer() }

    /// Whether this producer ended the stream (its own flag, not re-read from shared memory).
    private var ended = false

    /// Throws when the control segment or the current pool was truncated under this
    /// producer (the SIGBUS guard caught it): the stream cannot go on.
    private func checkSegmentsIntact() throws(FrameServerError) {
        do {
            try control.segment.checkIntact()
            try slotLock.withLock { () throws(SegmentError) in try pool?.checkIntact() }
        } catch { throw .segment(error) }
    }

    /// Lossless consumers currently attached.
    public var losslessConsumerCount: Int { shared.withLock { $0.losslessMask.nonzeroBitCount } }

    /// Marks the stream ended: consumers deliver what they hold and then stop.
    ///
    /// `failed`: the source failed (too many decode errors, a read error); consumers still get
    /// every frame published, then learn that the stream is incomplete (`Consumer.sourceFailed`).
    public func finish(failed: Bool = false) {
        let last = shared.withLock { $0.nextSeq - 1 }
        ended = true
        control.markEnded(lastSequence: last, failed: failed)   // SYNC: release, publishes end_seq
        control.frameReady()
        announce(Announcement(kind: .end, stream: stream, sequence: last, epoch: epoch, publishNanos: monotonicNanos()))
        wakeWaiters()
    }

    /// Frames published so far.
    public var publishedCount: UInt64 { control.statistics.published }
    /// Frames dropped at the source.
    public var droppedCount: UInt64 { control.statistics.dropped }

    // MARK: Slots

    private func slotCtl(_ i: UInt32) -> UnsafeMutablePointer<fs_slot_ctl> { control.slot(i) }

    /// Finds and reserves a slot nobody holds, starting after the last one used so frames
    /// rotate through the pool (a live consumer then finds recent frames intact longer).
    private func tryTakeFreeSlot() -> UInt32? {
        let n = control.slotCount
        var free: UInt64 = 0
        var taken: UInt32?
        for k in 0..<n {
            let i = (nextSlotHint + k) % n
            let s = slotCtl(i)
            if fs_slot_is_free(s) != 0 {
                free += 1
                if taken == nil, fs_slot_try_reserve(s) != 0 { taken = i }
            }
        }
        if let taken {
            retire(slot: taken)
            nextSlotHint = (taken + 1) % n
            control.noteFreeSlots(free - 1)
        }
        return taken
    }

    private func takeFreeSlot(wait: Bool) -> UInt32? {
        if let s = tryTakeFreeSlot() { return s }
        guard wait else { return nil }
        let start = monotonicNanos()
        defer { control.addBlocked(nanos: monotonicNanos() - start) }
        if let s = spinForFreeSlot(until: start + Self.slotSpinNanos) { return s }
        // Ring the doorbell again before each sleep: a consumer whose subscription reached
        // ZeroMQ after the original announcements (a late joiner) then still wakes up and
        // finds the frames reserved for it.
        let slot = sleepOnWake(until: nil, beforeSleep: reannounceLatest) { () -> UInt32?? in
            if let s = tryTakeFreeSlot() { return .some(s) }
            if demoteStalledConsumers(waitingSince: start), let s = tryTakeFreeSlot() { return .some(s) }
            return shouldStop?() == true ? .some(nil) : nil   // stopping: give up, nothing taken
        }
        return slot ?? nil
    }

    /// How long a producer that found no free slot looks again before it sleeps (20 us).
    /// A consumer that keeps up releases a slot within microseconds; catching that release
    /// awake spares both sides the futex round trip (the producer's FUTEX_WAIT, the
    /// consumer's FUTEX_WAKE and two context switches) that would otherwise come with
    /// nearly every frame while the consumers are the slower side.
    static let slotSpinNanos: UInt64 = 20_000

    /// Looks for a free slot until `deadline` (CLOCK_MONOTONIC ns) without sleeping.
    /// `producer_waiting` stays 0 meanwhile, so the consumers' releases make no system call.
    private func spinForFreeSlot(until deadline: UInt64) -> UInt32? {
        var spins = 0
        while true {
            if let s = tryTakeFreeSlot() { return s }
            spins &+= 1
            if spins & 15 == 0, monotonicNanos() >= deadline { return nil }
        }
    }

    /// The stall timeout (`ProducerOptions.stallTimeout`): demotes to live every lossless
    /// consumer that has a slot (held or reserved) and has taken no frame for the timeout
    /// while this producer waited since `start`. Returns whether it demoted any. Called
    /// with `slotLock` held. `delivered` is the consumer's own counter: it is compared,
    /// never used as a size or index.
    private func demoteStalledConsumers(waitingSince start: UInt64) -> Bool {
        guard let timeout = options.stallTimeout else { return false }
        let limit = UInt64(min(max(timeout, 0), 1e9) * 1e9)
        let now = monotonicNanos()
        let mask = shared.withLock { $0.losslessMask }
        var demoted = false
        for i in 0..<Int(FS_MAX_CONSUMERS) where mask & (1 << UInt64(i)) != 0 {
            let delivered = control.progress(i).delivered
            guard let seen = progress[i], seen.delivered == delivered else {
                progress[i] = (delivered, now)
                continue
            }
            let bit: UInt64 = 1 << UInt64(i)
            guard now - max(seen.since, start) >= limit, control.anySlot(heldBy: bit) else { continue }
            shared.withLock { st in
                guard st.losslessMask & bit != 0 else { return }
                st.losslessMask &= ~bit
                control.publishLosslessMask(st.losslessMask)
                control.demoteToLive(i, bit: bit, delivered: control.progress(i).lastSequence)
            }
            progress[i] = nil
            demoted = true
        }
        if demoted { control.frameReady() }
        return demoted
    }

    /// Lossless consumers demoted to live by the stall timeout.
    public var demotedCount: UInt64 { control.demotedCount }

    /// Starts pool epoch N+1 with slots of at least `bytes` bytes, without waiting for anyone.
    ///
    /// Every slot nobody holds is reserved, its `seq` cleared and freed again in the new pool
    /// (a published slot only the decoder still references keeps its `producer_hold`). A slot
    /// a consumer still holds (or a decoder is still writing) keeps its frame in the old pool:
    /// that pool's file stays until every such slot has been released and taken again for the
    /// new epoch (`retired`), so consumers can still map it by the frame's epoch. Waiting for
    /// those slots instead could wait forever: a filter whose graph keeps the last frames
    /// until the next one arrives holds them across the change.
    private func startEpoch(bytes: Int) throws(FrameServerError) {
        let n = control.slotCount
        var reserved: [UInt32] = []
        var kept: UInt64 = 0
        if pool != nil {
            for i in 0..<n {
                if fs_slot_try_reserve(slotCtl(i)) != 0 { reserved.append(i) } else { kept |= 1 << UInt64(i) }
            }
        }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let stride = (max(bytes, options.minimumSlotBytes) + page - 1) / page * page
        let newEpoch = epoch + 1
        let newPool: Segment
        do {
            newPool = try Segment.create(directory.poolPath(stream, epoch: newEpoch), size: stride * Int(n))
        } catch {
            for i in reserved { fs_slot_abandon(slotCtl(i)) }   // the old epoch goes on
            throw error
        }
        if epoch > 0 {
            if kept != 0 { retired.append((epoch, kept)) } else { try? removeFile(directory.poolPath(stream, epoch: epoch)) }
        }
        for i in reserved { retire(slot: i) }   // may end an older retired pool
        pool = newPool
        slotStride = stride
        epoch = newEpoch
        // `latest` must not name an old-pool frame: a live consumer starts again from new frames.
        control.clearLatest()
        latestPublished = nil
        for i in reserved { slotCtl(i).pointee.seq = 0 }
        control.setEpoch(newEpoch, slotStride: stride, poolSize: stride * Int(n))   // SYNC: release, after stride and size
        for i in reserved { fs_slot_abandon(slotCtl(i)) }
        control.frameReady()
        let next = shared.withLock { $0.nextSeq }
        announce(Announcement(kind: .epoch, stream: stream, sequence: next, epoch: newEpoch, publishNanos: monotonicNanos()))
    }

    /// Slot `slot` was taken for a frame of the current epoch: it no longer holds a frame of
    /// a retired pool, and a retired pool none of whose slots does is removed.
    private func retire(slot: UInt32) {
        guard !retired.isEmpty else { return }
        let bit: UInt64 = 1 << UInt64(slot)
        for k in retired.indices { retired[k].slots &= ~bit }
        for r in retired where r.slots == 0 { try? removeFile(directory.poolPath(stream, epoch: r.epoch)) }
        retired.removeAll { $0.slots == 0 }
    }

    /// Precomputes the header fields that depend only on the format, so publishing
    /// allocates nothing.
    private func prepareTemplate(_ format: FrameFormat) {
        template = fs_frame(seq: 0, epoch: 0, format: format, description: FrameDescription())
        templateFormat = format
    }

    func abandon(_ slot: UInt32) {
        slotLock.withLock { outstanding -= 1 }
        fs_slot_abandon(slotCtl(slot))
        control.bumpWake()
    }

    /// Publishes a `WritableFrame`'s slot (canonical layout).
    func publishReserved(_ slot: UInt32, format: FrameFormat, description: FrameDescription) {
        slotLock.withLock {
            outstanding -= 1
            commit(slot, format: format, layout: nil, description: description)
        }
    }

    /// Publishes a written slot: header, reservation for every lossless consumer, then
    /// the doorbell. Called with `slotLock` held.
    private func commit(_ slot: UInt32, format: FrameFormat, layout: PlaneLayout?, description d: FrameDescription) {
        if templateFormat != format { prepareTemplate(format) }
        var header = template
        if let layout {
            header.setLayout(layout, format: format)
            publishedInPlace += 1
        }
        header.epoch = epoch
        header.color_matrix = d.color.matrix
        header.color_range = d.color.range
        header.color_primaries = d.color.primaries
        header.color_transfer = d.color.transfer
        header.sar_num = d.sampleAspectRatio.num
        header.sar_den = d.sampleAspectRatio.den
        header.pts = d.pts ?? Int64.min
        header.time_base_num = d.timeBase.num
        header.time_base_den = d.timeBase.den
        header.duration = d.duration
        header.capture_ns = d.captureNanos == 0 ? monotonicNanos() : d.captureNanos
        header.flags = d.flags.rawValue
        header.field_order = d.fieldOrder.rawValue
        header.chroma_location = d.chromaLocation.rawValue
        header.source_dropped = d.sourceDropped &+ droppedSincePublish
        if header.source_dropped > 0 { header.flags |= FS_FRAME_DISCONTINUITY }
        droppedSincePublish = 0
        let s = slotCtl(slot)
        let base = pool!.base + Int(slot) * slotStride
        let now = monotonicNanos()
        let seq = shared.withLock { st -> UInt64 in
            let seq = st.nextSeq
            st.nextSeq += 1
            header.seq = seq
            base.storeBytes(of: header, as: fs_frame.self)
            // SYNC: release store of holders publishes header and pixels (fs_slot_publish).
            fs_slot_publish(s, seq, epoch, now, st.losslessMask)
            control.setLatest(sequence: seq, slot: slot)
            return seq
        }
        // The local wake first, outside the lock and before any ZeroMQ cost.
        control.frameReady()
        latestPublished = (seq, slot)
        control.countPublished(at: now)
        announce(Announcement(kind: .frame, stream: stream, sequence: seq, slot: slot, flags: d.flags, epoch: epoch,
                              captureNanos: header.capture_ns, pts: d.pts, publishNanos: now))
    }

    /// Sends the newest frame's announcement again (consumers treat repeats as doorbells).
    private func reannounceLatest() {
        guard let latest = latestPublished else { return }
        announce(Announcement(kind: .frame, stream: stream, sequence: latest.sequence, slot: latest.slot,
                              epoch: epoch, publishNanos: monotonicNanos()))
    }

    /// Whether anyone subscribes to the doorbell (XPUB passes up the first subscription and
    /// the last unsubscription, so this is a 0/1 count). Guarded by `announceLock`.
    private var subscribers = 0
    /// When the subscriptions were last drained (CLOCK_MONOTONIC ns). Guarded by `announceLock`.
    private var subscriptionsDrainedAt: UInt64 = 0

    /// Sends an announcement, if anyone subscribes: local consumers sleep on `frame_wake`,
    /// so with no monitor, bridge or event-loop consumer this costs no ZeroMQ call at all
    /// beyond draining subscriptions at most once per millisecond.
    private func announce(_ a: Announcement) {
        announceLock.withLock {
            if a.publishNanos &- subscriptionsDrainedAt >= 1_000_000 {
                subscriptionsDrainedAt = a.publishNanos
                subscribers = max(0, subscribers + socket.drainSubscriptions())
            }
            guard subscribers > 0 else { return }
            let n = a.encode(into: announceBuffer)
            socket.send(UnsafeRawBufferPointer(rebasing: announceBuffer[..<n]))
        }
    }

    // MARK: Consumer admission and reclaim (watcher threads)


    /// Thread A: sleeps on `attach_seq`; on every change admits new consumers and
    /// detaches the ones that asked to leave.
    private func watchAttachments() {
        while true {
            // Read the futex word before `running`: close() clears `running` and then bumps
            // the word, so either this sees running == false or the wait returns at once.
            let seen = control.attachSequence
            guard shared.withLock({ $0.running }) else { return }
            scanConsumers()
            // At most a second: a control segment truncated under us is replaced by private
            // zero pages (the SIGBUS guard), and close()'s wake then no longer reaches a
            // wait keyed on the old shared page.
            control.waitForConsumerChange(seen: seen, timeoutNanos: Self.longestWaitNanos)
        }
    }

    private func scanConsumers() {
        var changed = false
        for i in 0..<Int(FS_MAX_CONSUMERS) {
            let pid = control.consumerPID(i)
            guard pid != 0 else { continue }
            // A state that is none of the protocol's is a bad entry: left alone (a dead
            // owner's bits are still reclaimed through its pidfd, if it was admitted).
            guard let state = control.consumerState(i) else { continue }
            let known = shared.withLock { $0.watched[i] != nil }
            switch state {
            case .active where !known:
                let identity = control.consumerIdentity(i)
                let fd: Int32
                switch identity.watch() {
                case .running(let d): fd = d
                case .exited: reclaim(i, identity: identity); changed = true; continue
                case .unknown: continue   // cannot watch it now (no fds?): try again at the next scan
                }
                let lossless = control.consumerMode(i) == .lossless   // anything else is served live
                shared.withLock { st in
                    st.watched[i] = (fd, identity)
                    st.everAdmitted = true
                    if lossless {
                        // SYNC: first_seq is stored before any frame carrying the bit is published.
                        control.admit(i, firstSequence: st.nextSeq)
                        st.losslessMask |= 1 << UInt64(i)
                        control.publishLosslessMask(st.losslessMask)
                    }
                }
                changed = true
            case .closing:
                reclaim(i, identity: control.consumerIdentity(i))
                changed = true
            case .free where processStartTime(pid) == 0,
                 .claimed where processStartTime(pid) == 0:
                // Died between claiming the entry (CAS on pid) and finishing its registration.
                reclaim(i, identity: ProcessIdentity(pid: pid, startTime: 0))
                changed = true
            default:
                break
            }
        }
        if changed {
            control.frameReady()   // an admitted consumer waiting for first_seq looks again
            signalEvent(wakeFD.rawValue)
            wakeWaiters()
        }
    }

    /// Thread B: polls every watched consumer's pidfd; a readable pidfd is a consumer
    /// that exited, whatever the way (SIGKILL included), and its holds are reclaimed at once.
    private func reapExitedConsumers() {
        while true {
            let (running, fds, closing) = shared.withLock { st -> (Bool, [(Int, Int32)], [Int32]) in
                let c = st.toClose
                st.toClose.removeAll()
                return (st.running, st.watched.map { ($0.key, $0.value.fd) }, c)
            }
            for fd in closing { FileDescriptor(adopting: fd).close() }
            guard running else { return }
            let ready = readableDescriptors(among: [wakeFD.rawValue] + fds.map(\.1), timeoutMillis: -1)
            guard !ready.isEmpty else { continue }
            if ready.contains(wakeFD.rawValue) { drainEvent(wakeFD.rawValue) }
            for (index, fd) in fds where ready.contains(fd) {
                let identity = shared.withLock { st -> ProcessIdentity? in
                    st.watched[index]?.fd == fd ? st.watched[index]!.identity : nil
                }
                if let identity { reclaim(index, identity: identity) }
            }
        }
    }

    /// Takes consumer `i` out of the stream: no more reservations, every hold cleared,
    /// entry freed. Runs for dead consumers and for clean detaches alike.
    func reclaim(_ i: Int, identity: ProcessIdentity) {
        let bit: UInt64 = 1 << UInt64(i)
        // A consumer that asked to leave (CLOSING) and then exited did not die.
        let died = control.consumerState(i) != .closing
        shared.withLock { st in
            // Under the lock: no publish can be between reading the mask and storing holders.
            st.losslessMask &= ~bit
            control.publishLosslessMask(st.losslessMask)
            control.clearHolder(bit)
            control.clearSleeper(bit)
            if let w = st.watched.removeValue(forKey: i) { st.toClose.append(w.fd) }
            // Only free the entry if it still belongs to the process we reclaim.
            control.freeConsumer(i, ifOwnedBy: identity.pid)
        }
        if died { control.countReclaimed() }
        signalEvent(wakeFD.rawValue)
        wakeWaiters()
    }
}

/// A reserved slot the producer is filling. Publish it, or let it go out of scope to
/// give the slot back unpublished.
public struct WritableFrame: ~Copyable {
    let producer: Unmanaged<Producer>
    /// Index of the slot in the pool.
    public let slot: UInt32
    let base: UnsafeMutableRawPointer
    /// The frame's size and pixel format.
    public let format: FrameFormat
    /// Timestamps, colour and flags written into the header at publish.
    public var description = FrameDescription()

    init(producer: Unmanaged<Producer>, slot: UInt32, base: UnsafeMutableRawPointer, format: FrameFormat) {
        self.producer = producer; self.slot = slot; self.base = base; self.format = format
    }

    /// Plane `i`'s bytes (stride x rows, rows padded to `format.stride(plane:)`).
    public func plane(_ i: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: base + format.planeOffset(i), count: format.stride(plane: i) * format.rows(plane: i))
    }

    /// Publishes the frame to every consumer.
    public consuming func publish() {
        producer.takeUnretainedValue().publishReserved(slot, format: format, description: description)
        producer.release()
        discard self
    }

    deinit {
        producer.takeUnretainedValue().abandon(slot)
        producer.release()
    }
}

extension Producer {
    /// The sequence number the next published frame will carry (1 for the first).
    public var nextSequence: UInt64 { shared.withLock { $0.nextSeq } }
}
