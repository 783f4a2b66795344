import FrameRecording
import FrameServer
import Glibc

extension BridgeReceiver {
    /// A frame message: checked (parts, sizes against its own validated format, sequence),
    /// then copied into a slot of B and published; a duplicate is dropped, a gap (lossless)
    /// asks the sender to resend from the first frame missing.
    func frame(_ h: BridgeHead, _ record: FrameRecord, parts m: ReceivedMessage, stop: @escaping @Sendable () -> Bool) throws {
        let format = record.format
        let count = format.pixelFormat.planes.count
        guard !m.extraParts, m.parts.count == 1 + count else {
            return refuse(m.peer, "frame \(h.sequence): \(m.parts.count - 1) planes for \(format) (which has \(count))")
        }
        var total = 0
        for p in 0..<count {
            guard let size = WirePlanes.size(format, plane: p), m.parts[1 + p].bytes.count == size else {
                return refuse(m.peer, "frame \(h.sequence): plane \(p) is \(m.parts[1 + p].bytes.count) bytes, not \(format)'s")
            }
            let (sum, overflow) = total.addingReportingOverflow(size)
            guard !overflow, sum <= settings.maxFrameBytes else { return refuse(m.peer, "frame \(h.sequence): larger than the limit") }
            total = sum
        }
        if h.sequence < nextExpected {
            report.duplicates += 1
            return sendCredit()
        }
        var skipped = live ? h.value : 0
        if h.sequence > nextExpected {
            guard live else { return askResend() }
            skipped &+= UInt32(clamping: h.sequence - nextExpected)
        }
        guard let producer, waitForConsumer(producer, stop: stop), var slot = try producer.reserve(format) else { return }
        for p in 0..<count {
            let src = m.parts[1 + p].bytes, dst = slot.plane(p)
            let rowBytes = format.rowBytes(plane: p), stride = format.stride(plane: p)
            for y in 0..<format.rows(plane: p) {
                memcpy(dst.baseAddress! + y * stride, src.baseAddress! + y * rowBytes, rowBytes)
            }
        }
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
        if report.frames > UInt64(settings.window) * 2, report.latencies.count < 1_000_000, record.captureOffsetNanos > 0, UInt64(record.captureOffsetNanos) <= now {
            report.latencies.append(Double(now - UInt64(record.captureOffsetNanos)) / 1000)
        }
        discontinuity = false
        report.frames += 1
        report.bytes &+= UInt64(total)
        report.skipped &+= UInt64(skipped)
        meter.bytes &+= UInt64(total)
        nextExpected = h.sequence + 1
        sendCredit()
    }

    /// With `waitForConsumer`: until B's first lossless consumer (once); false when stopped first.
    private func waitForConsumer(_ producer: Producer, stop: () -> Bool) -> Bool {
        guard settings.waitForConsumer, report.frames == 0 else { return true }
        while !producer.waitForLosslessConsumers(1, timeoutSeconds: 0.2) {
            if stop() { return false }
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
