// PROTOCOL.md 8.1, Attach (consumer) and 8.2, Detach (consumer): one attachment's state, the
// claim of a consumer entry, the detach, and 11.5's ZeroMQ doorbell for event loops.

import CFrameServer
import CZMQ
import Glibc
import Synchronization

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
    var mode: DeliveryMode
    let control: ControlSegment
    /// The stream had ended when this attachment opened it (a consumer that came too late).
    let endedBeforeAttach: Bool
    let index: Int
    let bit: UInt64
    let producerPID: Int32
    /// The producer's pidfd: readable once it exits.
    let producerFD: FileDescriptor
    /// Wakes this consumer's sleep when the producer exits (stopped before producerFD closes).
    private var exitWatch: ProducerExitWatch?
    /// The doorbell (ZeroMQ SUB), connected only when an event loop asks for a descriptor
    /// (`doorbellDescriptor`): local consumers sleep on `frame_wake` instead.
    private var socket: ZMQSocket?
    private let receiveHighWaterMark: Int32
    /// Microseconds to spin on `frame_wake` before sleeping (`ConsumerOptions.pollMicros`).
    let pollMicros: Int
    /// The pace of the stream, for the busy-poll window: the newest frame's capture time
    /// and the smoothed interval between captures (0 until two frames arrived).
    var lastCaptureNanos: UInt64 = 0
    var captureIntervalNanos: UInt64 = 0
    let directory: RuntimeDirectory
    /// The pools mapped, by epoch, and how many of each one's frames are held.
    var pools: [UInt64: PoolMapping] = [:]
    /// The pool used last: the per-frame lookups skip the dictionary (one epoch at a time).
    var recentPool: PoolMapping?
    var producerExited = false
    var detached = false
    var expected: UInt64 = 0
    var lastDelivered: UInt64 = 0
    /// A demoted consumer that had delivered nothing counts misses from its first owed frame.
    var countMissesFromStart = false
    /// Frames held when the stall timeout demoted this consumer to live (see `nextLive`).
    var heldAtDemotion = 0
    var missedTotal: UInt64 = 0
    /// Frames refused because their header failed validation.
    var badFrames: UInt64 = 0
    var heldCount = 0
    let liveMaxHeld: Int
    /// Bookkeeping of `SharedFrame` releases (which may come from any thread) that the
    /// consumer's thread has not done yet: see `releaseShared` and `settleReleases`.
    let pendingReleases = Mutex<[(slot: UInt32, epoch: UInt64)]>([])
    private let receiveBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 8)
    /// The process that attached: a forked child's copy releases and detaches nothing (the
    /// holder bits and the entry are the parent's).
    let opener = ForkCheck.currentPID
    var isForkedCopy: Bool { ForkCheck.isForkedChild(of: opener) }

    /// Opens and validates the control segment and claims a consumer entry; nil when
    /// there is no stream yet or only a dead producer's leftovers.
    static func open(stream: String, directory: RuntimeDirectory, options: ConsumerOptions) throws(ConsumerError) -> Attachment? {
        let opened: ControlSegment?
        // Another version's segment: its producer, if alive, will not change version (one
        // line, no retry); a dead one's file is a leftover to wait past (design 4).
        do { opened = try ControlSegment.open(directory.controlPath(stream), writable: true, passingLeftovers: true) } catch {
            if case .system(_, _, let e) = error, e == .noSuchFileOrDirectory { return nil }
            throw .segment(error)
        }
        guard let control = opened else { return nil }
        // Before the claim: a consumer of the wrong memory kind takes no entry (PROTOCOL.md 4.5).
        guard control.memory == .host else { throw .deviceMemory(stream: stream, control.memory) }
        // So is a consumer of the other media kind (4.6).
        if let wanted = options.media, control.media != wanted { throw .wrongMedia(stream: stream, found: control.media) }
        // Read before the claim: a stream that ends while we claim and activate was still
        // running when we came, and its end is a normal end for us, not a late start's.
        let endedBeforeAttach = control.ended
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
            throw .poolTooSmallForLive(stream: stream, slots: Int(control.slotCount), liveConsumers: live,
                                       holdLimit: control.liveMaxHeld)
        }
        control.activateConsumer(index, identity: me, mode: options.mode == .live ? .live : .lossless, name: options.name)
        return Attachment(stream: stream, options: options, control: control, index: index, producerPID: producer.pid,
                          producerFD: producerFD, directory: directory, endedBeforeAttach: endedBeforeAttach)
    }

    private init(stream: String, options: ConsumerOptions, control: ControlSegment, index: Int, producerPID: Int32,
                 producerFD: consuming FileDescriptor, directory: RuntimeDirectory, endedBeforeAttach: Bool) {
        self.stream = stream; self.mode = options.mode; self.control = control
        self.endedBeforeAttach = endedBeforeAttach
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
        guard !detached, !isForkedCopy else { return }
        settleReleases()
        detached = true
        // Frames still out keep their slots until released: detach when the last one goes.
        guard heldCount == 0 else { return }
        sendDetach()
    }

    func sendDetach() {
        guard !producerExited, !control.segment.truncated else { return }
        control.requestDetach(index)
    }

    /// Connects the doorbell (once) and returns its ZMQ_FD: readable (edge-triggered, as
    /// libzmq's) when announcements may be waiting. For event loops; `nextFrame` drains it.
    func doorbellDescriptor() throws(ConsumerError) -> Int32 {
        if let socket { return socket.descriptor }
        let s: ZMQSocket
        do { s = try ZMQSocket(type: ZMQ_SUB) } catch { throw .transport(error) }
        s.setOption(ZMQ_RCVHWM, receiveHighWaterMark)
        s.subscribeAll()
        do { try s.connect(directory.endpoint(stream)) } catch { throw .transport(error) }
        socket = s
        return s.descriptor
    }

    /// Reads every pending announcement; they only say "look again".
    func drainDoorbell() {
        guard let socket else { return }
        while socket.receive(into: receiveBuffer) != nil {}
    }
}
