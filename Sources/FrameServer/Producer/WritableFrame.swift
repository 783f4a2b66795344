// PROTOCOL.md 12.2, Reserve and publish: the caller's handle on a reserved slot (publish,
// or abandon by letting it go).

import CFrameServer

/// A reserved slot the producer is filling. Publish it, or let it go out of scope to
/// give the slot back unpublished.
public struct WritableFrame: ~Copyable {
    let producer: Unmanaged<Producer>
    /// Index of the slot in the pool.
    public let slot: UInt32
    let base: UnsafeMutableRawPointer
    /// The frame's size and pixel format.
    public let format: FrameFormat
    /// Timestamps, colour and flags written into the header at publish.
    public var description = FrameDescription()

    init(producer: Unmanaged<Producer>, slot: UInt32, base: UnsafeMutableRawPointer, format: FrameFormat) {
        self.producer = producer; self.slot = slot; self.base = base; self.format = format
    }

    /// Plane `i`'s bytes (stride x rows, rows padded to `format.stride(plane:)`).
    public func plane(_ i: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(start: base + format.planeOffset(i), count: format.stride(plane: i) * format.rows(plane: i))
    }

    /// Publishes the frame to every consumer.
    public consuming func publish() {
        producer.takeUnretainedValue().publishReserved(slot, format: format, description: description)
        producer.release()
        discard self
    }

    deinit {
        producer.takeUnretainedValue().abandon(slot)
        producer.release()
    }
}
