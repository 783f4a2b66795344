// PROTOCOL.md 12.2, Reserve and publish: reserving a slot (`reserve`, `WritableFrame`) and
// leasing one for a decoder (`lease`, `SlotLease`), the slot search, drops at a live source,
// and 12.6, Stall timeout: demoting a stalled lossless consumer while the producer waits
// (12.3, in Producer+Wait.swift). Publishing itself is in Producer+Announce.swift.

import CFrameServer
import Glibc
import Synchronization

extension Producer {
    /// Reserves a free slot for a frame of `format`.
    ///
    /// Waits while every slot is held (backpressure), unless the stream is a live source:
    /// then it returns nil and counts a drop. Also nil when `shouldStop` says so during the
    /// wait. A format larger than the current slots starts a new pool epoch at once (frames
    /// consumers still hold stay in the old pool).
    public func reserve(_ format: FrameFormat) throws(ProducerError) -> WritableFrame? {
        try refuseInForkedChild()
        try format.validate()
        guard options.media == .video else { throw .wrongMedia(stream: stream, .audio) }
        guard let (slot, base) = try reserveSlot(bytes: format.slotBytes, epochBytes: max(format.slotBytes, leaseBytesWanted),
                                                 blocked: .framesOutstanding(outstanding, "\(format)")) else { return nil }
        return WritableFrame(producer: Unmanaged.passRetained(self), slot: slot, base: base, format: format)
    }

    /// Reserves a free slot for an audio frame of `format` (PROTOCOL.md 4.6), as `reserve(_:)`
    /// does for a picture. A new pool's slots hold at least `capacity` samples per channel
    /// (the decoder's usual frame), so frames of varying length share one epoch.
    public func reserve(audio format: AudioFormat, capacity: Int = 0) throws(ProducerError) -> WritableAudioFrame? {
        try format.validate()
        guard options.media == .audio else { throw .wrongMedia(stream: stream, .video) }
        var roomy = format
        roomy.samples = max(format.samples, min(capacity, Int(FS_MAX_SAMPLES)))
        guard let (slot, base) = try reserveSlot(bytes: format.slotBytes, epochBytes: roomy.slotBytes,
                                                 blocked: .framesOutstanding(outstanding, "\(format)")) else { return nil }
        return WritableAudioFrame(producer: Unmanaged.passRetained(self), slot: slot, base: base, format: format)
    }

    /// Takes a free slot of at least `bytes` bytes (a new epoch of `epochBytes` when the
    /// slots are smaller), waiting unless the stream is a live source; nil when a live
    /// source found none (counted as a drop) or `shouldStop` ended the wait.
    private func reserveSlot(bytes: Int, epochBytes: Int,
                             blocked: @autoclosure () -> ProducerError) throws(ProducerError) -> (UInt32, UnsafeMutableRawPointer)? {
        try checkSegmentsIntact()
        guard waitWhileDeserted() else { return nil }
        refreshSubscribers()
        return try slotLock.withLock { () throws(ProducerError) -> (UInt32, UnsafeMutableRawPointer)? in
            if pool == nil || bytes > slotStride {
                guard outstanding == 0 else { throw blocked() }
                try startEpoch(bytes: epochBytes)
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
            outstanding += 1
            return (slot, pool!.base + Int(slot) * slotStride)
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
    public func lease(bytes: Int, wait: Bool) throws(ProducerError) -> SlotLease? {
        try refuseInForkedChild()
        refreshSubscribers()
        while true {
            let attempt = try slotLock.withLock { () throws(ProducerError) -> LeaseAttempt in
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
        return publish(lease) { commit(lease.slot, format: format, layout: layout, description: description) }
    }

    /// Publishes the audio frame a decoder wrote into `lease`'s slot, its rows where
    /// `rows` says, without a copy (PROTOCOL.md 4.6), as `publish(_:format:layout:description:)`
    /// does for a picture.
    public func publish(_ lease: SlotLease, audio format: AudioFormat, rows: AudioRows,
                        description: FrameDescription) -> Bool {
        guard options.media == .audio, AudioFormat.problem(rate: format.sampleRate, samples: format.samples, layout: format.layout) == nil,
              rows.fit(format, in: lease.capacity) else { return false }
        return publish(lease) { commitAudio(lease.slot, format: format, rows: rows, description: description) }
    }

    /// The lease's slot published by `commit` (under `slotLock`), once, in its own epoch.
    /// A stream every consumer left waits for one first (`waitWhileDeserted`), as `reserve` does.
    private func publish(_ lease: SlotLease, commit: () -> Void) -> Bool {
        guard !isForkedCopy, waitWhileDeserted() else { return false }
        return slotLock.withLock {
            lease.state.withLock { state in
                guard state == .writing, lease.epoch == epoch else { return false }
                fs_slot_hold_set(slotCtl(lease.slot))
                commit()
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

    func slotCtl(_ i: UInt32) -> UnsafeMutablePointer<fs_slot_ctl> { control.slot(i) }

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

    func abandon(_ slot: UInt32) {
        guard !isForkedCopy else { return }   // reserved by the parent: its slot, not the child's
        slotLock.withLock { outstanding -= 1 }
        fs_slot_abandon(slotCtl(slot))
        control.bumpWake()
    }
}
