import CFFmpeg
import FrameServer

/// One frame encoded for a transport (`framesrv bridge --codec`): its record (packing
/// `.codec`, or `.raw` when the codec does not take the format), the packet's bytes, and
/// the encoder's parameters (FFV1's extradata) that a decoder needs.
public struct EncodedPacket: Sendable {
    public var record: FrameRecord
    public var bytes: [UInt8]
    public var extradata: [UInt8]
}

/// TrackEncoder for a transport: frames in, packets as bytes out (no FFmpeg pointer leaves).
public final class PacketEncoder {
    private let encoder: TrackEncoder

    public init(codec: RecordingCodec, rate: Rational?) {
        encoder = TrackEncoder(codec: codec)
        encoder.rate = rate
    }

    /// Encodes `frame` (described by `record`); the packets ready, in order.
    public func encode(_ frame: borrowing Frame, record: FrameRecord) throws(RecordingError) -> [EncodedPacket] {
        try encoder.encode(frame, record: record).map(take)
    }

    /// The packets still inside the encoder, at the end.
    public func flush() throws(RecordingError) -> [EncodedPacket] { try encoder.flush().map(take) }

    private func take(_ e: EncodedFrame) -> EncodedPacket {
        var p = e.packet
        defer { av_packet_free(&p) }
        let bytes = p.map { Array(UnsafeBufferPointer(start: $0.pointee.data, count: Int($0.pointee.size))) } ?? []
        return EncodedPacket(record: e.record, bytes: bytes, extradata: e.record.packing == .codec ? encoder.extradata : [])
    }
}

/// TrackDecoder for a transport: packets (bytes and record) in, frames out.
public final class PacketDecoder {
    private let decoder: TrackDecoder
    /// Packets that did not decode, or frames that did not match their record.
    public private(set) var errors = 0

    public init(codec: RecordingCodec) {
        decoder = TrackDecoder(codecID: codec.codecID, extradata: [], threads: 0)
    }

    /// Decodes one packet; the frames that came out (each copied into a slot with `copy(into:)`).
    public func decode(_ bytes: UnsafeRawBufferPointer, record: FrameRecord, extradata: UnsafeRawBufferPointer) -> [ReadFrame] {
        guard bytes.count > 0, bytes.count < Int(Int32.max) - 64, let p = av_packet_alloc() else {
            errors += 1
            return []
        }
        defer { var q: UnsafeMutablePointer<AVPacket>? = p; av_packet_free(&q) }
        guard av_new_packet(p, Int32(bytes.count)) >= 0 else { errors += 1; return [] }
        p.pointee.data.update(from: bytes.bindMemory(to: UInt8.self).baseAddress!, count: bytes.count)
        if extradata.count > 0, extradata.count < 1 << 20,
           let side = av_packet_new_side_data(p, AV_PKT_DATA_NEW_EXTRADATA, extradata.count) {
            side.update(from: extradata.bindMemory(to: UInt8.self).baseAddress!, count: extradata.count)
        }
        p.pointee.flags |= AV_PKT_FLAG_KEY
        return decoder.decode(p, record: record, track: 0, errors: &errors)
    }
}
