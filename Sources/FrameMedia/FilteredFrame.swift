import CFFmpeg
import FrameServer

/// One frame a filter graph made; frees itself.
public struct FilteredFrame: ~Copyable {
    let frame: UnsafeMutablePointer<AVFrame>
    /// Size and pixel format.
    public let format: FrameFormat
    /// Timestamps (in the graph's output time base), colour, aspect ratio, key flag.
    public let description: FrameDescription

    init(frame: UnsafeMutablePointer<AVFrame>, timeBase: Rational, inputTimeBase: Rational) throws(FilterError) {
        self.frame = frame
        let f = frame.pointee
        let name = av_get_pix_fmt_name(AVPixelFormat(rawValue: f.format)).map { String(cString: $0) } ?? "format \(f.format)"
        guard let pf = PixelFormat(name: name), pf.name == name else { throw .unsupportedOutput(name) }
        format = FrameFormat(pf, width: Int(f.width), height: Int(f.height))
        var color = ColorDescription(f)
        // RGB carries matrix 0 and is full range; YUV is what the graph says.
        if pf.isRGB { color = color.converted(toRGB: true, fullRange: true) }
        // Filters keep the source frame's duration, in the input's time base.
        var duration = max(0, f.pkt_duration)
        if duration > 0, timeBase != inputTimeBase, timeBase.den > 0, inputTimeBase.den > 0 {
            duration = av_rescale_q(duration, inputTimeBase.av, timeBase.av)
        }
        description = FrameDescription(f, color: color, pts: f.pts, duration: duration, timeBase: timeBase,
                                       sampleAspectRatio: Rational(f.sample_aspect_ratio))
    }

    deinit {
        var f: UnsafeMutablePointer<AVFrame>? = frame
        av_frame_free(&f)
    }

    /// Copies the frame's planes, row by row, into `slot` (which must have `format`): the one
    /// copy of a filter's output.
    public func copyPlanes(into slot: borrowing WritableFrame) { copyFramePlanes(frame, into: slot) }
}
