// PROTOCOL.md 12.2 and 4.6: the caller's handle on a slot reserved for an audio frame.

import CFrameServer

/// A reserved slot the producer is filling with an audio frame. Publish it, or let it go
/// out of scope to give the slot back unpublished.
public struct WritableAudioFrame: ~Copyable {
    let producer: Unmanaged<Producer>
    /// Index of the slot in the pool.
    public let slot: UInt32
    let base: UnsafeMutableRawPointer
    /// The frame's sample format, rate, layout and sample count.
    public let format: AudioFormat
    /// Timestamps and flags written into the header at publish (colour, aspect ratio and
    /// field order do not apply to sound and are written as 0).
    public var description = FrameDescription()

    init(producer: Unmanaged<Producer>, slot: UInt32, base: UnsafeMutableRawPointer, format: AudioFormat) {
        self.producer = producer; self.slot = slot; self.base = base; self.format = format
    }

    /// Row `i`'s sample bytes (`format.rowBytes`): channel `i` of a planar format; the
    /// interleaved samples of every channel, row 0, of a packed one.
    public func row(_ i: Int) -> UnsafeMutableRawBufferPointer {
        precondition(i >= 0 && i < format.rows, "row \(i) of an audio frame with \(format.rows) rows")
        return UnsafeMutableRawBufferPointer(start: base + FrameFormat.headerSize + i * format.stride, count: format.rowBytes ?? 0)
    }

    /// Publishes the frame to every consumer.
    public consuming func publish() {
        producer.takeUnretainedValue().publishReservedAudio(slot, format: format, description: description)
        producer.release()
        discard self
    }

    deinit {
        producer.takeUnretainedValue().abandon(slot)
        producer.release()
    }
}
