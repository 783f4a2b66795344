// PROTOCOL.md 4.2, The pool `NAME.pool.<epoch>`, and 13, Epochs: mapping each epoch's pool
// read-only, and keeping an old one while its frames are held.

import CFrameServer
import Glibc
import Synchronization

extension Attachment {
    /// Maps the producer's current pool as soon as it exists, so frames owed to this
    /// consumer stay readable even if the producer exits and removes the file before
    /// they are delivered.
    func mapCurrentPool() {
        let epoch = control.epoch
        guard epoch != 0, mapping(epoch) == nil, let file = try? openPool(epoch: epoch) else { return }
        addMapping(epoch, file)
        for old in pools.keys where old != epoch && pools[old]!.held <= 0 { pools[old] = nil }
    }

    /// Pool `epoch`'s mapping, if mapped.
    func mapping(_ epoch: UInt64) -> PoolMapping? {
        if let r = recentPool, r.epoch == epoch { return r }
        let m = pools[epoch]
        if m != nil { recentPool = m }
        return m
    }

    @discardableResult
    func addMapping(_ epoch: UInt64, _ file: (pool: Segment, slotBytes: Int)) -> PoolMapping {
        let m = PoolMapping(epoch: epoch, file: file.pool, slotBytes: file.slotBytes)
        pools[epoch] = m
        recentPool = m
        return m
    }

    /// Maps pool `epoch` read-only (`Segment.openPool` checks its size), every page faulted
    /// in at once: a frame's first reads then take no page faults.
    func openPool(epoch: UInt64) throws(SegmentError) -> (pool: Segment, slotBytes: Int) {
        try Segment.openPool(directory.poolPath(stream, epoch: epoch), slotCount: control.slotCount, populate: true)
    }
}
