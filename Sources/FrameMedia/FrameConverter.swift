import CFFmpeg
import FrameServer
import Glibc

/// Converts decoded frames to another pixel format and/or size with libswscale, as ffmpeg's
/// `-pix_fmt F` / `-s WxH` (its auto-inserted `scale` filter) do, byte for byte:
///
/// - flags `SWS_BICUBIC` only: what fftools passes (`sws_flags` defaults to `bicubic`);
///   neither `accurate_rnd` nor `full_chroma_int` (measured against ffmpeg 5.1: adding
///   `full_chroma_int` changes yuv420p -> rgb24 output, as `accurate_rnd` changes gray/rgb24 downscales);
/// - colour as `vf_scale` does by default (`in_color_matrix=auto`): the frame's own matrix
///   (unspecified: BT.601) for both sides, the frame's range when it is tagged (else
///   libswscale's default for the format), and libswscale's default output range for the
///   output format (limited for YUV, full for RGB and gray).
///
/// The header's colour description is updated to what was written (see `outputColor`).
public final class FrameConverter {
    /// The output format, nil for a dimension taken from each frame.
    public let pixelFormat: PixelFormat?
    public let width: Int?
    public let height: Int?

    private var context: OpaquePointer?
    private var key: (Int32, Int32, Int32, UInt32, UInt32)?
    private var outputFull = false

    /// `pixelFormat`/`size`: what to convert to (nil: keep the frame's).
    public init(pixelFormat: PixelFormat?, size: (Int, Int)?) {
        self.pixelFormat = pixelFormat
        width = size?.0
        height = size?.1
    }

    deinit { sws_freeContext(context) }

    /// The format `frame` converts to (the frame's size or pixel format where none was asked for).
    public func outputFormat(for frame: borrowing DecodedFrame) throws(MediaInputError) -> FrameFormat {
        guard let pf = pixelFormat ?? frame.pixelFormat else { throw .unsupportedPixelFormat(frame.pixelFormatName) }
        return FrameFormat(pf, width: width ?? frame.width, height: height ?? frame.height)
    }

    /// Converts `frame` into `slot` (whose format is `outputFormat(for: frame)`); returns the
    /// frame's description with the colour of what was written.
    public func convert(_ frame: borrowing DecodedFrame, into slot: borrowing WritableFrame) throws(MediaInputError) -> FrameDescription {
        let src = frame.frame
        let format = slot.format
        let srcFormat = AVPixelFormat(rawValue: src.pointee.format)
        let dstFormat = av_get_pix_fmt(format.pixelFormat.name)
        var color = frame.description.color
        let k = (src.pointee.width, src.pointee.height, src.pointee.format, color.matrix, color.range)
        if context == nil || key.map({ $0 != k }) ?? true || !sameOutput(format) {
            sws_freeContext(context)
            context = nil
            guard let (c, full) = Self.scaleContext(from: (src.pointee.width, src.pointee.height, srcFormat),
                                                    to: (Int32(format.width), Int32(format.height), dstFormat), color: color) else {
                throw .ffmpeg("sws_getContext", "no conversion from \(frame.pixelFormatName) to \(format)")
            }
            context = c
            key = k
            outputFull = full
            outFormat = format
        }
        var strides = [Int32](repeating: 0, count: 4)
        var dests = [UnsafeMutablePointer<UInt8>?](repeating: nil, count: 4)
        for i in format.pixelFormat.planes.indices {
            dests[i] = slot.plane(i).baseAddress?.assumingMemoryBound(to: UInt8.self)
            strides[i] = Int32(format.stride(plane: i))
        }
        let rows = withUnsafeBytes(of: src.pointee.data) { data in
            withUnsafeBytes(of: src.pointee.linesize) { linesize in
                sws_scale(context, data.bindMemory(to: UnsafePointer<UInt8>?.self).baseAddress,
                          linesize.bindMemory(to: Int32.self).baseAddress, 0, src.pointee.height, dests, strides)
            }
        }
        guard rows == Int32(format.height) else { throw .ffmpeg("sws_scale", "wrote \(rows) of \(format.height) rows") }

        // The colour of what was written.
        color = color.converted(toRGB: format.pixelFormat.isRGB, fullRange: outputFull)
        var d = frame.description
        d.color = color
        // The container's aspect ratio describes the source size; a new size keeps the picture's shape.
        if (format.width != frame.width || format.height != frame.height), d.sampleAspectRatio.num > 0 {
            var num: Int32 = 0, den: Int32 = 0
            _ = av_reduce(&num, &den, Int64(d.sampleAspectRatio.num) * Int64(format.height) * Int64(frame.width),
                          Int64(d.sampleAspectRatio.den) * Int64(format.width) * Int64(frame.height), Int64(Int32.max))
            d.sampleAspectRatio = Rational(num, den)
        }
        return d
    }

    private var outFormat: FrameFormat?
    private func sameOutput(_ format: FrameFormat) -> Bool { outFormat == format }

    /// A bicubic libswscale context set up as ffmpeg's vf_scale does: libswscale's defaults,
    /// then the source's matrix and range, and the output range `fullRangeOutput` when given
    /// (YUV outputs). Also returns whether the output is full range. nil: no such conversion.
    static func scaleContext(from src: (width: Int32, height: Int32, format: AVPixelFormat),
                             to dst: (width: Int32, height: Int32, format: AVPixelFormat),
                             color: ColorDescription, fullRangeOutput: Bool? = nil) -> (OpaquePointer, fullRangeOutput: Bool)? {
        guard let c = sws_getContext(src.width, src.height, src.format, dst.width, dst.height, dst.format,
                                     SWS_BICUBIC, nil, nil, nil) else { return nil }
        var invTable: UnsafeMutablePointer<Int32>?, table: UnsafeMutablePointer<Int32>?
        var srcRange: Int32 = 0, dstRange: Int32 = 0, brightness: Int32 = 0, contrast: Int32 = 0, saturation: Int32 = 0
        _ = sws_getColorspaceDetails(c, &invTable, &srcRange, &table, &dstRange, &brightness, &contrast, &saturation)
        let coefficients = sws_getCoefficients(color.swsColorspace)
        if color.range == 1 || color.range == 2 { srcRange = color.range == 2 ? 1 : 0 }
        if let fullRangeOutput { dstRange = fullRangeOutput ? 1 : 0 }
        _ = sws_setColorspaceDetails(c, coefficients, srcRange, coefficients, dstRange, brightness, contrast, saturation)
        return (c, dstRange != 0)
    }

}

/// Why FFmpeg cannot read a held frame as its pixel format name says: its planes do not hold
/// the rows FFmpeg reads (a damaged or hostile header, most often pixel format code 0 with a
/// name whose samples are wider than the planes). PROTOCOL.md 16.2: a reader that takes its
/// geometry from FFmpeg reads at most `plane_size` bytes of each plane.
public struct FrameLayoutError: Error, CustomStringConvertible, Sendable, Equatable {
    public let description: String
}

/// FFmpeg's view of a held frame's planes, where its header puts them (never a layout
/// recomputed from the format: a producer decoding in place uses its decoder's): four data
/// pointers and line sizes, the unused ones nil and 0. The one road from a slot to FFmpeg:
/// every reader (previews, snapshots, sinks, filters) makes its planes here, checked.
struct FramePlanes {
    private(set) var data = [UnsafeMutablePointer<UInt8>?](repeating: nil, count: 4)
    private(set) var linesize = [Int32](repeating: 0, count: 4)

    /// The planes of the slot that starts at `base` and carries `header`, for FFmpeg to read
    /// as `format` (the header's `pix_fmt_name`). Throws unless the header has exactly the
    /// planes FFmpeg reads and each holds FFmpeg's rows at its stride
    /// (`FrameHeader.plane(_:holds:rowBytes:)`, the validator's check for code 0).
    init(_ header: FrameHeader, base: UnsafeRawPointer, as format: AVPixelFormat) throws(FrameLayoutError) {
        let name = header.pixelFormatName
        guard let geometry = Self.geometry(format, width: header.width, height: header.height) else {
            throw FrameLayoutError(description: "frames in pixel format '\(name)' have no planes in memory that FFmpeg can read")
        }
        guard geometry.count == header.planeCount else {
            throw FrameLayoutError(description: "a damaged frame: pixel format '\(name)' has \(geometry.count) planes, "
                                   + "its header says \(header.planeCount)")
        }
        for (i, g) in geometry.enumerated() where !header.plane(i, holds: g.rows, rowBytes: g.rowBytes) {
            throw FrameLayoutError(description: "a damaged frame: pixel format '\(name)' at \(header.width)x\(header.height) "
                                   + "reads \(g.rows) rows of \(g.rowBytes) bytes from plane \(i), whose stride is "
                                   + "\(header.stride(plane: i)) and size \(header.size(plane: i))")
        }
        for i in 0..<min(4, header.planeCount) {
            data[i] = UnsafeMutablePointer(mutating: (base + header.offset(plane: i)).assumingMemoryBound(to: UInt8.self))
            linesize[i] = Int32(header.stride(plane: i))
        }
    }

    /// The rows and bytes per row FFmpeg reads from each plane of a `width` x `height` picture
    /// in `format` (a palette format's second plane: its 256 x 4-byte palette); nil for a
    /// format without planes in memory (hardware frames).
    ///
    /// The corresponding FFmpeg calls are `av_image_fill_linesizes` and `av_pix_fmt_count_planes`.
    static func geometry(_ format: AVPixelFormat, width: Int, height: Int) -> [(rows: Int, rowBytes: Int)]? {
        guard let desc = av_pix_fmt_desc_get(format), width > 0, height > 0, width <= Int(Int32.max) else { return nil }
        var lines = [Int32](repeating: 0, count: 4)
        let planes = Int(av_pix_fmt_count_planes(format))
        guard av_image_fill_linesizes(&lines, format, Int32(width)) >= 0, (1...4).contains(planes) else { return nil }
        let shift = Int(desc.pointee.log2_chroma_h)
        var geometry = (0..<planes).map { i in
            (rows: i == 1 || i == 2 ? (height + (1 << shift) - 1) >> shift : height, rowBytes: Int(lines[i]))
        }
        if desc.pointee.flags & UInt64(AV_PIX_FMT_FLAG_PAL) != 0, planes == 1 { geometry.append((rows: 1, rowBytes: 256 * 4)) }
        return geometry
    }

    /// The planes as libswscale's source arguments.
    var sources: [UnsafePointer<UInt8>?] { data.map { $0.map { UnsafePointer($0) } } }

    /// Points `frame`'s data and linesize at these planes (the others at nothing).
    func install(in frame: UnsafeMutablePointer<AVFrame>) {
        withUnsafeMutableBytes(of: &frame.pointee.data) { d in
            withUnsafeMutableBytes(of: &frame.pointee.linesize) { l in
                let data = d.bindMemory(to: UnsafeMutablePointer<UInt8>?.self), lines = l.bindMemory(to: Int32.self)
                for i in 0..<data.count {
                    data[i] = i < 4 ? self.data[i] : nil
                    lines[i] = i < 4 ? linesize[i] : 0
                }
            }
        }
    }
}
