// PROTOCOL.md 12.2, Reserve and publish (the commit: header, reservations, `latest`,
// the wake) and 12.7, Announcing: XPUB and skipped sends (the messages of 5).

import CFrameServer
import Glibc
import Synchronization

extension Producer {
    /// Precomputes the header fields that depend only on the format, so publishing
    /// allocates nothing.
    private func prepareTemplate(_ format: FrameFormat) {
        template = fs_frame(seq: 0, epoch: 0, format: format, description: FrameDescription())
        templateFormat = format
    }

    /// Publishes a `WritableFrame`'s slot (canonical layout).
    func publishReserved(_ slot: UInt32, format: FrameFormat, description: FrameDescription) {
        guard !isForkedCopy else { return }   // reserved by the parent: a child publishes nothing into its stream
        slotLock.withLock {
            outstanding -= 1
            commit(slot, format: format, layout: nil, description: description)
        }
    }

    /// Publishes a written slot: header, reservation for every lossless consumer, then
    /// the doorbell. Called with `slotLock` held.
    func commit(_ slot: UInt32, format: FrameFormat, layout: PlaneLayout?, description d: FrameDescription) {
        if templateFormat != format { prepareTemplate(format) }
        var header = template
        if let layout {
            header.setLayout(layout, format: format)
            publishedInPlace += 1
        }
        header.epoch = epoch
        header.color_matrix = d.color.matrix
        header.color_range = d.color.range
        header.color_primaries = d.color.primaries
        header.color_transfer = d.color.transfer
        header.sar_num = d.sampleAspectRatio.num
        header.sar_den = d.sampleAspectRatio.den
        header.pts = d.pts ?? Int64.min
        header.time_base_num = d.timeBase.num
        header.time_base_den = d.timeBase.den
        header.duration = d.duration
        header.capture_ns = d.captureNanos == 0 ? monotonicNanos() : d.captureNanos
        header.flags = d.flags.rawValue
        header.field_order = d.fieldOrder.rawValue
        header.chroma_location = d.chromaLocation.rawValue
        commit(slot, header: &header, description: d)
    }

    /// Publishes a `WritableAudioFrame`'s slot (PROTOCOL.md 4.6).
    func publishReservedAudio(_ slot: UInt32, format: AudioFormat, description d: FrameDescription) {
        slotLock.withLock {
            outstanding -= 1
            commitAudio(slot, format: format, rows: nil, description: d)
        }
    }

    /// Publishes an audio frame: its header (the plane at `rows` where a decoder wrote it,
    /// else 4.6's canonical one), then the commit. Called with `slotLock` held.
    func commitAudio(_ slot: UInt32, format: AudioFormat, rows: AudioRows?, description d: FrameDescription) {
        var header = fs_frame(audio: format, description: d)
        if let rows {
            header.setRows(rows, format: format)
            publishedInPlace += 1
        }
        header.epoch = epoch
        header.capture_ns = d.captureNanos == 0 ? monotonicNanos() : d.captureNanos
        commit(slot, header: &header, description: d)
    }

    /// The part of a publish every frame shares: the source's drops, the sequence number,
    /// the header stored, the holder bits, the wake and the announcement. `slotLock` held.
    private func commit(_ slot: UInt32, header: inout fs_frame, description d: FrameDescription) {
        header.source_dropped = d.sourceDropped &+ droppedSincePublish
        if header.source_dropped > 0 { header.flags |= FS_FRAME_DISCONTINUITY }
        droppedSincePublish = 0
        let s = slotCtl(slot)
        let base = pool!.base + Int(slot) * slotStride
        let now = monotonicNanos()
        let seq = shared.withLock { st -> UInt64 in
            let seq = st.nextSeq
            st.nextSeq += 1
            header.seq = seq
            base.storeBytes(of: header, as: fs_frame.self)
            // SYNC: release store of holders publishes header and pixels (fs_slot_publish).
            fs_slot_publish(s, seq, epoch, now, st.losslessMask)
            control.setLatest(sequence: seq, slot: slot)
            return seq
        }
        // The local wake first, outside the lock and before any ZeroMQ cost.
        control.frameReady()
        latestPublished = (seq, slot)
        control.countPublished(at: now)
        announce(Announcement(kind: .frame, stream: stream, sequence: seq, slot: slot, flags: d.flags, epoch: epoch,
                              captureNanos: header.capture_ns, pts: d.pts, publishNanos: now), refresh: false)
    }

    /// Sends the newest frame's announcement again (consumers treat repeats as doorbells).
    func reannounceLatest() {
        guard let latest = latestPublished else { return }
        announce(Announcement(kind: .frame, stream: stream, sequence: latest.sequence, slot: latest.slot,
                              epoch: epoch, publishNanos: monotonicNanos()))
    }

    /// Sends an announcement, if anyone subscribes: local consumers sleep on `frame_wake`,
    /// so with no monitor, bridge or event-loop consumer this costs no ZeroMQ call at all
    /// beyond draining subscriptions at most once per millisecond (`refreshSubscribers`).
    /// A frame's announcement (`refresh` false) goes by the count its reserve refreshed.
    func announce(_ a: Announcement, refresh: Bool = true) {
        announceLock.withLock {
            if refresh { refreshSubscribers(now: a.publishNanos) }
            guard subscribers > 0 else { return }
            let n = a.encode(into: announceBuffer)
            socket.send(UnsafeRawBufferPointer(rebasing: announceBuffer[..<n]))
        }
    }

    /// Counts subscribers before a frame is written (`reserve`, `lease`): its announcement
    /// after the wake then sends by that count. ZeroMQ's check costs two system calls, and a
    /// consumer woken onto this CPU (the scheduler often puts it there) runs only once this
    /// thread sleeps, so work after the wake is the consumer's latency; work before the
    /// frame's capture stamp is nobody's.
    func refreshSubscribers() {
        announceLock.withLock { refreshSubscribers(now: monotonicNanos()) }
    }

    /// Counts subscribers (XPUB's subscribe and unsubscribe messages), at most once per
    /// millisecond. `announceLock` held.
    private func refreshSubscribers(now: UInt64) {
        guard now &- subscriptionsDrainedAt >= 1_000_000 else { return }
        subscriptionsDrainedAt = now
        subscribers = max(0, subscribers + socket.drainSubscriptions())
    }
}
