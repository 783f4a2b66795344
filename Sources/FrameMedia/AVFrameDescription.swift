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
    /// (0/1 when unknown), the key flag; captured now.
    init(_ f: AVFrame, color: ColorDescription, pts: Int64, duration: Int64, timeBase: Rational, sampleAspectRatio: Rational) {
        self.init()
        self.color = color
        self.sampleAspectRatio = sampleAspectRatio.num > 0 && sampleAspectRatio.den > 0 ? sampleAspectRatio : Rational(0, 1)
        self.pts = pts == cffmpeg_nopts() ? nil : pts
        self.timeBase = timeBase
        self.duration = max(0, duration)
        captureNanos = monotonicNanos()
        flags = f.key_frame != 0 ? [.keyframe] : []
    }
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
