// PROTOCOL.md 10, Live delivery: the newest frame, and what was skipped to get it.

import CFrameServer
import Glibc
import Synchronization

extension Attachment {
    /// Live: the newest published frame, if newer than the last one delivered.
    func nextLive() throws(ConsumerError) -> Look {
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
}
