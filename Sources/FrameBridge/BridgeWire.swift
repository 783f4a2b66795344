import FrameRecording
import FrameServer

/// The bridge's messages (docs/BRIDGE.md): a 32-byte little-endian head, a body per type,
/// and for a frame one more ZeroMQ part per plane. Every message read from the network is
/// untrusted: `BridgeMessage.parse` checks magic, version, type and sizes, and never traps.
public enum BridgeMessageType: UInt8, Sendable {
    /// sender -> receiver: a session starts or resumes (format of the stream follows in frames).
    case hello = 1
    /// sender -> receiver: one frame (head + record + planes).
    case frame = 2
    /// sender -> receiver: the stream ended after frame `sequence`.
    case end = 3
    /// receiver -> sender: the next sequence it expects and how many frames it takes from there.
    case credit = 4
    /// sender -> receiver: a round-trip probe.
    case ping = 5
    /// receiver -> sender: the probe's echo.
    case pong = 6
}

/// The head every message starts with.
public struct BridgeHead: Sendable, Equatable {
    public static let magic: UInt32 = 0x4753_4246   // "FBSG" little-endian: 46 42 53 47
    public static let version: UInt8 = 1
    public static let size = 32
    public var type: BridgeMessageType
    /// The sender's session: a random number per `bridge send` process.
    public var session: UInt64
    /// hello: the first frame not acknowledged; frame: its bridge sequence; end: the last
    /// frame's sequence (0: none); credit: the next sequence expected; ping/pong: 0.
    public var sequence: UInt64
    /// hello: lossless 0 / live 1; frame: frames skipped before it (live); credit: credits
    /// granted from `sequence` on; end: 1 when A ended after a failure.
    public var value: UInt32
    /// credit: bit 0 rewind (resend from `sequence`), bit 1 end acknowledged.
    public var flags: UInt32

    public init(_ type: BridgeMessageType, session: UInt64, sequence: UInt64 = 0, value: UInt32 = 0, flags: UInt32 = 0) {
        self.type = type; self.session = session; self.sequence = sequence; self.value = value; self.flags = flags
    }

    public static let rewind: UInt32 = 1
    public static let endAcknowledged: UInt32 = 2

    func write(_ w: inout ByteWriter) {
        w.u32(Self.magic); w.u8(Self.version); w.u8(type.rawValue); w.u16(0)
        w.u64(session); w.u64(sequence); w.u32(value); w.u32(flags)
    }
}

/// What a received message's first part says (the body bytes already checked for length).
public enum BridgeMessage: Sendable {
    /// rate: A's nominal rate (0/0: none).
    case hello(BridgeHead, rate: Rational)
    /// sent: the sender's clock when it sent the frame (for its own round-trip figures).
    case frame(BridgeHead, record: FrameRecord, sentNanos: UInt64)
    case end(BridgeHead)
    case credit(BridgeHead)
    case ping(BridgeHead, nanos: UInt64)
    case pong(BridgeHead, nanos: UInt64)

    public var head: BridgeHead {
        switch self {
        case .hello(let h, _), .frame(let h, _, _), .end(let h), .credit(let h), .ping(let h, _), .pong(let h, _): h
        }
    }

    /// Body sizes after the head, per type.
    static func bodySize(_ type: BridgeMessageType) -> Int {
        switch type {
        case .hello: 8
        case .frame: 8 + FrameRecord.size
        case .end, .credit: 0
        case .ping, .pong: 8
        }
    }

    /// Parses a message's first part; the reason when it is not a bridge message.
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> Result<BridgeMessage, BridgeWireError> {
        guard bytes.count >= BridgeHead.size else { return .failure(.malformed("\(bytes.count) bytes, shorter than a head")) }
        var r = ByteReader(bytes)
        guard r.u32() == BridgeHead.magic else { return .failure(.malformed("not a bridge message (bad magic)")) }
        let version = r.u8()
        guard version == BridgeHead.version else { return .failure(.malformed("protocol version \(version), this side speaks \(BridgeHead.version)")) }
        let rawType = r.u8()
        guard let type = BridgeMessageType(rawValue: rawType) else { return .failure(.malformed("unknown message type \(rawType)")) }
        _ = r.u16()
        let head = BridgeHead(type, session: r.u64(), sequence: r.u64(), value: r.u32(), flags: r.u32())
        guard bytes.count == BridgeHead.size + bodySize(type) else {
            return .failure(.malformed("\(type) of \(bytes.count) bytes (expected \(BridgeHead.size + bodySize(type)))"))
        }
        switch type {
        case .hello: return .success(.hello(head, rate: Rational(r.i32(), r.i32())))
        case .frame:
            let sent = r.u64()
            guard let record = FrameRecord(bytes: UnsafeRawBufferPointer(rebasing: bytes[r.at...])) else {
                return .failure(.malformed("frame \(head.sequence): its record is not valid (format, size or fields)"))
            }
            return .success(.frame(head, record: record, sentNanos: sent))
        case .end: return .success(.end(head))
        case .credit: return .success(.credit(head))
        case .ping: return .success(.ping(head, nanos: r.u64()))
        case .pong: return .success(.pong(head, nanos: r.u64()))
        }
    }

    /// The first part's bytes.
    public var bytes: [UInt8] {
        var w = ByteWriter()
        head.write(&w)
        switch self {
        case .hello(_, let rate): w.i32(rate.num); w.i32(rate.den)
        case .frame(_, let record, let sent): w.u64(sent); w.bytes += record.bytes
        case .end, .credit: break
        case .ping(_, let n), .pong(_, let n): w.u64(n)
        }
        return w.bytes
    }
}

public enum BridgeWireError: Error, Sendable, CustomStringConvertible {
    case malformed(String)
    public var description: String {
        switch self { case .malformed(let why): why }
    }
}

/// A frame's planes on the wire: plane after plane, each row `rowBytes` long (no padding).
public enum WirePlanes {
    /// The bytes of plane `i` of `format` on the wire, or nil when the product overflows.
    public static func size(_ format: FrameFormat, plane i: Int) -> Int? {
        let (n, o) = format.rowBytes(plane: i).multipliedReportingOverflow(by: format.rows(plane: i))
        return o || n < 0 ? nil : n
    }
}
