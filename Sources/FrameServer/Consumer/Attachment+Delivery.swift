// PROTOCOL.md 9.2, Receiving (what both modes share: map the epoch, validate the header, count
// the hold) and 9.3, Release (from the consumer's thread or, for a `SharedFrame`, any thread).

import CFrameServer
import Glibc
import Synchronization

extension Attachment {
    /// Hands out a held slot as a Frame, mapping its pool epoch (read-only) if needed.
    /// A header that fails validation, or a segment truncated under us, releases the slot
    /// before the error is thrown.
    func deliver(slot: UInt32, seq: UInt64) throws(ConsumerError) -> Frame {
        let epoch = control.slot(slot).pointee.epoch
        let mapped: PoolMapping
        if let m = mapping(epoch) { mapped = m } else {
            do { mapped = addMapping(epoch, try openPool(epoch: epoch)) } catch {
                release(slot: slot, epoch: epoch, mapped: false)
                throw .segment(error)
            }
        }
        // Each epoch's pool has its own slot size: derive it from the mapping, not the header.
        let (pool, slotBytes) = (mapped.file, mapped.slotBytes)
        let base = UnsafeRawPointer(pool.base + Int(slot) * slotBytes)
        // One copy of the header: what is validated is what the frame reports and reads through.
        let header = pool.frameHeader(slot: slot, slotBytes: slotBytes)
        // Nothing counted as held yet, so a refused header releases with mapped: false.
        if pool.truncated || control.segment.truncated {
            release(slot: slot, epoch: epoch, mapped: false)
            throw .segment(.truncated(path: pool.truncated ? pool.path : control.path))
        }
        do { try FrameHeader.validate(header, sequence: seq, slotBytes: slotBytes, media: control.media) } catch {
            release(slot: slot, epoch: epoch, mapped: false)
            badFrames += 1
            throw .badFrame(path: pool.path, slot: slot, error)
        }
        mapped.held += 1
        heldCount += 1
        let now = monotonicNanos()
        let capture = header.capture_ns
        let latency = now > capture ? now - capture : 0
        notePace(capture: capture)
        control.recordDelivery(index, sequence: seq, held: heldCount, now: now, latencyNanos: latency,
                               sourceDropped: header.source_dropped)
        lastDelivered = seq
        return Frame(owner: Unmanaged.passRetained(self), slot: slot, sequence: seq, epoch: epoch, base: base,
                     header: FrameHeader(header), latencyNanos: latency)
    }

    /// Why a frame header cannot be trusted, or nil if it is sound: `FrameHeader.validate`'s
    /// verdict as text (kept for callers that only want the reason).
    static func headerProblem(_ h: fs_frame, seq: UInt64, slotBytes: Int, media: MediaKind = .video) -> String? {
        do { try FrameHeader.validate(h, sequence: seq, slotBytes: slotBytes, media: media) } catch { return error.description }
        return nil
    }

    /// Gives a slot back to the producer. SYNC: fs_slot_release (release ordering).
    func release(slot: UInt32, epoch: UInt64, mapped: Bool = true) {
        guard !isForkedCopy else { return }   // the parent's hold, released by the parent
        control.release(slot: slot, bit: bit)
        guard mapped else { return }
        releaseBookkeeping(epoch: epoch)
    }

    /// Frames of this attachment held now (after `settleReleases`).
    var held: Int { heldCount }

    /// Bytes of one slot of epoch `epoch`'s pool (mapped while a frame of it is held).
    func slotBytes(epoch: UInt64) -> Int {
        mapping(epoch)?.slotBytes ?? 0
    }

    /// A `SharedFrame`'s release, from whatever thread drops the last reference: the slot
    /// goes back to the producer at once (atomics in shared memory only); the consumer's
    /// own counters follow on its thread, at its next `settleReleases`.
    func releaseShared(slot: UInt32, epoch: UInt64) {
        guard !isForkedCopy else { return }   // the parent's hold, released by the parent
        control.release(slot: slot, bit: bit)
        pendingReleases.withLock { $0.append((slot, epoch)) }
    }

    /// Does the bookkeeping of the `SharedFrame` releases since the last call (consumer's thread).
    func settleReleases() {
        let pending = pendingReleases.withLock { p -> [(slot: UInt32, epoch: UInt64)] in
            guard !p.isEmpty else { return [] }
            defer { p.removeAll(keepingCapacity: true) }
            return p
        }
        for r in pending { releaseBookkeeping(epoch: r.epoch) }
    }

    /// What a release changes besides the slot: held counts, the entry's statistics, the
    /// deferred detach, the old pool's mapping.
    private func releaseBookkeeping(epoch: UInt64) {
        heldCount -= 1
        control.recordRelease(index, held: heldCount)
        // Last: after CLOSING the entry may be freed and claimed by another consumer.
        if detached, heldCount == 0 { sendDetach() }
        if let p = mapping(epoch) {
            p.held -= 1
            if p.held <= 0, epoch != control.epoch {
                pools[epoch] = nil
                if recentPool === p { recentPool = nil }
            }
        }
    }
}
