import FrameControl
import FrameRecording
import FrameServer
import Glibc
import Synchronization

/// What `framesrv bridge recv` does.
public struct BridgeReceiveSettings: Sendable {
    /// B: the stream it creates.
    public var stream: String
    public var endpoint: BridgeEndpoint
    /// Bind (`--listen`) instead of connecting (`--from`).
    public var bind = true
    /// Credits granted: frames in flight at most (1..64).
    public var window = 4
    public var slots = 8
    /// Publish nothing (and acknowledge nothing: A waits) until B has a lossless consumer,
    /// as `produce -i` and `replay` wait for their first one.
    public var waitForConsumer = true
    /// The largest frame accepted, in bytes (every plane on the wire).
    public var maxFrameBytes = 1 << 28

    public init(stream: String, endpoint: BridgeEndpoint) { self.stream = stream; self.endpoint = endpoint }
}

/// What a receiver did.
public struct BridgeReceiveReport: Sendable {
    public var frames: UInt64 = 0
    public var bytes: UInt64 = 0
    public var duplicates: UInt64 = 0
    public var malformed: UInt64 = 0
    public var skipped: UInt64 = 0
    public var sessions = 0
    /// Sessions resumed after the sender fell silent (a dropped link), plus new sessions
    /// after the first (a restarted sender).
    public var reconnects = 0
    public var ended = false
    public var failed = false
    /// A's capture (publish) to B's publish, µs: meaningful only when both ends share a
    /// clock (one host: loopback, the bench). From the (2 x window + 1)th frame on (after the
    /// session's set-up); at most 1,000,000 samples.
    public var latencies: [Double] = []

    /// The `p` quantile (0...1) of `latencies`, nil when there are none.
    public func latency(_ p: Double) -> Double? {
        guard !latencies.isEmpty else { return nil }
        let sorted = latencies.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count - 1) * p + 0.5))]
    }

    public var json: String {
        "{\"frames\":\(frames),\"bytes\":\(bytes),\"duplicates\":\(duplicates),\"malformed\":\(malformed),"
            + "\"skipped\":\(skipped),\"sessions\":\(sessions),\"reconnects\":\(reconnects),\"ended\":\(ended),"
            + "\"same_host_latency_p50_us\":\(latency(0.5).map { "\($0)" } ?? "null"),"
            + "\"same_host_latency_p99_us\":\(latency(0.99).map { "\($0)" } ?? "null")}"
    }
}

/// `framesrv bridge recv`: republishes what one sender sends as stream B on this host
/// (docs/BRIDGE.md). Grants credits (its window), acknowledges each frame once published
/// in B, drops duplicates by sequence, and asks for a resend from the first frame missing.
public final class BridgeReceiver {
    public let settings: BridgeReceiveSettings
    let socket: BridgeSocket
    var producer: Producer?
    private var control: ControlServer?
    let link: LinkBox
    public internal(set) var report = BridgeReceiveReport()

    var session: UInt64?
    var live = false
    /// The session's payload (hello flags): 0 raw planes, 1 FFV1, 2 H.264.
    var codecSession: UInt32 = 0
    var decoder: PacketDecoder?
    var nextExpected: UInt64 = 1
    var discontinuity = false
    var rewoundAt: UInt64 = 0
    var endedAt: UInt64?
    private var hellos = 0
    /// The last word of the session's sender, the last keep-alive credit, and whether the
    /// sender has been silent past `BridgeSocket.silentNanos` (the link lost).
    private var lastHeard: UInt64 = 0
    private var lastKeepAlive: UInt64 = 0
    private var silent = false
    var meter = (start: UInt64(0), bytes: UInt64(0))

    public init(settings: BridgeReceiveSettings, secure: SecureSocket) throws {
        self.settings = settings
        try validateStreamName(settings.stream)
        socket = try BridgeSocket(endpoint: settings.endpoint, bind: settings.bind, secure: secure,
                                  highWaterMark: Int32(settings.window * 4 + 16),
                                  maxMessageBytes: Int64(settings.maxFrameBytes))
        link = LinkBox(LinkStatus(stream: settings.stream, peer: "?", bytesPerSecond: 0, inFlight: 0, credits: settings.window,
                                rttMillis: nil, reconnects: 0, skipped: 0, frames: 0))
    }

    deinit { close(failed: true) }

    /// The link's figures now (any thread).
    public var linkStatus: LinkStatus { link.state.withLock { $0 } }

    /// Receives until a session's stream ended (then B ends and it returns), or `stop`.
    public func run(stop: @escaping @Sendable () -> Bool) throws -> BridgeReceiveReport {
        while !stop() {
            if let at = endedAt, monotonicNanos() &- at > 500_000_000 { break }   // the end acknowledged, then a grace
            _ = socket.wait(timeoutMillis: 100)
            do {
                while let m = socket.receive() { try handle(m, stop: stop) }
                if let refused = refusal() { throw BridgeError.security(refused) }
            } catch {
                close(failed: true)
                throw error
            }
            updateRate()
            keepAlive()
        }
        // Stopped (SIGINT, SIGTERM) before the end: B ends, as a stopped producer's stream does.
        close(failed: false)
        return report
    }

    private func close(failed: Bool) {
        control?.close()
        control = nil
        if let p = producer {
            if !report.ended { p.finish(failed: failed) }
            p.close()
        }
        producer = nil
        socket.close()
    }

    private func handle(_ m: ReceivedMessage, stop: @escaping @Sendable () -> Bool) throws {
        let message: BridgeMessage
        switch BridgeMessage.parse(m.parts.first?.bytes ?? UnsafeRawBufferPointer(start: nil, count: 0)) {
        case .failure(let why): return refuse(m.peer, why.description)
        case .success(let parsed): message = parsed
        }
        if case .frame = message {} else if m.parts.count != 1 || m.extraParts {
            return refuse(m.peer, "\(message.head.type) with \(m.parts.count) parts")
        }
        if case .hello(let h, let rate) = message { return try hello(h, rate: rate, peer: m.peer, resumed: heard(), stop: stop) }
        guard message.head.session == session else { return }   // from an earlier sender, or before its hello
        _ = heard()
        switch message {
        case .frame(let h, let record, _): try frame(h, record, parts: m, stop: stop)
        case .end(let h): end(h)
        case .ping(let h, let sent):
            link.state.withLock { $0.rttMillis = h.value > 0 ? Double(h.value) / 1000 : $0.rttMillis; $0.inFlight = Int(min(h.flags, 1024)) }
            _ = socket.send(BridgeMessage.pong(BridgeHead(.pong, session: h.session), nanos: sent).bytes)
        default: refuse(m.peer, "a \(message.head.type) message (senders do not send it)")
        }
    }

    private var lastRefusal: UInt64 = 0
    /// A malformed message: one logged line (at most one a second), dropped.
    func refuse(_ peer: String, _ why: String) {
        report.malformed += 1
        let now = monotonicNanos()
        guard now &- lastRefusal > 1_000_000_000 else { return }
        lastRefusal = now
        bridgeLog("bridge recv: dropped a message from \(peer): \(why)")
    }

    /// Dialing out (`--from`), a handshake with the one sender failed for good: its key is not
    /// on the allow-list (the ZAP handler logged it), or it does not know this receiver's key.
    /// libzmq would not retry the first, so neither waits forever. Listening, a refused client
    /// is only logged: the right sender may still come.
    private func refusal() -> String? {
        while let failure = socket.monitor.next() {
            guard !settings.bind else { continue }
            let sender = settings.endpoint.text
            if failure.refusedByZAP {
                return "bridge recv: refused the sender at \(sender): its key is not on this receiver's allow-list: add it there"
            }
            if failure.cryptographic {
                return "bridge recv: the sender at \(sender) refused this receiver's key \(socket.curvePublicKey ?? "?"): "
                    + "give the sender this receiver's public key file as --server-key"
            }
        }
        return nil
    }

    /// A word from the sender: true when it ends a silence (a reconnect, counted here).
    private func heard() -> Bool {
        lastHeard = monotonicNanos()
        guard silent else { return false }
        silent = false
        report.reconnects += 1
        let reconnects = report.reconnects
        link.state.withLock { $0.reconnects = reconnects }
        return true
    }

    /// Every `BridgeSocket.keepAliveNanos` in a session: a credit (the sender's sign of life,
    /// over the link's fast direction); a sender silent past `silentNanos` lost the session.
    /// `watch: false` while blocked (messages wait unread: the sender's silence is not known).
    func keepAlive(watch: Bool = true) {
        guard session != nil, !report.ended else { return }
        let now = monotonicNanos()
        if watch, !silent, now &- lastHeard > BridgeSocket.silentNanos {
            silent = true
            bridgeLog("bridge recv: no word from the sender for \(BridgeSocket.silentNanos / 1_000_000) ms: waiting for it to reconnect")
        }
        guard now &- lastKeepAlive > BridgeSocket.keepAliveNanos else { return }
        lastKeepAlive = now
        sendCredit()
    }

    private func hello(_ h: BridgeHead, rate: Rational, peer: String, resumed: Bool, stop: @escaping @Sendable () -> Bool) throws {
        if session != h.session {
            // A new sender (first, or restarted): its numbering starts where it says.
            // After an earlier session, or joining one past its start (a restarted receiver): a gap.
            if session != nil || h.sequence > 1 { discontinuity = true }
            session = h.session
            nextExpected = h.sequence
            report.sessions += 1
            live = h.value == 1
            codecSession = min(h.flags, 2)
            decoder = nil
            endedAt = nil
        } else if h.sequence > nextExpected {
            // The same sender resuming, past frames we never got (live): a gap.
            nextExpected = h.sequence
            discontinuity = true
        }
        // A hello after the first one is a reconnect, unless it ended a silence (counted then).
        if hellos > 0, !resumed { report.reconnects += 1 }
        hellos += 1
        let reconnects = report.reconnects
        link.state.withLock { $0.peer = peer; $0.reconnects = reconnects }
        if producer == nil { try createStream(rate: rate, stop: stop) }
        sendCredit(flags: BridgeHead.rewind)
    }

    private func createStream(rate: Rational, stop: @escaping @Sendable () -> Bool) throws {
        var options = ProducerOptions()
        options.slots = settings.slots
        options.nominalRate = rate.num > 0 && rate.den > 0 ? rate : nil
        options.name = ClientName.fit("bridge recv \(settings.endpoint.text)")
        let p = try Producer(stream: settings.stream, options: options)
        p.shouldStop = stop
        producer = p
        let link = self.link
        control = try? ControlServer(stream: settings.stream, directory: p.directory, verbs: [.status]) { request in
            request == .status ? .json(link.state.withLock { $0 }.json) : .error("'\(request.verb.rawValue)': a bridged stream takes only 'status'")
        }
    }

    func sendCredit(flags: UInt32 = 0) {
        let h = BridgeHead(.credit, session: session ?? 0, sequence: nextExpected, value: UInt32(settings.window), flags: flags)
        _ = socket.send(BridgeMessage.credit(h).bytes)
    }
}

/// The receiver's link figures, shared with the control socket's thread.
final class LinkBox: Sendable {
    let state: Mutex<LinkStatus>
    init(_ status: LinkStatus) { state = Mutex(status) }
}
