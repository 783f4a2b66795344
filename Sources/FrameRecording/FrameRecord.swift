import FrameServer

/// One recorded frame's header: every `fs_frame` field a replay restores, stored with the
/// frame's packet (NUT side data `CodecSpecificSide1`, libavformat's
/// AV_PKT_DATA_MATROSKA_BLOCKADDITIONAL with BlockAddID 1). The byte layout is
/// docs/RECORDING.md's "Frame record" table, little-endian: a video frame's record is
/// version 1, 112 bytes; an audio frame's is version 2, 136 bytes (the same fields, then
/// the sample rate, channels, channel order, sample count and channel mask).
public struct FrameRecord: Sendable, Equatable {
    /// How the packet's bytes hold the pixels.
    public enum Packing: UInt8, Sendable {
        /// Encoded with the track's codec (FFV1 or H.264).
        case codec = 0
        /// The planes tightly packed, plane after plane (ffmpeg's rawvideo layout).
        case raw = 1
    }

    public static let magic: UInt32 = 0x4652_5346   // "FSRF"
    /// A video frame's record version (and the bridge's wire record).
    public static let version: UInt16 = 1
    public static let size = 112
    /// An audio frame's record version and size (version 2 added audio).
    public static let audioVersion: UInt16 = 2
    public static let audioSize = 136

    public var packing: Packing = .codec
    public var description = FrameDescription()
    /// Nanoseconds from the recording's first frame (over every stream) to this frame's capture.
    public var captureOffsetNanos: Int64 = 0
    public var sequence: UInt64 = 0
    public var epoch: UInt64 = 0
    /// A video frame's format (an audio frame's record holds `noPicture` here).
    public var format: FrameFormat
    /// An audio frame's format; nil for a video frame.
    public var audio: AudioFormat?

    public init(format: FrameFormat) { self.format = format }

    public init(audio: AudioFormat) {
        self.format = Self.noPicture
        self.audio = audio
    }

    /// What an audio frame's record holds as its picture format: none (0x0).
    public static let noPicture = FrameFormat(.yuv420p, width: 0, height: 0)

    /// What the frame is.
    public var media: MediaKind { audio == nil ? .video : .audio }

    /// The 112 bytes of a video frame's record, the 136 of an audio frame's.
    public var bytes: [UInt8] {
        var w = ByteWriter()
        let d = description
        w.u32(Self.magic); w.u16(audio == nil ? Self.version : Self.audioVersion); w.u8(packing.rawValue); w.u8(0)
        w.i64(d.pts ?? Int64.min); w.i32(d.timeBase.num); w.i32(d.timeBase.den)
        w.i64(d.duration); w.i64(captureOffsetNanos); w.u64(sequence); w.u64(epoch)
        w.u32(d.flags.rawValue)
        w.u32(d.color.matrix); w.u32(d.color.range); w.u32(d.color.primaries); w.u32(d.color.transfer)
        w.i32(d.sampleAspectRatio.num); w.i32(d.sampleAspectRatio.den)
        w.u32(d.fieldOrder.rawValue); w.u32(d.chromaLocation.rawValue); w.u32(d.sourceDropped)
        guard let a = audio else {
            w.u32(UInt32(format.width)); w.u32(UInt32(format.height)); w.u32(format.pixelFormat.rawValue); w.u32(0)
            return w.bytes
        }
        w.u32(0); w.u32(0); w.u32(a.sampleFormat.rawValue); w.u32(0)
        w.u32(UInt32(a.sampleRate)); w.u32(UInt32(a.channels)); w.u32(a.layout.order); w.u32(UInt32(a.samples))
        w.u64(a.layout.mask)
        return w.bytes
    }

    /// Reads a record (video, or with `audio` an audio frame's too); nil when the bytes are
    /// not one (wrong magic, version, size or values: an audio format outside PROTOCOL.md 4.6's limits).
    public init?(bytes: UnsafeRawBufferPointer, audio allowAudio: Bool = false) {
        var r = ByteReader(bytes)
        guard bytes.count >= Self.size, r.u32() == Self.magic else { return nil }
        let version = r.u16()
        let isAudio = allowAudio && version == Self.audioVersion
        guard version == Self.version || isAudio, !isAudio || bytes.count >= Self.audioSize,
              let packing = Packing(rawValue: r.u8()) else { return nil }
        _ = r.u8()
        var d = FrameDescription()
        let pts = r.i64()
        d.pts = pts == Int64.min ? nil : pts
        d.timeBase = Rational(r.i32(), r.i32())
        d.duration = r.i64()
        let offset = r.i64(), sequence = r.u64(), epoch = r.u64()
        d.flags = FrameFlags(rawValue: r.u32())
        d.color = ColorDescription(matrix: r.u32(), range: r.u32(), primaries: r.u32(), transfer: r.u32())
        d.sampleAspectRatio = Rational(r.i32(), r.i32())
        guard let field = FieldOrder(rawValue: r.u32()), let chroma = ChromaLocation(rawValue: r.u32()) else { return nil }
        d.fieldOrder = field
        d.chromaLocation = chroma
        d.sourceDropped = r.u32()
        let width = Int(r.u32()), height = Int(r.u32())
        if isAudio {
            guard width == 0, height == 0, let sampleFormat = SampleFormat(rawValue: r.u32()) else { return nil }
            _ = r.u32()
            let rate = Int(r.u32()), channels = Int(r.u32()), order = r.u32(), samples = Int(r.u32()), mask = r.u64()
            let audio = AudioFormat(sampleFormat, sampleRate: rate, layout: ChannelLayout(order: order, mask: mask, channels: channels), samples: samples)
            guard (try? audio.validate()) != nil else { return nil }
            self.format = Self.noPicture
            self.audio = audio
        } else {
            guard let pixelFormat = PixelFormat(rawValue: r.u32()) else { return nil }
            let format = FrameFormat(pixelFormat, width: width, height: height)
            guard (try? format.validate()) != nil else { return nil }
            self.format = format
        }
        self.packing = packing
        self.description = d
        self.captureOffsetNanos = offset
        self.sequence = sequence
        self.epoch = epoch
    }
}

/// Little-endian writes into a growing array (the frame record's, and the bridge's messages).
public struct ByteWriter {
    public var bytes: [UInt8] = []
    public init() { bytes.reserveCapacity(FrameRecord.size) }
    public mutating func u8(_ v: UInt8) { bytes.append(v) }
    public mutating func u16(_ v: UInt16) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
    public mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
    public mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
    public mutating func i32(_ v: Int32) { u32(UInt32(bitPattern: v)) }
    public mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }
}

/// Little-endian reads from a buffer the caller has checked is long enough.
public struct ByteReader {
    public let buffer: UnsafeRawBufferPointer
    public var at = 0
    public init(_ buffer: UnsafeRawBufferPointer) { self.buffer = buffer }
    public mutating func u8() -> UInt8 { defer { at += 1 }; return buffer[at] }
    public mutating func u16() -> UInt16 { UInt16(u8()) | UInt16(u8()) << 8 }
    public mutating func u32() -> UInt32 { UInt32(u16()) | UInt32(u16()) << 16 }
    public mutating func u64() -> UInt64 { UInt64(u32()) | UInt64(u32()) << 32 }
    public mutating func i32() -> Int32 { Int32(bitPattern: u32()) }
    public mutating func i64() -> Int64 { Int64(bitPattern: u64()) }
}
