import CZMQ
import FrameServer

/// A handshake libzmq reported as failed on the bridge's socket (its socket monitor).
struct HandshakeFailure: Equatable {
    /// ZMQ_EVENT_HANDSHAKE_FAILED_AUTH (the ZAP handler refused: value is its status code),
    /// _PROTOCOL (value is the ZMQ_PROTOCOL_ERROR_* code) or _NO_DETAIL.
    let event: Int32
    let value: UInt32
    let endpoint: String

    var refusedByZAP: Bool { event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH }
    /// CURVE could not open the peer's handshake: it does not know this end's public key.
    var cryptographic: Bool { event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && value == UInt32(ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC) }
}

/// libzmq's socket monitor on one socket, for failed handshakes only: libzmq does not retry a
/// handshake the peer refused, so a refused end would otherwise wait silently forever.
///
/// The corresponding C function is `zmq_socket_monitor`.
final class HandshakeMonitor {
    private let monitored: UnsafeMutableRawPointer
    private let pair: ZMQSocket
    private var closed = false
    static let events = ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL

    /// Starts monitoring `socket` (before its bind/connect). The inproc address is the
    /// context's own: each BridgeSocket has its own context.
    init(socket: ZMQSocket, context: ZMQContext) throws(BridgeError) {
        let address = "inproc://bridge-handshake-monitor"
        guard zmq_socket_monitor(socket.handle, address, Self.events) == 0 else { throw .zeromq("monitor the socket", zmqErrorText()) }
        do {
            pair = try ZMQSocket(type: ZMQ_PAIR, context: context) { BridgeError.zeromq("create the monitor's socket", $0) }
            try pair.connect(address) { BridgeError.zeromq("connect the monitor's socket", $0) }
        } catch {
            zmq_socket_monitor(socket.handle, nil, 0)
            throw error
        }
        monitored = socket.handle
    }

    /// The next failed handshake reported, without blocking; nil when there is none.
    func next() -> HandshakeFailure? {
        while !closed {
            let head = ZMQMessage()
            guard zmq_msg_recv(head.msg, pair.handle, ZMQ_DONTWAIT) >= 0 else { return nil }
            guard zmq_msg_more(head.msg) != 0 else { continue }
            let address = ZMQMessage()
            guard zmq_msg_recv(address.msg, pair.handle, 0) >= 0 else { return nil }
            // The event: a 16-bit id and a 32-bit value (host order), then the endpoint.
            let bytes = head.bytes
            guard bytes.count >= 6 else { continue }
            let event = Int32(bytes.loadUnaligned(fromByteOffset: 0, as: UInt16.self))
            let value = bytes.loadUnaligned(fromByteOffset: 2, as: UInt32.self)
            guard event & Self.events != 0 else { continue }
            return HandshakeFailure(event: event, value: value, endpoint: String(decoding: address.bytes, as: UTF8.self))
        }
        return nil
    }

    /// Stops the monitor (before the monitored socket closes).
    func close() {
        guard !closed else { return }
        closed = true
        zmq_socket_monitor(monitored, nil, 0)
        pair.close()
    }
}
