import CFrameServer

/// A rational number, as FFmpeg's AVRational (time bases, aspect ratios).
public struct Rational: Sendable, Equatable, Hashable, Codable, CustomStringConvertible {
    public var num: Int32, den: Int32
    public init(_ num: Int32, _ den: Int32) { self.num = num; self.den = den }
    public var description: String { "\(num)/\(den)" }

    /// `num/den` in lowest terms; nil when den is 0 or the reduced fraction does not fit Int32.
    public init?(reducing num: UInt64, _ den: UInt64) {
        guard den != 0 else { return nil }
        var (a, b) = (num, den)
        while b != 0 { (a, b) = (b, a % b) }
        let (n, d) = (num / a, den / a)
        guard n <= UInt64(Int32.max), d <= UInt64(Int32.max) else { return nil }
        self.init(Int32(n), Int32(d))
    }

    /// A nominal frame rate as `fs_control` stores it (64-bit num/den): exact when it fits
    /// Int32 after reducing (every rate framesrv and FFmpeg write does), otherwise the
    /// closest fraction of Int32s, as FFmpeg's `av_reduce(..., INT32_MAX)`. nil for 0/0.
    public init?(rate num: UInt64, _ den: UInt64) {
        guard num != 0, den != 0 else { return nil }
        if let exact = Rational(reducing: num, den) { self = exact; return }
        self = Rational.closest(to: num, den, limit: UInt64(Int32.max))
    }

    /// A rate given as a decimal, as FFmpeg's `av_d2q(fps, 1001000)` reads it: 29.97 is
    /// 2997/100, 23.976 is 2997/125, 30 is 30/1. nil unless 0 < fps <= 1e6.
    public init?(framesPerSecond fps: Double) {
        guard fps.isFinite, fps > 0, fps <= 1e6 else { return nil }
        let scale = 1 << 32 as UInt64
        self = Rational.closest(to: UInt64((fps * Double(scale)).rounded()), scale, limit: 1_001_000)
    }

    /// Best approximation of num/den with both terms <= limit (continued fractions).
    private static func closest(to num: UInt64, _ den: UInt64, limit: UInt64) -> Rational {
        var (a, b) = (num, den)
        var (p0, q0, p1, q1): (UInt64, UInt64, UInt64, UInt64) = (0, 1, 1, 0)
        while b != 0 {
            let t = a / b
            let (p2, o1) = t.multipliedReportingOverflow(by: p1)
            let (q2, o2) = t.multipliedReportingOverflow(by: q1)
            guard !o1, !o2, p2 <= limit, q2 <= limit, p2 + p0 <= limit, q2 + q0 <= limit else { break }
            (p0, q0, p1, q1) = (p1, q1, p2 + p0, q2 + q0)
            (a, b) = (b, a % b)
        }
        if q1 == 0 { return Rational(Int32.max, 1) }
        return Rational(Int32(p1), Int32(max(q1, 1)))
    }

    /// num/den as a Double (0 when den is 0).
    public var doubleValue: Double { den == 0 ? 0 : Double(num) / Double(den) }
}

/// How a frame's two fields are ordered (FFmpeg's AVFieldOrder, `fs_frame.field_order`).
public enum FieldOrder: UInt32, Sendable {
    case unknown = 0, progressive = 1
    /// Top field first (coded and shown).
    case topFirst = 2
    /// Bottom field first (coded and shown).
    case bottomFirst = 3
    /// Top coded first, bottom shown first.
    case topCodedBottomShown = 4
    /// Bottom coded first, top shown first.
    case bottomCodedTopShown = 5

    /// Whether the frame is interlaced (two fields), as FFmpeg's `interlaced_frame`.
    public var isInterlaced: Bool { rawValue >= 2 }
    /// An AVFrame's `top_field_first` for this order, as FFmpeg pairs them: TT and TB are
    /// top first, BB and BT bottom first (ffmpeg gives a top-first frame's encoder TB, and
    /// yuv4mpegenc writes TB as `It`).
    public var topFieldFirst: Bool { self == .topFirst || self == .topCodedBottomShown }
}

/// Where chroma samples sit relative to luma (FFmpeg's AVChromaLocation, `fs_frame.chroma_location`).
public enum ChromaLocation: UInt32, Sendable {
    case unspecified = 0, left = 1, center = 2, topLeft = 3, top = 4, bottomLeft = 5, bottom = 6
}

/// Per-frame flags (FS_FRAME_* in CFrameServer.h).
public struct FrameFlags: OptionSet, Sendable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let keyframe = FrameFlags(rawValue: FS_FRAME_KEY)
    public static let endOfStream = FrameFlags(rawValue: FS_FRAME_END_OF_STREAM)
    public static let discontinuity = FrameFlags(rawValue: FS_FRAME_DISCONTINUITY)
}

/// Colour description, as ITU-T H.273 code points (the values FFmpeg uses).
public struct ColorDescription: Sendable, Equatable {
    /// MatrixCoefficients: 0 RGB, 1 BT.709, 2 unspecified, 5/6 BT.601, 9 BT.2020.
    public var matrix: UInt32
    /// 0 unspecified, 1 limited (tv), 2 full (pc).
    public var range: UInt32
    public var primaries: UInt32
    public var transfer: UInt32

    public init(matrix: UInt32 = FS_MATRIX_UNSPECIFIED, range: UInt32 = FS_RANGE_UNSPECIFIED,
                primaries: UInt32 = 2, transfer: UInt32 = 2) {
        self.matrix = matrix; self.range = range; self.primaries = primaries; self.transfer = transfer
    }

    public static let bt601Limited = ColorDescription(matrix: FS_MATRIX_SMPTE170M, range: FS_RANGE_LIMITED, primaries: 6, transfer: 6)
    public static let bt709Limited = ColorDescription(matrix: FS_MATRIX_BT709, range: FS_RANGE_LIMITED, primaries: 1, transfer: 1)
    public static let bt2020Limited = ColorDescription(matrix: FS_MATRIX_BT2020_NCL, range: FS_RANGE_LIMITED, primaries: 9, transfer: 14)

    public var matrixName: String {
        switch matrix {
        case 0: "rgb"; case 1: "bt709"; case 2: "unknown"; case 5: "bt470bg"; case 6: "smpte170m"
        case 9: "bt2020nc"; case 10: "bt2020c"; default: "matrix\(matrix)"
        }
    }
    public var rangeName: String {
        switch range { case 1: "tv"; case 2: "pc"; default: "unknown" }
    }
}

/// Everything a frame header says besides its plane layout.
public struct FrameDescription: Sendable, Equatable {
    public var color = ColorDescription()
    public var sampleAspectRatio = Rational(0, 1)
    /// Presentation timestamp in `timeBase` units, nil if unknown.
    public var pts: Int64? = nil
    public var timeBase = Rational(1, 1_000_000)
    /// Duration in `timeBase` units, 0 if unknown.
    public var duration: Int64 = 0
    /// The producer's CLOCK_MONOTONIC time at capture or decode, in ns.
    public var captureNanos: UInt64 = 0
    public var flags: FrameFlags = []
    public var fieldOrder: FieldOrder = .unknown
    public var chromaLocation: ChromaLocation = .unspecified
    /// Frames a live source dropped just before this one (`fs_frame.source_dropped`);
    /// non-zero only with `.discontinuity`. A producer adds its own drops to this count.
    public var sourceDropped: UInt32 = 0

    public init() {}
}

/// A frame header as read from a slot: layout plus description.
///
/// A copy of the slot's 256-byte `fs_frame`; its accessors decode fields on demand, so
/// taking a header allocates nothing.
public struct FrameHeader: Sendable {
    let raw: fs_frame

    init(_ raw: fs_frame) { self.raw = raw }

    /// The header of a frame of `format` in its canonical layout (PROTOCOL.md 4.2: the planes
    /// one after another from byte 256, each row `FrameFormat.stride`), with `d`'s fields: for
    /// a copy of a frame laid out that way in memory of the caller's (a CUDA frame's planes
    /// downloaded for a preview).
    public init(canonical format: FrameFormat, description d: FrameDescription) {
        raw = fs_frame(seq: 0, epoch: 0, format: format, description: d)
    }

    public var sequence: UInt64 { raw.seq }
    public var epoch: UInt64 { raw.epoch }
    public var width: Int { Int(raw.width) }
    public var height: Int { Int(raw.height) }
    /// nil when the producer used a format this build has no code for (see `pixelFormatName`).
    public var pixelFormat: PixelFormat? { raw.media == FS_MEDIA_VIDEO ? PixelFormat(rawValue: raw.pix_fmt) : nil }
    /// FFmpeg's name for the pixel format, as the producer wrote it.
    public var pixelFormatName: String {
        withUnsafeBytes(of: raw.pix_fmt_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
    public var planeCount: Int { Int(min(raw.plane_count, FS_MAX_PLANES)) }
    public var flags: FrameFlags { FrameFlags(rawValue: raw.flags) }
    public var captureNanos: UInt64 { raw.capture_ns }
    /// Frames a live source dropped just before this one (0 unless `.discontinuity`).
    public var sourceDropped: UInt32 { raw.source_dropped }
    public var magic: UInt32 { raw.magic }
    public var version: UInt32 { raw.version }

    /// The frame's format, when its pixel format is one this build knows (nil for sound).
    public var format: FrameFormat? { pixelFormat.map { FrameFormat($0, width: width, height: height) } }

    public func offset(plane i: Int) -> Int { Self.pick(raw.plane_offset, i) }
    public func stride(plane i: Int) -> Int { Self.pick(raw.plane_stride, i) }
    public func size(plane i: Int) -> Int { Self.pick(raw.plane_size, i) }

    /// Timestamps, colour and flags.
    public var description: FrameDescription {
        var d = FrameDescription()
        d.color = ColorDescription(matrix: raw.color_matrix, range: raw.color_range,
                                   primaries: raw.color_primaries, transfer: raw.color_transfer)
        d.sampleAspectRatio = Rational(raw.sar_num, raw.sar_den)
        d.pts = raw.pts == Int64.min ? nil : raw.pts
        d.timeBase = Rational(raw.time_base_num, raw.time_base_den)
        d.duration = raw.duration
        d.captureNanos = raw.capture_ns
        d.flags = FrameFlags(rawValue: raw.flags)
        d.fieldOrder = FieldOrder(rawValue: raw.field_order) ?? .unknown
        d.chromaLocation = ChromaLocation(rawValue: raw.chroma_location) ?? .unspecified
        d.sourceDropped = raw.source_dropped
        return d
    }

    private static func pick(_ t: (UInt32, UInt32, UInt32, UInt32), _ i: Int) -> Int {
        switch i { case 0: Int(t.0); case 1: Int(t.1); case 2: Int(t.2); default: Int(t.3) }
    }
}

extension fs_frame {
    /// Fills a header for `format` with `description`, as the producer writes it into a slot.
    init(seq: UInt64, epoch: UInt64, format: FrameFormat, description d: FrameDescription) {
        self.init()
        magic = FS_MAGIC_FRAME
        version = FS_PROTOCOL_VERSION
        self.seq = seq
        self.epoch = epoch
        width = UInt32(format.width)
        height = UInt32(format.height)
        pix_fmt = format.pixelFormat.rawValue
        let planes = format.pixelFormat.planes.count
        plane_count = UInt32(planes)
        let offsets = format.planeOffsets()
        withUnsafeMutableBytes(of: &plane_offset) { o in
            withUnsafeMutableBytes(of: &plane_stride) { s in
                withUnsafeMutableBytes(of: &plane_size) { z in
                    for i in 0..<planes {
                        o.storeBytes(of: UInt32(offsets[i]), toByteOffset: i * 4, as: UInt32.self)
                        s.storeBytes(of: UInt32(format.stride(plane: i)), toByteOffset: i * 4, as: UInt32.self)
                        z.storeBytes(of: UInt32(format.stride(plane: i) * format.rows(plane: i)), toByteOffset: i * 4, as: UInt32.self)
                    }
                }
            }
        }
        color_matrix = d.color.matrix
        color_range = d.color.range
        color_primaries = d.color.primaries
        color_transfer = d.color.transfer
        sar_num = d.sampleAspectRatio.num
        sar_den = d.sampleAspectRatio.den
        pts = d.pts ?? Int64.min
        time_base_num = d.timeBase.num
        time_base_den = d.timeBase.den
        duration = d.duration
        capture_ns = d.captureNanos
        flags = d.flags.rawValue
        field_order = d.fieldOrder.rawValue
        chroma_location = d.chromaLocation.rawValue
        payload_size = UInt32(format.slotBytes - FrameFormat.headerSize)
        let name = Array(format.pixelFormat.name.utf8.prefix(31))
        withUnsafeMutableBytes(of: &pix_fmt_name) { b in
            for (i, c) in name.enumerated() { b[i] = c }
        }
    }
}

extension fs_frame {
    /// Replaces the canonical plane layout with `layout` (which must fit the slot).
    mutating func setLayout(_ layout: PlaneLayout, format: FrameFormat) {
        let planes = format.pixelFormat.planes.count
        var end = 0
        withUnsafeMutableBytes(of: &plane_offset) { o in
            withUnsafeMutableBytes(of: &plane_stride) { s in
                withUnsafeMutableBytes(of: &plane_size) { z in
                    for i in 0..<planes {
                        let size = layout.strides[i] * format.rows(plane: i)
                        o.storeBytes(of: UInt32(layout.offsets[i]), toByteOffset: i * 4, as: UInt32.self)
                        s.storeBytes(of: UInt32(layout.strides[i]), toByteOffset: i * 4, as: UInt32.self)
                        z.storeBytes(of: UInt32(size), toByteOffset: i * 4, as: UInt32.self)
                        end = max(end, layout.offsets[i] + size)
                    }
                }
            }
        }
        payload_size = UInt32(end - FrameFormat.headerSize)
    }
}
