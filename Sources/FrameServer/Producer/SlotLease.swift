import CFrameServer
import Synchronization

/// Where a frame's planes lie in its slot when it is not the canonical layout of its
/// `FrameFormat` (PROTOCOL.md 4.2): a decoder that writes into the slot directly needs
/// its own row alignment and padding rows. The header then carries this layout.
public struct PlaneLayout: Sendable, Equatable {
    /// Byte offset of each plane from the slot's start (>= the 256-byte header).
    public var offsets: [Int]
    /// Bytes per row of each plane.
    public var strides: [Int]

    public init(offsets: [Int], strides: [Int]) {
        self.offsets = offsets; self.strides = strides
    }

    /// Checks that `format`'s planes, laid out this way, fit in `bytes` bytes of slot.
    public func fits(_ format: FrameFormat, in bytes: Int) -> Bool {
        let planes = format.pixelFormat.planes.count
        guard offsets.count >= planes, strides.count >= planes else { return false }
        for i in 0..<planes {
            guard offsets[i] >= FrameFormat.headerSize, strides[i] >= format.rowBytes(plane: i),
                  offsets[i] + strides[i] * format.rows(plane: i) <= bytes else { return false }
        }
        return true
    }
}

/// A slot the producer's own code fills in place and may keep referencing after it is
/// published: a decoder decodes into it (its `get_buffer2`), the frame is published
/// without a copy, and the decoder keeps it as a reference picture until it drops its
/// last reference, which calls `end()`. While it is referenced the slot carries
/// `producer_hold` and is not reused, whatever consumers do.
///
/// Thread-safe: `end()` may run on any thread (FFmpeg frees buffers on its own threads).
/// The lease keeps its pool mapped, so the memory stays valid even after a later epoch
/// replaced the pool.
public final class SlotLease: @unchecked Sendable {
    // @unchecked Sendable: `state` is behind a mutex; everything else is immutable.
    enum State { case writing, published, ended }

    /// Index of the slot in the pool.
    public let slot: UInt32
    /// The pool epoch the slot belongs to.
    public let epoch: UInt64
    /// The slot's first byte (its 256-byte header); planes go at offsets >= 256.
    public let base: UnsafeMutableRawPointer
    /// Bytes of the slot, header included.
    public let capacity: Int
    let producer: Producer
    let pool: Segment
    let state = Mutex(State.writing)

    init(producer: Producer, pool: Segment, slot: UInt32, epoch: UInt64, base: UnsafeMutableRawPointer, capacity: Int) {
        self.producer = producer; self.pool = pool; self.slot = slot; self.epoch = epoch
        self.base = base; self.capacity = capacity
    }

    /// Drops the producer's reference: an unpublished slot is given back, a published one
    /// becomes reusable once consumers released it too. Idempotent.
    public func end() {
        let prior = state.withLock { s -> State in
            let p = s
            s = .ended
            return p
        }
        let s = producer.control.slot(slot)
        switch prior {
        case .writing:
            fs_slot_abandon(s)
            fs_slot_hold_clear(s)
        case .published: fs_slot_hold_clear(s)
        case .ended: return
        }
        producer.leaseEnded(slot)
    }

    deinit { end() }
}
