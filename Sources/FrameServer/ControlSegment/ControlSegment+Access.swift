import CFrameServer

/// The statistics of a stream, as `fs_control` counts them (relaxed reads: informative).
struct StreamStatistics {
    var published: UInt64, dropped: UInt64, minFree: UInt64, reclaimed: UInt64, blockedNanos: UInt64, demoted: UInt64
}

// Named accesses to the fields of the control segment, each with its ordering. Statistics
// are relaxed (`fs_count`, `fs_stat_set`, `fs_peek_u64`): they order nothing.
extension ControlSegment {
    // MARK: Stream statistics (the producer writes them)

    func countDropped() { fs_count(&header.pointee.dropped, 1) }
    func addBlocked(nanos: UInt64) { fs_count(&header.pointee.blocked_ns, nanos) }
    func countReclaimed() { fs_count(&header.pointee.reclaimed, 1) }
    /// One more frame published at `now` (CLOCK_MONOTONIC).
    func countPublished(at now: UInt64) {
        fs_count(&header.pointee.published, 1)
        fs_stat_set(&header.pointee.last_publish_ns, now)
    }
    /// Records `free` free slots at a reservation if it is the fewest yet (single writer).
    func noteFreeSlots(_ free: UInt64) {
        if free < fs_peek_u64(&header.pointee.min_free) { fs_stat_set(&header.pointee.min_free, free) }
    }
    var statistics: StreamStatistics {
        StreamStatistics(published: fs_peek_u64(&header.pointee.published), dropped: fs_peek_u64(&header.pointee.dropped),
                         minFree: fs_peek_u64(&header.pointee.min_free), reclaimed: fs_peek_u64(&header.pointee.reclaimed),
                         blockedNanos: fs_peek_u64(&header.pointee.blocked_ns), demoted: fs_peek_u64(&header.pointee.demoted))
    }

    // MARK: Admission (the producer)

    /// SYNC: release; informative for monitors (the producer's own mask is authoritative).
    func publishLosslessMask(_ mask: UInt64) { fs_store_u64(&header.pointee.lossless_mask, mask) }
    /// Admits lossless entry `i` from frame `sequence` on.
    /// SYNC: release store of first_seq, before any frame carrying the bit is published;
    /// pairs with the consumer's acquire load in `firstSequence`.
    func admit(_ i: Int, firstSequence sequence: UInt64) { fs_store_u64(&consumer(i).pointee.first_seq, sequence) }
    /// The attach/detach futex word (acquire), read before checking for changes.
    var attachSequence: UInt32 { fs_load_u32(&header.pointee.attach_seq) }
    /// Sleeps until `attach_seq` differs from `seen` (or `timeoutNanos`, or a signal).
    func waitForConsumerChange(seen: UInt32, timeoutNanos: Int64) {
        _ = futexWait(&header.pointee.attach_seq, expected: seen, timeoutNanos: timeoutNanos)
    }

    // MARK: The producer's wait for a slot (section 12.3)

    /// SYNC: fs_producer_wait_begin (seq_cst): any release after it changes `wake`.
    func beginWaitForRelease() -> UInt32 { fs_producer_wait_begin(header) }
    func endWaitForRelease() { fs_producer_wait_end(header) }
    /// Sleeps until `wake` differs from `seen` (or `timeoutNanos`, or a signal).
    func waitForRelease(seen: UInt32, timeoutNanos: Int64) { _ = futexWait(&header.pointee.wake, expected: seen, timeoutNanos: timeoutNanos) }
    /// Bumps `wake` without a futex wake (the producer's own abandon: nobody else sleeps on it).
    func bumpWake() { fs_bump(&header.pointee.wake) }

    // MARK: A consumer's wait for a frame (one-hop wake, design 1.3)

    /// After a publish, admission, demotion, epoch change, end or close: bumps `frame_wake`
    /// and wakes every consumer sleeping on it, with no syscall when none sleeps.
    /// SYNC: fs_frame_ready (seq_cst RMW), after the stores it announces; pairs with
    /// fs_consumer_wait_begin.
    func frameReady() {
        if fs_frame_ready(header) != 0 { futexWake(&header.pointee.frame_wake) }
    }
    /// The `frame_wake` word (acquire), for a busy-poll: a change means "look again".
    var frameWakeWord: UInt32 { fs_frame_wake_peek(header) }
    /// SYNC: fs_consumer_wait_begin (seq_cst): sets `bit` in `sleepers`, returns the word
    /// to wait on. The caller looks once more before it sleeps.
    func beginWaitForFrame(_ bit: UInt64) -> UInt32 { fs_consumer_wait_begin(header, bit) }
    func endWaitForFrame(_ bit: UInt64) { fs_consumer_wait_end(header, bit) }
    /// Sleeps until `frame_wake` differs from `seen` (or `timeoutNanos`, or a signal).
    func waitForFrame(seen: UInt32, timeoutNanos: Int64) -> FutexWait {
        futexWait(&header.pointee.frame_wake, expected: seen, timeoutNanos: timeoutNanos)
    }
    /// Bumps `frame_wake` and wakes every sleeper, whoever sleeps (a consumer's watch of
    /// its producer's exit, which the producer cannot announce).
    func wakeFrameWaiters() {
        fs_bump(&header.pointee.frame_wake)
        futexWake(&header.pointee.frame_wake)
    }
    /// Clears a reclaimed consumer's `sleepers` bit (it may have died inside its wait).
    func clearSleeper(_ bit: UInt64) { fs_consumer_wait_end(header, bit) }

    /// The sequence number of the frame in slot `i` if it is published and reserved for
    /// (or held by) holder `bit`, whatever frame it is; nil otherwise.
    /// SYNC: the acquire load of holders pairs with fs_slot_publish's release store, as in
    /// fs_slot_held_by.
    func reservedSequence(_ i: UInt32, bit: UInt64) -> UInt64? {
        let s = slot(i)
        let h = fs_load_u64(&s.pointee.holders)
        guard h & bit != 0, h & FS_HOLDER_WRITER == 0 else { return nil }
        return fs_peek_u64(&s.pointee.seq)
    }

    // MARK: A consumer's own entry (the consumer writes it; stats are relaxed)

    /// Lossless: the first sequence reserved for entry `i`, 0 before admission.
    /// SYNC: acquire, pairs with `admit`.
    func firstSequence(_ i: Int) -> UInt64 { fs_load_u64(&consumer(i).pointee.first_seq) }
    func countMissed(_ i: Int, _ n: UInt64) { fs_count(&consumer(i).pointee.missed, n) }
    func countStale(_ i: Int) { fs_count(&consumer(i).pointee.stale, 1) }

    /// Entry `i` was handed frame `sequence` and now holds `held` frames; the source dropped
    /// `sourceDropped` frames just before it.
    func recordDelivery(_ i: Int, sequence: UInt64, held: Int, now: UInt64, latencyNanos ns: UInt64,
                        sourceDropped: UInt32) {
        let e = consumer(i)
        let us = ns / 1000
        let bucket = Int(fs_latency_bucket(us))
        withUnsafeMutablePointer(to: &e.pointee.latency_hist) { p in
            p.withMemoryRebound(to: UInt64.self, capacity: Int(FS_LATENCY_BUCKETS)) { fs_count($0 + bucket, 1) }
        }
        fs_count(&e.pointee.latency_sum_ns, ns)
        fs_count(&e.pointee.delivered, 1)
        if sourceDropped > 0 { fs_count(&e.pointee.source_dropped, UInt64(sourceDropped)) }
        fs_stat_set(&e.pointee.last_seq, sequence)
        fs_stat_set(&e.pointee.held, UInt64(held))
        if held == 1 { fs_stat_set(&e.pointee.hold_since_ns, now) }
    }

    /// Entry `i` released a frame and now holds `held`.
    func recordRelease(_ i: Int, held: Int) {
        let e = consumer(i)
        fs_stat_set(&e.pointee.held, UInt64(held))
        fs_stat_set(&e.pointee.hold_since_ns, held == 0 ? 0 : monotonicNanos())
    }

    /// Entry `i`'s `delivered` and `last_seq` (the consumer's own numbers: compare only).
    func progress(_ i: Int) -> (delivered: UInt64, lastSequence: UInt64) {
        (fs_peek_u64(&consumer(i).pointee.delivered), fs_peek_u64(&consumer(i).pointee.last_seq))
    }

    // MARK: Slots as monitors see them

    /// Slot `i`'s holder word (acquire).
    func holders(_ i: UInt32) -> UInt64 { fs_load_u64(&slot(i).pointee.holders) }
    /// Whether the producer's decoder still references slot `i` (acquire).
    func producerHolds(_ i: UInt32) -> Bool { fs_load_u64(&slot(i).pointee.producer_hold) != 0 }
}
