import CZMQ
import FrameServer
import Glibc

/// Errors of the bridge's link, each one line.
public enum BridgeError: Error, Sendable, CustomStringConvertible {
    case endpoint(String, String)
    case zeromq(String, String)
    case security(String)
    case stream(String)

    public var description: String {
        switch self {
        case .endpoint(let e, let why): "bad endpoint '\(e)': \(why)"
        case .zeromq(let what, let why): "cannot \(what): \(why)"
        case .security(let why): why
        case .stream(let why): why
        }
    }
}

func zmqText() -> String { String(cString: zmq_strerror(zmq_errno())) }

/// How one end applies its security (CURVE or NULL) to its socket before bind/connect:
/// `BridgeSecurity.apply(to:context:)`, or nothing for the loopback-only insecure path.
public typealias SecureSocket = (_ socket: UnsafeMutableRawPointer, _ context: UnsafeMutableRawPointer) throws -> Void

/// A `tcp://HOST:PORT` endpoint, checked before libzmq sees it.
public struct BridgeEndpoint: Sendable, Equatable {
    public let text: String
    public let host: String
    public let port: Int

    public init(_ text: String) throws(BridgeError) {
        guard text.hasPrefix("tcp://") else { throw .endpoint(text, "the bridge takes tcp://HOST:PORT") }
        let rest = text.dropFirst(6)
        guard let colon = rest.lastIndex(of: ":") else { throw .endpoint(text, "no port (tcp://HOST:PORT)") }
        var host = String(rest[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw .endpoint(text, "no host (tcp://HOST:PORT; * binds every address)") }
        guard let port = Int(rest[rest.index(after: colon)...]), (1...65535).contains(port) else {
            throw .endpoint(text, "the port must be 1..65535")
        }
        self.text = text; self.host = host; self.port = port
    }

    /// Checks that a host to dial resolves (libzmq would retry an unknown name forever, silently).
    public func checkResolves() throws(BridgeError) {
        var result: UnsafeMutablePointer<addrinfo>?
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        let r = getaddrinfo(host, String(port), &hints, &result)
        if let result { freeaddrinfo(result) }
        guard r == 0 else { throw .endpoint(text, "cannot resolve '\(host)': \(String(cString: gai_strerror(r)))") }
    }

    /// A TCP port nobody listens on now on 127.0.0.1 (bound to port 0, then closed): for
    /// tests and benchmarks.
    public static func freeLoopbackPort() -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { Glibc.close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) } }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// Whether the host is a loopback address (what `--insecure` needs nothing more for).
    public var isLoopback: Bool { host == "localhost" || host.hasPrefix("127.") || host == "::1" }
}

/// The bridge's own ZeroMQ context (never FrameServer's shared one) and its one DEALER
/// socket. One thread uses the socket.
final class BridgeSocket {
    /// ZMTP heartbeats: a PING this often, and a connection that brought no complete message
    /// (any message counts, so a 3 MB frame crossing a slow link in 0.5 s keeps it alive) for
    /// `deadMillis` is dropped; libzmq then reconnects. A 2 s outage is noticed on both ends.
    static let heartbeatMillis: Int32 = 250
    static let deadMillis: Int32 = 1200
    /// The session's own liveness (BridgeSender, BridgeReceiver): a word this often, and a
    /// peer silent for `silentNanos` has lost the session (a reconnect).
    static let keepAliveNanos: UInt64 = 250_000_000
    static let silentNanos: UInt64 = 1_500_000_000
    let context: UnsafeMutableRawPointer
    let socket: UnsafeMutableRawPointer
    let endpoint: BridgeEndpoint
    /// Failed handshakes on the socket (a refused key).
    let monitor: HandshakeMonitor

    /// Creates the socket, applies `secure`, then binds or connects.
    init(endpoint: BridgeEndpoint, bind: Bool, secure: SecureSocket, highWaterMark: Int32, maxMessageBytes: Int64) throws {
        self.endpoint = endpoint
        context = zmq_ctx_new()
        guard let s = zmq_socket(context, ZMQ_DEALER) else {
            zmq_ctx_term(context)
            throw BridgeError.zeromq("create a socket", zmqText())
        }
        socket = s
        do { monitor = try HandshakeMonitor(socket: s, context: context) } catch {
            zmq_close(s)
            zmq_ctx_term(context)
            throw error
        }
        for (option, value) in [(ZMQ_LINGER, 0), (ZMQ_SNDHWM, highWaterMark), (ZMQ_RCVHWM, highWaterMark),
                                (ZMQ_HEARTBEAT_IVL, Self.heartbeatMillis), (ZMQ_HEARTBEAT_TIMEOUT, Self.deadMillis),
                                (ZMQ_HEARTBEAT_TTL, Self.deadMillis),
                                (ZMQ_RECONNECT_IVL, 100), (ZMQ_RECONNECT_IVL_MAX, 1000), (ZMQ_IMMEDIATE, 1),
                                (ZMQ_HANDSHAKE_IVL, 5000)] as [(Int32, Int32)] {
            setInt(option, value)
        }
        var max = maxMessageBytes
        zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &max, MemoryLayout<Int64>.size)
        do {
            try secure(s, context)
            if bind {
                guard zmq_bind(s, endpoint.text) == 0 else { throw BridgeError.zeromq("listen on \(endpoint.text)", zmqText()) }
            } else {
                try endpoint.checkResolves()
                guard zmq_connect(s, endpoint.text) == 0 else { throw BridgeError.zeromq("connect to \(endpoint.text)", zmqText()) }
            }
        } catch {
            close()
            throw error
        }
    }

    private var closed = false

    func close() {
        guard !closed else { return }
        closed = true
        monitor.close()
        zmq_close(socket)
        zmq_ctx_term(context)
    }

    deinit { close() }

    /// This end's CURVE public key (Z85), nil without CURVE.
    var curvePublicKey: String? {
        var key = [CChar](repeating: 0, count: 41), size = 41
        guard zmq_getsockopt(socket, ZMQ_CURVE_PUBLICKEY, &key, &size) == 0, size == 41, key[0] != 0 else { return nil }
        return String(decoding: key.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func setInt(_ option: Int32, _ value: Int32) {
        var v = value
        zmq_setsockopt(socket, option, &v, MemoryLayout<Int32>.size)
    }

    /// Sends `parts` as one message without blocking; false when no peer takes it now.
    func send(_ head: [UInt8], planes: [UnsafeRawBufferPointer] = []) -> Bool {
        let sent = head.withUnsafeBytes { zmq_send(socket, $0.baseAddress, $0.count, ZMQ_DONTWAIT | (planes.isEmpty ? 0 : ZMQ_SNDMORE)) }
        guard sent >= 0 else { return false }
        for (i, p) in planes.enumerated() {
            // The first part went: the rest of the message is queued as a whole (ZeroMQ's atomic multipart).
            _ = zmq_send(socket, p.baseAddress, p.count, i == planes.count - 1 ? 0 : ZMQ_SNDMORE)
        }
        return true
    }

    /// Waits up to `timeoutMillis` for a message (or for `fd` to be readable); true when one may be waiting.
    func wait(timeoutMillis: Int, orReadable fd: Int32? = nil) -> Bool {
        var items = [zmq_pollitem_t(socket: socket, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0)]
        if let fd { items.append(zmq_pollitem_t(socket: nil, fd: fd, events: Int16(ZMQ_POLLIN), revents: 0)) }
        return zmq_poll(&items, Int32(items.count), timeoutMillis) > 0 && items[0].revents != 0
    }

    /// Receives one whole message without blocking: its parts (at most 8 kept; `extraParts`
    /// says there were more), and the peer's address.
    func receive() -> ReceivedMessage? {
        var parts: [ZMQMessage] = []
        var peer: String?
        var extra = false
        while true {
            let m = ZMQMessage()
            guard zmq_msg_recv(m.msg, socket, parts.isEmpty && !extra ? ZMQ_DONTWAIT : 0) >= 0 else {
                if parts.isEmpty { return nil }
                break
            }
            if peer == nil, let p = zmq_msg_gets(m.msg, "Peer-Address") { peer = String(cString: p) }
            let more = zmq_msg_more(m.msg) != 0
            if parts.count < 8 { parts.append(m) } else { extra = true }
            if !more { break }
        }
        return ReceivedMessage(parts: parts, extraParts: extra, peer: peer ?? "?")
    }
}

/// One received ZeroMQ message part (owned; the zmq_msg_t never moves: small messages live inside it).
final class ZMQMessage {
    let msg = UnsafeMutablePointer<zmq_msg_t>.allocate(capacity: 1)
    init() { zmq_msg_init(msg) }
    deinit { zmq_msg_close(msg); msg.deallocate() }
    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: zmq_msg_data(msg), count: zmq_msg_size(msg)) }
}

struct ReceivedMessage {
    let parts: [ZMQMessage]
    let extraParts: Bool
    let peer: String
}
