import FrameRecording
import FrameServer
import Glibc

extension BridgeReceiver {
    /// What a frame message carries once checked: raw planes, or a packet for the decoder.
    enum Payload {
        case planes([UnsafeRawBufferPointer], bytes: Int)
        case packet(UnsafeRawBufferPointer, extradata: UnsafeRawBufferPointer)
    }

    /// A frame message: checked (parts, sizes against its own validated format, sequence),
    /// then copied (or decoded) into a slot of B and published; a duplicate is dropped, a
    /// gap (lossless) asks the sender to resend from the first frame missing.
    func frame(_ h: BridgeHead, _ record: FrameRecord, parts m: ReceivedMessage, stop: @escaping @Sendable () -> Bool) throws {
        guard let payload = payload(h, record, m) else { return }
        guard h.sequence < UInt64.max / 2 else { return refuse(m.peer, "frame \(h.sequence): a sequence out of range") }
        if h.sequence < nextExpected {
            report.duplicates += 1
            return sendCredit()
        }
        var skipped = live ? h.value : 0
        if h.sequence > nextExpected {
            guard live else { return askResend() }
            skipped &+= UInt32(clamping: h.sequence - nextExpected)
        }
        guard let producer, waitForConsumer(producer, stop: stop) else { return }
        switch payload {
        case .planes(let planes, let bytes):
            guard try publish(record, skipped: skipped, bytes: bytes, into: producer, fill: { slot in
                Self.copy(planes, record.format, into: slot)
            }) else { return }
        case .packet(let packet, let extradata):
            let decoder = self.decoder ?? PacketDecoder(codec: codecSession == 2 ? .h264(crf: 0) : .ffv1)
            self.decoder = decoder
            let frames = decoder.decode(packet, record: record, extradata: extradata)
            if frames.isEmpty {
                // Logged and skipped (acknowledged, so the stream goes on); B's next frame says so.
                // H.264 after a restart: the frames before its next keyframe.
                refuse(m.peer, "frame \(h.sequence): its packet does not decode as \(record.format)")
                discontinuity = true
            }
            for f in frames {
                guard try publish(f.record, skipped: skipped, bytes: packet.count, into: producer, fill: { slot in f.copy(into: slot) }) else { return }
            }
        }
        nextExpected = h.sequence + 1
        sendCredit()
    }

    /// The message's parts checked against the record's format (every size overflow-checked
    /// and bounded); nil (refused, logged) when they do not match.
    private func payload(_ h: BridgeHead, _ record: FrameRecord, _ m: ReceivedMessage) -> Payload? {
        let format = record.format
        let count = format.pixelFormat.planes.count
        var sizes: [Int] = []
        var total = 0
        for p in 0..<count {
            guard let size = WirePlanes.size(format, plane: p) else { refuse(m.peer, "frame \(h.sequence): \(format) overflows"); return nil }
            let (sum, overflow) = total.addingReportingOverflow(size)
            guard !overflow, sum <= settings.maxFrameBytes else { refuse(m.peer, "frame \(h.sequence): larger than the limit"); return nil }
            total = sum
            sizes.append(size)
        }
        guard !m.extraParts else { refuse(m.peer, "frame \(h.sequence): too many parts"); return nil }
        if record.packing == .codec {
            guard codecSession != 0, (2...3).contains(m.parts.count), m.parts[1].bytes.count <= settings.maxFrameBytes else {
                refuse(m.peer, "frame \(h.sequence): an encoded frame with \(m.parts.count) parts (or in a raw session)")
                return nil
            }
            return .packet(m.parts[1].bytes, extradata: m.parts.count == 3 ? m.parts[2].bytes : UnsafeRawBufferPointer(start: nil, count: 0))
        }
        if codecSession != 0 {
            // A frame the codec does not take: its planes packed in one part.
            guard m.parts.count == 2, m.parts[1].bytes.count == total else {
                refuse(m.peer, "frame \(h.sequence): a packed frame that is not \(format)'s \(total) bytes")
                return nil
            }
            var at = 0
            return .planes(sizes.map { size in defer { at += size }; return UnsafeRawBufferPointer(rebasing: m.parts[1].bytes[at..<at + size]) }, bytes: total)
        }
        guard m.parts.count == 1 + count else {
            refuse(m.peer, "frame \(h.sequence): \(m.parts.count - 1) planes for \(format) (which has \(count))")
            return nil
        }
        for p in 0..<count where m.parts[1 + p].bytes.count != sizes[p] {
            refuse(m.peer, "frame \(h.sequence): plane \(p) is \(m.parts[1 + p].bytes.count) bytes, not \(format)'s")
            return nil
        }
        return .planes(m.parts.dropFirst().map(\.bytes), bytes: total)
    }

    /// Planes packed row after row (checked sizes) into a slot of `format`.
    static func copy(_ planes: [UnsafeRawBufferPointer], _ format: FrameFormat, into slot: borrowing WritableFrame) {
        for (p, src) in planes.enumerated() {
            let dst = slot.plane(p), rowBytes = format.rowBytes(plane: p), stride = format.stride(plane: p)
            for y in 0..<format.rows(plane: p) {
                memcpy(dst.baseAddress! + y * stride, src.baseAddress! + y * rowBytes, rowBytes)
            }
        }
    }

    /// Reserves a slot of B for `record`'s format, fills it and publishes it with the
    /// record's header fields; false when stopped.
    private func publish(_ record: FrameRecord, skipped: UInt32, bytes: Int, into producer: Producer,
                         fill: (borrowing WritableFrame) -> Void) throws -> Bool {
        guard var slot = try producer.reserve(record.format) else { return false }
        fill(slot)
        var d = record.description
        // The sender's capture clock is another host's: B's frames are captured when they arrive.
        d.captureNanos = monotonicNanos()
        d.flags.remove(.endOfStream)
        if discontinuity || skipped > 0 { d.flags.insert(.discontinuity) }
        d.sourceDropped &+= skipped
        slot.description = d
        slot.publish()
        let now = monotonicNanos()
        // Past the session's set-up (handshake, the first window): the steady state.
        if report.frames > UInt64(settings.window) * 2, report.latencies.count < 1_000_000, record.captureOffsetNanos > 0,
           UInt64(record.captureOffsetNanos) <= now {
            report.latencies.append(Double(now - UInt64(record.captureOffsetNanos)) / 1000)
        }
        discontinuity = false
        report.frames += 1
        report.bytes &+= UInt64(bytes)
        report.skipped &+= UInt64(skipped)
        meter.bytes &+= UInt64(bytes)
        return true
    }

    /// With `waitForConsumer`: until B's first lossless consumer (once); false when stopped first.
    private func waitForConsumer(_ producer: Producer, stop: () -> Bool) -> Bool {
        guard settings.waitForConsumer, report.frames == 0 else { return true }
        while !producer.waitForLosslessConsumers(1, timeoutSeconds: 0.2) {
            if stop() { return false }
            keepAlive(watch: false)
        }
        return true
    }

    /// Lossless, a frame after a gap (lost with a dropped connection): resend from the first missing.
    private func askResend() {
        let now = monotonicNanos()
        guard now &- rewoundAt > 200_000_000 else { return }
        rewoundAt = now
        sendCredit(flags: BridgeHead.rewind)
    }

    /// The stream ended after frame `h.sequence`: B ends once every frame before it arrived.
    func end(_ h: BridgeHead) {
        if report.ended { return sendCredit(flags: BridgeHead.endAcknowledged) }
        guard live || h.sequence < nextExpected else { return askResend() }
        report.ended = true
        report.failed = h.value == 1
        producer?.finish(failed: report.failed)
        endedAt = monotonicNanos()
        sendCredit(flags: BridgeHead.endAcknowledged)
    }

    /// Once a second: the link's byte rate and counts for `status`.
    func updateRate() {
        let now = monotonicNanos()
        if meter.start == 0 { meter.start = now }
        let elapsed = now &- meter.start
        let frames = report.frames, skipped = report.skipped
        guard elapsed >= 1_000_000_000 else { return link.state.withLock { $0.frames = frames; $0.skipped = skipped } }
        let rate = Double(meter.bytes) * 1e9 / Double(elapsed)
        meter = (now, 0)
        link.state.withLock { $0.bytesPerSecond = rate; $0.frames = frames; $0.skipped = skipped }
    }
}
