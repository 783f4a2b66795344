// PROTOCOL.md 4.2, The pool `NAME.pool.<epoch>`: one epoch's pool as a consumer maps it.

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
