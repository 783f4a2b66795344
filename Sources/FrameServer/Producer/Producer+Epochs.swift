// PROTOCOL.md 13, Epochs: a new pool when a frame no longer fits the slots, and the
// retired pools that stay while consumers still hold their frames.

import CFrameServer
import Glibc
import Synchronization

extension Producer {
    /// Starts pool epoch N+1 with slots of at least `bytes` bytes, without waiting for anyone.
    ///
    /// Every slot nobody holds is reserved, its `seq` cleared and freed again in the new pool
    /// (a published slot only the decoder still references keeps its `producer_hold`). A slot
    /// a consumer still holds (or a decoder is still writing) keeps its frame in the old pool:
    /// that pool's file stays until every such slot has been released and taken again for the
    /// new epoch (`retired`), so consumers can still map it by the frame's epoch. Waiting for
    /// those slots instead could wait forever: a filter whose graph keeps the last frames
    /// until the next one arrives holds them across the change.
    func startEpoch(bytes: Int) throws(ProducerError) {
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
            throw .segment(error)
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
    func retire(slot: UInt32) {
        guard !retired.isEmpty else { return }
        let bit: UInt64 = 1 << UInt64(slot)
        for k in retired.indices { retired[k].slots &= ~bit }
        for r in retired where r.slots == 0 { try? removeFile(directory.poolPath(stream, epoch: r.epoch)) }
        retired.removeAll { $0.slots == 0 }
    }
}
