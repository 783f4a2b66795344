// PROTOCOL.md 9.2, Receiving and 9.3, Release: a held frame, read in place and released exactly
// once (`Frame`, or a reference-counted `SharedFrame` released from any thread).

import CFrameServer

/// A frame held by this consumer: read it in place, then let it go.
///
/// Noncopyable, so it is released exactly once: explicitly with `release()`, or when it
/// goes out of scope. The pixels are mapped read-only; a write through a cast pointer
/// faults instead of corrupting what other consumers read.
public struct Frame: ~Copyable {
    let owner: Unmanaged<Attachment>
    /// Slot index in the pool.
    public let slot: UInt32
    /// The frame's sequence number (1, 2, 3, ... per producer run).
    public let sequence: UInt64
    let epoch: UInt64
    /// The slot's first byte (its `fs_frame` header); planes lie at the header's offsets.
    public let base: UnsafeRawPointer
    /// Publish-to-acquire latency, measured through the capture clock in the header.
    public let latencyNanos: UInt64
    /// The frame header (format, plane layout, timestamps, colour, flags): the copy taken
    /// and validated at delivery, so a later write to the slot's header cannot move a plane.
    public let header: FrameHeader

    init(owner: Unmanaged<Attachment>, slot: UInt32, sequence: UInt64, epoch: UInt64, base: UnsafeRawPointer,
         header: FrameHeader, latencyNanos: UInt64) {
        self.owner = owner; self.slot = slot; self.sequence = sequence; self.epoch = epoch; self.base = base
        self.header = header; self.latencyNanos = latencyNanos
    }

    /// Plane `i`'s bytes, in place in shared memory (stride x rows, as the validated header lays them out).
    public func plane(_ i: Int) -> UnsafeRawBufferPointer { header.planeBytes(i, base: base) }

    /// Turns this frame into a reference-counted `SharedFrame` whose slot is released
    /// exactly once, when the last reference to it goes, from any thread (for example from
    /// the free callback of an FFmpeg buffer that wraps the slot). It still counts as held
    /// (`Consumer.heldFrames`, the live hold limit) until then.
    public consuming func share() -> SharedFrame {
        let attachment = owner.takeRetainedValue()
        let shared = SharedFrame(owner: attachment, slot: slot, sequence: sequence, epoch: epoch, base: base,
                                 header: header, slotBytes: attachment.slotBytes(epoch: epoch), latencyNanos: latencyNanos)
        discard self
        return shared
    }

    /// Gives the slot back now.
    public consuming func release() {
        let (owner, slot, epoch) = (owner, slot, epoch)
        discard self
        Self.release(owner, slot: slot, epoch: epoch)
    }

    deinit { Self.release(owner, slot: slot, epoch: epoch) }

    /// Gives `slot` back to `owner` and lets go of it; in a forked child, neither: the hold is
    /// the parent's, and the child's copy of the attachment is never freed (its watcher thread
    /// and entry are the parent's).
    private static func release(_ owner: Unmanaged<Attachment>, slot: UInt32, epoch: UInt64) {
        let attachment = owner.takeUnretainedValue()
        guard !attachment.isForkedCopy else { return }
        attachment.release(slot: slot, epoch: epoch)
        owner.release()
    }
}

/// A held frame shared by reference (`Frame.share()`): read-only pixels in place, released
/// exactly once when the last reference goes, whatever thread drops it. The slot returns
/// to the producer at that moment; the consumer's counters catch up at its next `next()`
/// (or `heldFrames`), on its own thread.
public final class SharedFrame: @unchecked Sendable {
    // @unchecked Sendable: immutable after init; the release in deinit touches only
    // shared-memory atomics and a mutex-protected list (Attachment.releaseShared).
    private let owner: Attachment
    /// Slot index in the pool.
    public let slot: UInt32
    /// The frame's sequence number.
    public let sequence: UInt64
    let epoch: UInt64
    /// The slot's first byte (its `fs_frame` header); planes are at the header's offsets.
    public let base: UnsafeRawPointer
    /// Bytes of the slot in its pool's mapping, header included: every byte from `base` to
    /// `base + slotBytes` is mapped (readable) while the frame is held.
    public let slotBytes: Int
    /// Publish-to-acquire latency.
    public let latencyNanos: UInt64
    /// The frame header, as validated at delivery (see `Frame.header`).
    public let header: FrameHeader

    init(owner: Attachment, slot: UInt32, sequence: UInt64, epoch: UInt64, base: UnsafeRawPointer,
         header: FrameHeader, slotBytes: Int, latencyNanos: UInt64) {
        self.owner = owner; self.slot = slot; self.sequence = sequence; self.epoch = epoch
        self.base = base; self.header = header; self.slotBytes = slotBytes; self.latencyNanos = latencyNanos
    }

    /// Plane `i`'s bytes, in place in shared memory (stride x rows, as the header lays them out).
    public func plane(_ i: Int) -> UnsafeRawBufferPointer { header.planeBytes(i, base: base) }

    deinit {
        // In a forked child the hold is the parent's, and the attachment is never freed there.
        if owner.isForkedCopy { _ = Unmanaged.passRetained(owner) }
        owner.releaseShared(slot: slot, epoch: epoch)
    }
}

extension Frame {
    /// Row `i` of an audio frame (PROTOCOL.md 4.6), its sample bytes only: channel `i` of a
    /// planar format, every channel interleaved in row 0 of a packed one. Empty for a video
    /// frame or a row past the last.
    public func audioRow(_ i: Int) -> UnsafeRawBufferPointer {
        guard let format = header.audioFormat, i >= 0, i < format.rows, let bytes = format.rowBytes else {
            return UnsafeRawBufferPointer(start: base, count: 0)
        }
        return UnsafeRawBufferPointer(rebasing: plane(0)[(i * header.stride(plane: 0))...].prefix(bytes))
    }
}
