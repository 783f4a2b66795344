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
    let zmqContext: ZMQContext
    let zmqSocket: ZMQSocket
    /// The raw socket and context, for what the wrapper does not cover (security, the handshake monitor, multipart receive).
    var socket: UnsafeMutableRawPointer { zmqSocket.handle }
    var context: UnsafeMutableRawPointer { zmqContext.handle }
    let endpoint: BridgeEndpoint
    /// Failed handshakes on the socket (a refused key).
    let monitor: HandshakeMonitor

    /// Creates the socket, applies `secure`, then binds or connects.
    init(endpoint: BridgeEndpoint, bind: Bool, secure: SecureSocket, highWaterMark: Int32, maxMessageBytes: Int64) throws {
        self.endpoint = endpoint
        let context = ZMQContext()
        zmqContext = context
        do {
            zmqSocket = try ZMQSocket(type: ZMQ_DEALER, context: context) { BridgeError.zeromq("create a socket", $0) }
        } catch {
            context.terminate()
            throw error
        }
        do { monitor = try HandshakeMonitor(socket: zmqSocket, context: context) } catch {
            zmqSocket.close()
            context.terminate()
            throw error
        }
        for (option, value) in [(ZMQ_SNDHWM, highWaterMark), (ZMQ_RCVHWM, highWaterMark),
                                (ZMQ_HEARTBEAT_IVL, Self.heartbeatMillis), (ZMQ_HEARTBEAT_TIMEOUT, Self.deadMillis),
                                (ZMQ_HEARTBEAT_TTL, Self.deadMillis),
                                (ZMQ_RECONNECT_IVL, 100), (ZMQ_RECONNECT_IVL_MAX, 1000), (ZMQ_IMMEDIATE, 1),
                                (ZMQ_HANDSHAKE_IVL, 5000)] as [(Int32, Int32)] {
            zmqSocket.setOption(option, value)
        }
        zmqSocket.setInt64Option(ZMQ_MAXMSGSIZE, maxMessageBytes)
        do {
            try secure(zmqSocket.handle, context.handle)
            if bind {
                try zmqSocket.bind(endpoint.text) { BridgeError.zeromq("listen on \(endpoint.text)", $0) }
            } else {
                try endpoint.checkResolves()
                try zmqSocket.connect(endpoint.text) { BridgeError.zeromq("connect to \(endpoint.text)", $0) }
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
        zmqSocket.close()
        zmqContext.terminate()
    }

    deinit { close() }

    /// This end's CURVE public key (Z85), nil without CURVE.
    var curvePublicKey: String? {
        var key = [CChar](repeating: 0, count: 41), size = 41
        guard zmq_getsockopt(socket, ZMQ_CURVE_PUBLICKEY, &key, &size) == 0, size == 41, key[0] != 0 else { return nil }
        return String(decoding: key.prefix(40).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Sends `parts` as one message without blocking; false when no peer takes it now.
    func send(_ head: [UInt8], planes: [UnsafeRawBufferPointer] = []) -> Bool {
        guard head.withUnsafeBytes({ zmqSocket.send($0, more: !planes.isEmpty) }) else { return false }
        for (i, p) in planes.enumerated() {
            // The first part went: the rest of the message is queued as a whole (ZeroMQ's atomic multipart).
            zmqSocket.send(p, blocking: true, more: i < planes.count - 1)
        }
        return true
    }

    /// Waits up to `timeoutMillis` for a message (or for `fd` to be readable); true when one may be waiting.
    func wait(timeoutMillis: Int, orReadable fd: Int32? = nil) -> Bool {
        zmqSocket.wait(orReadable: fd.map { [$0] } ?? [], timeoutMillis: timeoutMillis) == -1
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

struct ReceivedMessage {
    let parts: [ZMQMessage]
    let extraParts: Bool
    let peer: String
}
