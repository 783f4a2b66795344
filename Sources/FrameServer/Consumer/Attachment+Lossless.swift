// PROTOCOL.md 9.2, Receiving (lossless): the frame reserved for this consumer, frames lost to a
// damaged slot, and the switch to live when 12.6's stall timeout demoted it.

import CFrameServer
import Glibc
import Synchronization

extension Attachment {
    /// Lossless: the frame with sequence `expected`, reserved for us by the producer.
    func nextLossless() throws(ConsumerError) -> Look {
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
    /// The newest frame's slot (`latest`) is asked first: a consumer that keeps up wants that
    /// one, and the scan's other slots would each be a cache line the producer wrote last.
    private func slotReserved(_ seq: UInt64) -> UInt32? {
        let latest = control.latestWord, newest = UInt32(truncatingIfNeeded: latest & 0xff)
        if latest >> 8 == seq, newest < control.slotCount, fs_slot_held_by(control.slot(newest), bit, seq) != 0 { return newest }
        return (0..<control.slotCount).first { fs_slot_held_by(control.slot($0), bit, seq) != 0 }
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
}
