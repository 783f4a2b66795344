// PROTOCOL.md 4.6, Audio streams: what a stream carries (`fs_control.media`), the sample
// formats (FS_SAMPLE_*), channel layouts, and an audio frame's layout in its slot.

import CFrameServer

/// What a stream's frames are (`fs_control.media`, `fs_frame.media`): fixed for the stream's life.
public enum MediaKind: UInt32, Sendable, CustomStringConvertible {
    case video = 0
    case audio = 1

    public var description: String { self == .video ? "video" : "audio" }
}

/// A sample format (`fs_frame.pix_fmt` of an audio frame, FS_SAMPLE_*): protocol codes,
/// not AVSampleFormat values; `name` is FFmpeg's. A planar format keeps each channel's
/// samples in a row of its own; a packed one interleaves them in one row.
public enum SampleFormat: UInt32, Sendable, CaseIterable, CustomStringConvertible {
    case u8 = 1, s16 = 2, s32 = 3, flt = 4, dbl = 5
    case u8p = 6, s16p = 7, s32p = 8, fltp = 9, dblp = 10
    case s64 = 11, s64p = 12

    /// FFmpeg's name (`av_get_sample_fmt_name`).
    public var name: String {
        switch self {
        case .u8: "u8"; case .s16: "s16"; case .s32: "s32"; case .flt: "flt"; case .dbl: "dbl"
        case .u8p: "u8p"; case .s16p: "s16p"; case .s32p: "s32p"; case .fltp: "fltp"; case .dblp: "dblp"
        case .s64: "s64"; case .s64p: "s64p"
        }
    }
    public var description: String { name }

    /// The format FFmpeg calls `name`, nil for any other name.
    public init?(name: String) {
        guard let f = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = f
    }

    public var isPlanar: Bool { (6...10).contains(rawValue) || self == .s64p }

    /// Bytes of one sample of one channel.
    public var bytesPerSample: Int {
        switch self {
        case .u8, .u8p: 1
        case .s16, .s16p: 2
        case .s32, .s32p, .flt, .fltp: 4
        case .dbl, .dblp, .s64, .s64p: 8
        }
    }
}

/// The order and meaning of a frame's channels (`channel_order`, `channel_mask`): FFmpeg's
/// AVChannelLayout for the orders that travel (unspecified, native with a mask, ambisonic).
public struct ChannelLayout: Sendable, Equatable, CustomStringConvertible {
    /// FS_CHANNEL_ORDER_*.
    public var order: UInt32
    /// AV_CH_* bits for the native order (one per channel), 0 otherwise.
    public var mask: UInt64
    public var channels: Int

    public init(order: UInt32, mask: UInt64, channels: Int) {
        self.order = order; self.mask = mask; self.channels = channels
    }

    /// `channels` channels whose meaning is not known (FFmpeg's AV_CHANNEL_ORDER_UNSPEC).
    public static func unspecified(_ channels: Int) -> ChannelLayout {
        ChannelLayout(order: FS_CHANNEL_ORDER_UNSPEC, mask: 0, channels: channels)
    }

    /// Native order: one AV_CH_* bit of `mask` per channel.
    public static func native(mask: UInt64, channels: Int) -> ChannelLayout {
        ChannelLayout(order: FS_CHANNEL_ORDER_NATIVE, mask: mask, channels: channels)
    }
    /// `channels` ambisonic components.
    public static func ambisonic(_ channels: Int) -> ChannelLayout {
        ChannelLayout(order: FS_CHANNEL_ORDER_AMBISONIC, mask: 0, channels: channels)
    }
    /// Whether the order is FFmpeg's native one (a mask of AV_CH_* bits).
    public var isNative: Bool { order == FS_CHANNEL_ORDER_NATIVE }

    public static let mono = ChannelLayout(order: FS_CHANNEL_ORDER_NATIVE, mask: 0x4, channels: 1)
    public static let stereo = ChannelLayout(order: FS_CHANNEL_ORDER_NATIVE, mask: 0x3, channels: 2)

    /// The checks of PROTOCOL.md 4.6: 1..64 channels; native: the mask has one bit per
    /// channel; unspecified and ambisonic: mask 0. nil when they hold, else what is wrong.
    public var problem: String? {
        guard (1...Int(FS_MAX_CHANNELS)).contains(channels) else { return "channels \(channels), expected 1..\(FS_MAX_CHANNELS)" }
        switch order {
        case FS_CHANNEL_ORDER_NATIVE:
            return mask.nonzeroBitCount == channels ? nil : "channel_mask 0x\(String(mask, radix: 16)) has \(mask.nonzeroBitCount) channels, the frame \(channels)"
        case FS_CHANNEL_ORDER_UNSPEC, FS_CHANNEL_ORDER_AMBISONIC:
            return mask == 0 ? nil : "channel_mask 0x\(String(mask, radix: 16)) with channel_order \(order), expected 0"
        default:
            return "channel_order \(order), expected \(FS_CHANNEL_ORDER_UNSPEC), \(FS_CHANNEL_ORDER_NATIVE) or \(FS_CHANNEL_ORDER_AMBISONIC)"
        }
    }

    public var description: String {
        switch (order, mask) {
        case (FS_CHANNEL_ORDER_NATIVE, 0x4): "mono"
        case (FS_CHANNEL_ORDER_NATIVE, 0x3): "stereo"
        case (FS_CHANNEL_ORDER_NATIVE, 0x60F): "5.1"
        case (FS_CHANNEL_ORDER_NATIVE, 0x3F): "5.1(back)"
        case (FS_CHANNEL_ORDER_NATIVE, _): "\(channels) channels (0x\(String(mask, radix: 16)))"
        case (FS_CHANNEL_ORDER_AMBISONIC, _): "ambisonic \(channels)"
        default: "\(channels) channels"
        }
    }
}

/// An audio frame's format: sample format, rate, layout and sample count, with the one
/// plane framesrv lays it out in (PROTOCOL.md 4.6): packed, one row of `samples x channels`
/// samples; planar, one row per channel of `samples` samples, rows `stride` bytes apart.
public struct AudioFormat: Sendable, Equatable, CustomStringConvertible {
    public var sampleFormat: SampleFormat
    public var sampleRate: Int
    public var layout: ChannelLayout
    /// Samples per channel in the frame (`nb_samples`).
    public var samples: Int

    public init(_ sampleFormat: SampleFormat, sampleRate: Int, layout: ChannelLayout, samples: Int) {
        self.sampleFormat = sampleFormat; self.sampleRate = sampleRate; self.layout = layout; self.samples = samples
    }

    public var channels: Int { layout.channels }
    public var description: String { "\(sampleRate) Hz \(layout) \(sampleFormat.name), \(samples) samples" }

    /// Rows of the plane: one per channel when planar, else one.
    public var rows: Int { sampleFormat.isPlanar ? channels : 1 }
    /// Bytes of each row that carry samples. Checked: nil when it overflows.
    public var rowBytes: Int? {
        let perRow = sampleFormat.isPlanar ? 1 : channels
        let (a, o1) = samples.multipliedReportingOverflow(by: perRow)
        let (b, o2) = a.multipliedReportingOverflow(by: sampleFormat.bytesPerSample)
        return o1 || o2 ? nil : b
    }
    /// The row pitch: row bytes rounded up to `FrameFormat.strideAlignment`.
    public var stride: Int {
        let a = FrameFormat.strideAlignment
        return ((rowBytes ?? 0) + a - 1) / a * a
    }
    /// Bytes a slot needs for this frame, header included.
    public var slotBytes: Int { FrameFormat.headerSize + stride * rows }

    /// Checks what a pool can hold (PROTOCOL.md 4.6's limits).
    public func validate() throws(ProducerError) {
        if let problem = Self.problem(rate: sampleRate, samples: samples, layout: layout) { throw .audioFormat(problem) }
    }

    /// The limits of 4.6, as one line; nil when they hold.
    public static func problem(rate: Int, samples: Int, layout: ChannelLayout) -> String? {
        if let p = layout.problem { return p }
        guard (1...Int(FS_MAX_SAMPLE_RATE)).contains(rate) else { return "sample_rate \(rate), expected 1..\(FS_MAX_SAMPLE_RATE)" }
        guard (1...Int(FS_MAX_SAMPLES)).contains(samples) else { return "nb_samples \(samples), expected 1..\(FS_MAX_SAMPLES)" }
        return nil
    }
}

extension fs_frame {
    /// Fills a header for an audio frame of `format` with `description`'s timing and flags
    /// (PROTOCOL.md 4.6): width and height 0, the sample format in `pix_fmt` and its name,
    /// one plane of `rows` rows at `stride`.
    init(audio format: AudioFormat, description d: FrameDescription) {
        self.init()
        magic = FS_MAGIC_FRAME
        version = FS_PROTOCOL_VERSION
        media = FS_MEDIA_AUDIO
        pix_fmt = format.sampleFormat.rawValue
        plane_count = 1
        plane_offset.0 = UInt32(FrameFormat.headerSize)
        plane_stride.0 = UInt32(format.stride)
        plane_size.0 = UInt32(format.stride * format.rows)
        payload_size = plane_size.0
        sample_rate = UInt32(format.sampleRate)
        channels = UInt32(format.channels)
        channel_order = format.layout.order
        channel_mask = format.layout.mask
        nb_samples = UInt32(format.samples)
        pts = d.pts ?? Int64.min
        time_base_num = d.timeBase.num
        time_base_den = d.timeBase.den
        duration = d.duration
        flags = d.flags.rawValue
        let name = Array(format.sampleFormat.name.utf8)
        withUnsafeMutableBytes(of: &pix_fmt_name) { b in
            for (i, c) in name.enumerated() { b[i] = c }
        }
    }
}

/// Where an audio frame's rows lie in its slot when a decoder wrote them there (its
/// `get_buffer2`) rather than at 4.6's canonical place: the first row's offset from the
/// slot's start and the distance between rows (one row per channel when planar).
public struct AudioRows: Sendable, Equatable {
    public var offset: Int
    public var stride: Int

    public init(offset: Int, stride: Int) { self.offset = offset; self.stride = stride }

    /// The plane's bytes in the header: `stride` x rows (PROTOCOL.md 4.2).
    func planeBytes(_ format: AudioFormat) -> Int? {
        let (bytes, o) = stride.multipliedReportingOverflow(by: format.rows)
        return o ? nil : bytes
    }

    /// Whether `format`'s rows, laid out this way, lie after the header and within `bytes`
    /// of slot, `stride` a multiple of 64 (4.6), and fit the header's 32-bit fields.
    public func fit(_ format: AudioFormat, in bytes: Int) -> Bool {
        guard let rowBytes = format.rowBytes, let plane = planeBytes(format), offset >= FrameFormat.headerSize,
              stride >= rowBytes, stride % FrameFormat.strideAlignment == 0, stride <= Int(UInt32.max),
              plane <= Int(UInt32.max) else { return false }
        let (end, o) = offset.addingReportingOverflow(plane)
        return !o && end <= bytes
    }
}

extension fs_frame {
    /// Points the header's one plane at `rows` (checked by the caller with `AudioRows.fit`).
    mutating func setRows(_ rows: AudioRows, format: AudioFormat) {
        plane_offset.0 = UInt32(rows.offset)
        plane_stride.0 = UInt32(rows.stride)
        plane_size.0 = UInt32(rows.planeBytes(format) ?? 0)
        payload_size = UInt32(rows.offset + Int(plane_size.0) - FrameFormat.headerSize)   // 4.2: the plane's end - 256
    }
}

extension FrameHeader {
    /// What the frame is (`fs_frame.media`).
    public var media: MediaKind? { MediaKind(rawValue: raw.media) }

    /// An audio frame's format (validated headers only), nil for a video frame.
    public var audioFormat: AudioFormat? {
        guard raw.media == FS_MEDIA_AUDIO, let sampleFormat = SampleFormat(rawValue: raw.pix_fmt) else { return nil }
        return AudioFormat(sampleFormat, sampleRate: Int(raw.sample_rate),
                           layout: ChannelLayout(order: raw.channel_order, mask: raw.channel_mask, channels: Int(raw.channels)),
                           samples: Int(raw.nb_samples))
    }

    /// The checks of an audio frame's own fields (PROTOCOL.md 4.6), after the plane bounds:
    /// width and height 0, one plane, a known sample format whose name matches, the limits
    /// of rate, channels, layout and samples, and a plane whose rows (one per channel when
    /// planar) of `rowBytes` fit at its stride, every product overflow-checked.
    func checkAudio() throws(FrameHeaderError) {
        guard raw.width == 0, raw.height == 0 else {
            throw .badField(field: raw.width != 0 ? "width" : "height", value: Int64(raw.width | raw.height), expected: "0 in an audio frame")
        }
        guard let sampleFormat = SampleFormat(rawValue: raw.pix_fmt) else {
            throw .badField(field: "pix_fmt", value: Int64(raw.pix_fmt), expected: "a sample format code 1..\(FS_SAMPLE_MAX)")
        }
        let name = pixelFormatName
        guard name.isEmpty || name == sampleFormat.name else {
            throw .badField(field: "pix_fmt", value: Int64(raw.pix_fmt), expected: "the code of sample format '\(name.prefix(31))'")
        }
        guard let format = audioFormat else { throw .badField(field: "media", value: Int64(raw.media), expected: "\(FS_MEDIA_AUDIO)") }
        if let problem = AudioFormat.problem(rate: format.sampleRate, samples: format.samples, layout: format.layout) {
            throw .badField(field: "audio", value: Int64(raw.channels), expected: problem)
        }
        guard planeCount == 1 else { throw .badField(field: "plane_count", value: Int64(planeCount), expected: "1 in an audio frame") }
        guard let rowBytes = format.rowBytes, plane(0, holds: format.rows, rowBytes: rowBytes) else {
            throw .badField(field: "plane_size[0]", value: Int64(size(plane: 0)),
                            expected: "a stride and size that hold \(format.rows) rows of \(format.samples) samples (\(format))")
        }
    }
}
