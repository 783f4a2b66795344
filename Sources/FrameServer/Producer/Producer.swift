// PROTOCOL.md 12, The producer: its options, its state and its lifecycle. Opening creates the
// stream's files in the order of 3.2 (lock, leftovers, NAME.ctl.tmp.<pid>, the PUB socket, the
// rename that makes the stream exist); `finish` ends the stream (14); `close` removes its files
// (14 step 4, 15.5). The rest of 12 is in the Producer+*.swift files beside this one.

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
    /// Once every lossless consumer it admitted has left and no consumer at all is attached,
    /// `reserve` waits up to this many seconds for a consumer to come (infinity: for ever)
    /// instead of publishing to nobody (`onDeserted` hears it); if none comes, the producer
    /// is `deserted`: `reserve` returns nil from then on, and its caller ends the stream. nil:
    /// publish on to nobody. What `--wait-for` asks for (with `--linger`).
    public var lingerWhenDeserted: Double? = nil
    /// What the stream carries (PROTOCOL.md 4.6): video frames (`reserve(_:)`) or audio
    /// frames (`reserve(audio:)`), never both.
    public var media: MediaKind = .video

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
    let slotLock = ThreadLock()
    /// Serialises the PUB socket (ZeroMQ sockets are not thread-safe).
    let announceLock = ThreadLock()
    /// Slots held by a `SlotLease` (bit i: slot i), set by `lease`, cleared by `SlotLease.end`.
    let leased = Atomic<UInt64>(0)
    /// Earlier epochs whose pool files stay because, when the epoch changed, some of their
    /// slots (the mask) still held frames consumers had (see `startEpoch`).
    var retired: [(epoch: UInt64, slots: UInt64)] = []
    /// The largest slot a lease asked for in vain (its frames were copied): the next epoch
    /// the publishing thread starts is at least this large, so decoding in place resumes.
    var leaseBytesWanted = 0
    var pool: Segment?
    var slotStride = 0
    var epoch: UInt64 = 0
    let socket: ZMQSocket
    let shared = Mutex(ProducerShared())
    var nextSlotHint: UInt32 = 0
    /// Per lossless consumer: the `delivered` count last seen and when it last changed
    /// (the stall timeout's evidence of progress). Touched under `slotLock` only.
    var progress: [Int: (delivered: UInt64, since: UInt64)] = [:]
    /// The newest published frame (this producer's own record of `latest`).
    var latestPublished: (sequence: UInt64, slot: UInt32)?
    let announceBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 128, alignment: 8)
    var templateFormat: FrameFormat?
    var template = fs_frame()
    /// Wakes the reaper thread's poll (an eventfd): closed with the object.
    let wakeFD: FileDescriptor
    private var threads: [pthread_t] = []
    /// Asked whenever a signal interrupts a wait for a slot; returning true makes `reserve`
    /// return nil (for example after SIGINT, so a command can end its stream and exit).
    public var shouldStop: (() -> Bool)?
    private var closed = false
    /// Reserved frames not yet published or dropped.
    var outstanding = 0

    /// Frames a live source dropped since its last publish: the next frame carries the
    /// count (`fs_frame.source_dropped`) and the discontinuity flag. Guarded by `slotLock`.
    var droppedSincePublish: UInt32 = 0

    /// Told, at the first frame a live source drops for want of a free slot and then at
    /// most once a second, how many it dropped since and who held the pool (`poolHolders`):
    /// `dropped 12 frames (no free slot): consumer 'slow' (pid 123) holds 7 of 8 slots`.
    /// Called with the slot lock held (from `reserve`): it must not call back into the producer.
    public var onDropped: ((String) -> Void)?
    /// Told once each time `reserve` starts waiting because every consumer left, and when it
    /// stops waiting for want of one (`lingerWhenDeserted`).
    public var onDeserted: ((String) -> Void)?
    /// Every consumer left and none came back within `lingerWhenDeserted`: end the stream.
    public internal(set) var deserted = false
    var dropsUnreported = 0
    var lastDropReport: UInt64?

    /// Frames published without a copy, from leases.
    public internal(set) var publishedInPlace: UInt64 = 0

    /// Whether this producer ended the stream (its own flag, not re-read from shared memory).
    private var ended = false

    /// The process that opened the stream: in a forked child of it, every call refuses or
    /// does nothing (`ProducerError.forked`), and the parent's stream goes on untouched.
    let opener = ForkCheck.currentPID
    /// This is a forked child's copy of the producer.
    var isForkedCopy: Bool { ForkCheck.isForkedChild(of: opener) }

    /// Throws `.forked` in a forked child.
    func refuseInForkedChild() throws(ProducerError) {
        if isForkedCopy { throw .forked(stream: stream, opener: opener, child: getpid()) }
    }

    /// Whether anyone subscribes to the doorbell (XPUB passes up the first subscription and
    /// the last unsubscription, so this is a 0/1 count). Guarded by `announceLock`.
    var subscribers = 0
    /// When the subscriptions were last drained (CLOCK_MONOTONIC ns). Guarded by `announceLock`.
    var subscriptionsDrainedAt: UInt64 = 0

    /// Creates stream `stream` in the runtime directory, cleaning any leftovers of a dead producer.
    ///
    /// Throws `.streamBusy` when a live producer already owns the name.
    public init(stream: String, options: ProducerOptions = ProducerOptions(),
                directory: RuntimeDirectory? = nil) throws(ProducerError) {
        do { try validateStreamName(stream) } catch { throw .invalidStreamName(stream) }
        guard (1...Int(FS_MAX_SLOTS)).contains(options.slots) else {
            throw .slotCount(options.slots)
        }
        let dir: RuntimeDirectory
        if let directory { dir = directory } else {
            do { dir = try RuntimeDirectory() } catch { throw .directory(error) }
        }
        self.stream = stream
        self.directory = dir
        self.options = options

        self.lock = try Self.takeStreamLock(stream, in: dir)
        // Holding the lock proves every other file of this stream is a dead producer's leftover.
        for f in dir.files(of: stream) where f != dir.lockPath(stream) { try? removeFile(f) }

        let tmp = dir.controlPath(stream) + ".tmp.\(getpid())"
        do {
            control = try ControlSegment.create(tmp, .init(stream: stream, slots: options.slots, liveSource: options.liveSource,
                                                           liveMaxHeld: options.liveMaxHeld, nominalRate: options.nominalRate,
                                                           producerName: options.name, media: options.media))
        } catch { throw .segment(error) }

        do { socket = try ZMQSocket(type: ZMQ_XPUB) } catch { throw .transport(error) }
        socket.setOption(ZMQ_SNDHWM, options.sendHighWaterMark)
        do {
            try socket.bind(dir.endpoint(stream))
        } catch {
            try? removeFile(tmp)
            throw .transport(error)
        }
        try? changeMode(dir.socketPath(stream), 0o600)   // a failure is harmless: the directory is 0700 anyway
        do { wakeFD = try makeEventDescriptor() } catch {
            try? removeFile(tmp)
            throw .system(SystemCallError("create the reaper's eventfd", path: nil, error))
        }
        // Publishing the control segment under its real name is the moment the stream exists.
        do { try renameFile(tmp, to: dir.controlPath(stream)) } catch {
            try? removeFile(tmp)
            throw .system(SystemCallError("publish control segment", path: dir.controlPath(stream), error))
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
    private static func takeStreamLock(_ stream: String, in dir: RuntimeDirectory) throws(ProducerError) -> FileLock {
        let deadline = monotonicNanos() + 1_000_000_000
        while true {
            do { if let lock = try FileLock.tryExclusive(dir.lockPath(stream)) { return lock } } catch { throw .system(error) }
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
        if isForkedCopy {
            // The parent's stream, threads and ZeroMQ socket (its I/O threads are the parent's):
            // nothing is ended, joined or closed; the child's copy of the socket is let go unclosed.
            _ = Unmanaged.passRetained(socket)
            return
        }
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

    /// Throws when the control segment or the current pool was truncated under this
    /// producer (the SIGBUS guard caught it): the stream cannot go on.
    func checkSegmentsIntact() throws(ProducerError) {
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
        guard !isForkedCopy else { return }   // the parent's stream: not this child's to end
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

    /// The sequence number the next published frame will carry (1 for the first).
    public var nextSequence: UInt64 { shared.withLock { $0.nextSeq } }

    /// Lossless consumers demoted to live by the stall timeout.
    public var demotedCount: UInt64 { control.demotedCount }
}
