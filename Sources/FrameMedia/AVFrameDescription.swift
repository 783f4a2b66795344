import CFFmpeg
import FrameServer

// The one home of what an AVFrame says of itself in framesrv's terms (decoder and filter
// graph), of libswscale's colourspace for a matrix, and of time base conversions.

extension ColorDescription {
    /// An AVFrame's colour fields as they are.
    init(_ f: AVFrame) {
        self.init(matrix: UInt32(f.colorspace.rawValue), range: UInt32(f.color_range.rawValue),
                  primaries: UInt32(f.color_primaries.rawValue), transfer: UInt32(f.color_trc.rawValue))
    }

    /// libswscale's SWS_CS_* for this matrix (unspecified and others: its default, BT.601).
    var swsColorspace: Int32 {
        [1, 4, 5, 6, 7, 9, 10].contains(matrix) ? Int32(matrix) : SWS_CS_DEFAULT
    }
}

extension Rational {
    init(_ r: AVRational) { self.init(r.num, r.den) }
    var av: AVRational { AVRational(num: num, den: den) }
}

extension FrameDescription {
    /// An AVFrame's description: `color` (the caller's reading of the frame's colour),
    /// `pts` (nil for AV_NOPTS_VALUE) and `duration` in `timeBase`, the aspect ratio
    /// (0/1 when unknown), the key flag, the field order and chroma location (`chroma`
    /// when the frame leaves it unspecified); captured now.
    init(_ f: AVFrame, color: ColorDescription, pts: Int64, duration: Int64, timeBase: Rational, sampleAspectRatio: Rational,
         chroma: ChromaLocation = .unspecified) {
        self.init()
        self.color = color
        self.sampleAspectRatio = sampleAspectRatio.num > 0 && sampleAspectRatio.den > 0 ? sampleAspectRatio : Rational(0, 1)
        self.pts = pts == cffmpeg_nopts() ? nil : pts
        self.timeBase = timeBase
        self.duration = max(0, duration)
        captureNanos = monotonicNanos()
        flags = f.key_frame != 0 ? [.keyframe] : []
        fieldOrder = withUnsafePointer(to: f) { FieldOrder(frame: $0) }
        chromaLocation = ChromaLocation(rawValue: UInt32(f.chroma_location.rawValue)) ?? .unspecified
        if chromaLocation == .unspecified { chromaLocation = chroma }
    }

    /// Writes the field order and chroma location into `f` (what buffersrc and encoders read).
    func applyFields(to f: UnsafeMutablePointer<AVFrame>) {
        cffmpeg_frame_set_fields(f, fieldOrder.isInterlaced ? 1 : 0, fieldOrder.topFieldFirst ? 1 : 0)
        f.pointee.chroma_location = AVChromaLocation(rawValue: chromaLocation.rawValue)
    }
}

extension FieldOrder {
    /// A decoded or filtered frame's field order, as ffmpeg reads it: interlaced frames are
    /// top or bottom field first, the others progressive.
    init(frame f: UnsafePointer<AVFrame>) {
        guard cffmpeg_frame_interlaced(f) != 0 else { self = .progressive; return }
        self = cffmpeg_frame_top_field_first(f) != 0 ? .topFirst : .bottomFirst
    }

    /// The field order ffmpeg gives an encoder (and so its muxer) for frames of this order:
    /// interlaced as TB/BT (TT/BB for MJPEG), else progressive.
    func encoderFieldOrder(mjpeg: Bool) -> AVFieldOrder {
        guard isInterlaced else { return AV_FIELD_PROGRESSIVE }
        if mjpeg { return topFieldFirst ? AV_FIELD_TT : AV_FIELD_BB }
        return topFieldFirst ? AV_FIELD_TB : AV_FIELD_BT
    }
}

/// The first `count` planes' addresses as integers (CUdeviceptr values for a CUDA frame) and their
/// pitches: what libframesrv's framesrv_frame_write_on takes.
func avPlaneAddresses(_ frame: UnsafePointer<AVFrame>, count: Int) -> (planes: [UInt64], pitches: [Int]) {
    let planes = avPlanes(frame, count: count)
    return (planes.map { UInt64(UInt(bitPattern: $0.data)) }, planes.map(\.linesize))
}

/// An AVFrame's planes as framesrv walks them: each plane's first byte and line size (the
/// first `count` planes; a missing plane is nil).
func avPlanes(_ frame: UnsafePointer<AVFrame>, count: Int) -> [(data: UnsafeMutablePointer<UInt8>?, linesize: Int)] {
    withUnsafeBytes(of: frame.pointee.data) { d in
        withUnsafeBytes(of: frame.pointee.linesize) { l in
            let data = d.bindMemory(to: UnsafeMutablePointer<UInt8>?.self), lines = l.bindMemory(to: Int32.self)
            return (0..<min(count, data.count)).map { (data[$0], Int(lines[$0])) }
        }
    }
}
