import FrameRecording
import FrameServer
import Glibc

/// What `framesrv bridge send` does.
public struct BridgeSendSettings: Sendable {
    public var stream: String
    public var endpoint: BridgeEndpoint
    /// Bind (`--listen`: the receiver dials in) instead of connecting (`--to`).
    public var bind = false
    public var mode: DeliveryMode = .lossless
    /// Frames in flight at most (lossless: also frames of A held): 1..64.
    public var window = 4
    public var consumerName = "bridge send"
    /// Give up waiting for A after this long (nil: wait).
    public var waitSeconds: Double?
    /// The payload: nil raw planes (bit-identical), .ffv1 lossless compression.
    public var codec: RecordingCodec?

    public init(stream: String, endpoint: BridgeEndpoint) { self.stream = stream; self.endpoint = endpoint }
}

/// What a sender did (`--stats-json`).
public struct BridgeSendReport: Sendable {
    public var frames: UInt64 = 0
    public var bytes: UInt64 = 0
    public var resent: UInt64 = 0
    public var skipped: UInt64 = 0
    public var reconnects = 0
    public var rttMillis: Double?
    public var ended = false
    public var failed = false
    public var error: String?

    public var json: String {
        "{\"frames\":\(frames),\"bytes\":\(bytes),\"resent\":\(resent),\"skipped\":\(skipped),\"reconnects\":\(reconnects),"
            + "\"rtt_ms\":\(rttMillis.map { "\($0)" } ?? "null"),\"ended\":\(ended)}"
    }
}

/// `framesrv bridge send`: an ordinary consumer of A that sends its frames to one receiver
/// (docs/BRIDGE.md). Lossless: within the receiver's credits, keeping every frame until it
/// is acknowledged and resending after a reconnect. Live: the newest frame, skips counted.
public final class BridgeSender {
    public let settings: BridgeSendSettings
    private let socket: BridgeSocket
    private let feed: FrameFeed
    private let session = UInt64.random(in: 1...UInt64.max)
    public private(set) var report = BridgeSendReport()

    /// Frames sent or waiting for their acknowledgement, in sequence order (lossless).
    private var unacked: [(sequence: UInt64, entry: FeedEntry)] = []
    private var nextSequence: UInt64 = 1
    /// The next sequence to send, and the receiver's next expected one.
    private var sendFrom: UInt64 = 1
    private var acked: UInt64 = 1
    private var credits: UInt64 = 0
    private var sessionUp = false
    private var lastHeard: UInt64 = 0
    private var lastHello: UInt64 = 0
    private var lastPing: UInt64 = 0
    private var lastEnd: UInt64 = 0
    private var endAcknowledged = false
    private var packed: [UInt8] = []
    private var highestSent: UInt64 = 0

    public init(settings: BridgeSendSettings, secure: SecureSocket) throws {
        self.settings = settings
        socket = try BridgeSocket(endpoint: settings.endpoint, bind: settings.bind, secure: secure,
                                  highWaterMark: Int32(settings.window * 4 + 16), maxMessageBytes: 4096)
        feed = FrameFeed(window: settings.window, live: settings.mode == .live, codec: settings.codec)
    }

    deinit { socket.close() }

    /// Sends until A ends and the receiver acknowledged the end, or `stop` says so.
    /// `progress` hears the figures about twice a second.
    public func run(stop: @escaping @Sendable () -> Bool, progress: (BridgeSendReport) -> Void = { _ in }) -> BridgeSendReport {
        var options = ConsumerOptions(mode: settings.mode)
        options.name = settings.consumerName
        options.waitSeconds = settings.waitSeconds
        feed.start(stream: settings.stream, options: options, stop: stop)
        var lastProgress: UInt64 = 0
        while !stop(), !endAcknowledged {
            let now = monotonicNanos()
            takeFromFeed()
            if let error = feed.state.withLock({ $0.error }) { report.error = error; break }
            keepSession(now)
            if sessionUp { sendFrames(now) }
            if now &- lastProgress > 500_000_000 { lastProgress = now; progress(report) }
            _ = socket.wait(timeoutMillis: 20, orReadable: feed.wakeRead)
            while let m = socket.receive() { handle(m) }
            if let refused = refusal() { report.error = refused; break }
        }
        feed.stopAndJoin()
        unacked.removeAll()
        report.skipped = feed.state.withLock { $0.skippedTotal }
        progress(report)
        return report
    }

    /// The receiver's ZAP handler refused this sender's key (libzmq does not retry a refused
    /// handshake): the run's one error line, instead of waiting forever.
    private func refusal() -> String? {
        while let failure = socket.monitor.next() {
            guard failure.refusedByZAP else { continue }   // a dropped connection mid-handshake: libzmq retries
            let receiver = settings.bind ? "dialing \(settings.endpoint.text)" : "at \(settings.endpoint.text)"
            return "bridge send: the receiver \(receiver) refused this sender's key \(socket.curvePublicKey ?? "?"): "
                + "add it to the receiver's allow-list"
        }
        return nil
    }

    /// Moves frames from the feed: lossless every one (the feed holds at most `window`);
    /// live only when a credit is free (the feed keeps replacing its one frame meanwhile).
    private func takeFromFeed() {
        if settings.mode == .live, !sessionUp || sendFrom >= acked &+ credits { return }
        for entry in feed.take() {
            unacked.append((nextSequence, entry))
            nextSequence += 1
        }
        let s = feed.state.withLock { ($0.ended, $0.failed) }
        if s.0, !report.ended { report.ended = true; report.failed = s.1 }
    }

    /// Hello until the receiver answers; again after `BridgeSocket.silentNanos` without a
    /// word from it (it sends one every `keepAliveNanos`: a dropped link is a reconnect).
    private func keepSession(_ now: UInt64) {
        if sessionUp, now &- lastHeard > BridgeSocket.silentNanos {
            sessionUp = false
            report.reconnects += 1
        }
        if !sessionUp, now &- lastHello > 500_000_000 {
            // No session before A exists: the hello carries its nominal rate.
            let (attached, rate) = feed.state.withLock { ($0.attached, $0.rate) }
            guard attached else { return }
            lastHello = now
            let first = settings.mode == .live ? sendFrom : (unacked.first?.sequence ?? nextSequence)
            _ = socket.send(BridgeMessage.hello(BridgeHead(.hello, session: session, sequence: first,
                                                           value: settings.mode == .live ? 1 : 0, flags: Self.codecFlag(settings.codec)),
                                                rate: rate ?? Rational(0, 0)).bytes)
        }
        guard sessionUp else { return }
        if now &- lastPing > BridgeSocket.keepAliveNanos {
            lastPing = now
            let rtt = UInt32(clamping: Int((report.rttMillis ?? 0) * 1000))
            let inFlight = UInt32(clamping: sendFrom &- acked)
            _ = socket.send(BridgeMessage.ping(BridgeHead(.ping, session: session, value: rtt, flags: inFlight), nanos: now).bytes)
        }
        if report.ended, unacked.isEmpty, now &- lastEnd > 500_000_000 {
            lastEnd = now
            _ = socket.send(BridgeMessage.end(BridgeHead(.end, session: session, sequence: nextSequence - 1,
                                                         value: report.failed ? 1 : 0)).bytes)
        }
    }

    /// The hello's flags: the payload (0 raw planes, 1 FFV1, 2 H.264).
    static func codecFlag(_ codec: RecordingCodec?) -> UInt32 {
        switch codec {
        case nil, .raw: 0
        case .ffv1: 1
        case .h264, .h264Bitrate: 2
        }
    }

    /// Sends what the credits allow, from `sendFrom` on.
    private func sendFrames(_ now: UInt64) {
        while sendFrom < acked &+ credits, let i = unacked.firstIndex(where: { $0.sequence >= sendFrom }) {
            let (sequence, entry) = unacked[i]
            guard send(entry, sequence: sequence, now: now) else { return }
            if sequence <= highestSent { report.resent += 1 } else { report.frames += 1; highestSent = sequence }
            sendFrom = sequence + 1
            // Live: nothing is resent, so nothing is kept.
            if settings.mode == .live { unacked.remove(at: i) }
        }
    }

    private func send(_ entry: FeedEntry, sequence: UInt64, now: UInt64) -> Bool {
        if let packet = entry.packet { return send(packet, skipped: entry.skipped, sequence: sequence, now: now) }
        guard let frame = entry.frame else { return true }
        guard let format = frame.header.format else { return true }
        var record = FrameRecord(format: format)
        record.packing = .raw
        record.description = frame.header.description
        record.sequence = frame.sequence
        record.epoch = frame.header.epoch
        // A's capture time (this host's clock): the receiver's added-latency figure, on one host only.
        record.captureOffsetNanos = Int64(clamping: frame.header.captureNanos)
        let head = BridgeMessage.frame(BridgeHead(.frame, session: session, sequence: sequence, value: entry.skipped),
                                       record: record, sentNanos: now).bytes
        return withPlanes(frame, format) { planes in
            guard socket.send(head, planes: planes) else { return false }
            report.bytes &+= UInt64(planes.reduce(0) { $0 + $1.count })
            return true
        }
    }

    /// An encoded frame: its record, then the packet and the codec's parameters as parts.
    private func send(_ packet: EncodedPacket, skipped: UInt32, sequence: UInt64, now: UInt64) -> Bool {
        let head = BridgeMessage.frame(BridgeHead(.frame, session: session, sequence: sequence, value: skipped),
                                       record: packet.record, sentNanos: now).bytes
        return packet.bytes.withUnsafeBytes { bytes in
            packet.extradata.withUnsafeBytes { extradata in
                guard socket.send(head, planes: extradata.isEmpty ? [bytes] : [bytes, extradata]) else { return false }
                report.bytes &+= UInt64(bytes.count)
                return true
            }
        }
    }

    /// The planes as the wire has them (rows of `rowBytes`, no padding): in place when the
    /// slot has no padding, else packed into one reused buffer.
    private func withPlanes(_ frame: SharedFrame, _ format: FrameFormat, _ body: ([UnsafeRawBufferPointer]) -> Bool) -> Bool {
        let h = frame.header
        let count = format.pixelFormat.planes.count
        if (0..<count).allSatisfy({ h.stride(plane: $0) == format.rowBytes(plane: $0) }) {
            return body((0..<count).map { UnsafeRawBufferPointer(rebasing: frame.plane($0).prefix(WirePlanes.size(format, plane: $0) ?? 0)) })
        }
        let sizes = (0..<count).map { WirePlanes.size(format, plane: $0) ?? 0 }
        if packed.count < sizes.reduce(0, +) { packed = [UInt8](repeating: 0, count: sizes.reduce(0, +)) }
        return packed.withUnsafeMutableBytes { out in
            var at = 0
            var planes: [UnsafeRawBufferPointer] = []
            for p in 0..<count {
                let src = frame.plane(p), stride = h.stride(plane: p), rowBytes = format.rowBytes(plane: p)
                for y in 0..<format.rows(plane: p) {
                    memcpy(out.baseAddress! + at + y * rowBytes, src.baseAddress! + y * stride, rowBytes)
                }
                planes.append(UnsafeRawBufferPointer(start: out.baseAddress! + at, count: sizes[p]))
                at += sizes[p]
            }
            return body(planes)
        }
    }

    private func handle(_ m: ReceivedMessage) {
        guard m.parts.count == 1, !m.extraParts, case .success(let message) = BridgeMessage.parse(m.parts[0].bytes) else {
            warnOnce("bridge send: dropped a malformed message from \(m.peer)")
            return
        }
        guard message.head.session == session else { return }   // an answer to an earlier sender
        lastHeard = monotonicNanos()
        switch message {
        case .credit(let h): credit(h)
        case .pong(_, let sent): report.rttMillis = Double(monotonicNanos() &- sent) / 1e6
        default: warnOnce("bridge send: dropped a \(message.head.type) message from \(m.peer) (receivers do not send it)")
        }
    }

    private func credit(_ h: BridgeHead) {
        // The session lost: only the answer to a hello (rewind) brings it back; a keep-alive is only life.
        guard sessionUp || h.flags & BridgeHead.rewind != 0 else { return }
        sessionUp = true
        if h.sequence > acked { acked = min(h.sequence, nextSequence) }
        credits = UInt64(min(h.value, UInt32(settings.window)))
        while let first = unacked.first, first.sequence < acked, settings.mode == .lossless {
            unacked.removeFirst()
            feed.returnPermit()
        }
        if h.flags & BridgeHead.rewind != 0 { sendFrom = max(acked, settings.mode == .live ? sendFrom : acked) }
        if sendFrom < acked { sendFrom = acked }
        if h.flags & BridgeHead.endAcknowledged != 0, report.ended, unacked.isEmpty { endAcknowledged = true }
    }

    private var lastWarning: UInt64 = 0
    private func warnOnce(_ line: String) {
        let now = monotonicNanos()
        guard now &- lastWarning > 1_000_000_000 else { return }
        lastWarning = now
        bridgeLog(line)
    }
}

/// One line on standard error.
func bridgeLog(_ line: String) {
    var text = line + "\n"
    text.withUTF8 { _ = try? writeAll(2, UnsafeRawBufferPointer($0)) }
}
