import CFFmpeg
import FrameServer

/// A held frame converted to full-range RGB (rgb24) at a chosen size with libswscale,
/// honouring the frame's own matrix (BT.601/709/2020; unspecified: BT.601) and range
/// (tv/pc; unspecified: tv): the one home of that rule for still images and previews.
///
/// The frame is read in place, in its slot; the only copy is the conversion itself. The
/// context and the picture are kept across frames of one shape (re-made when the frame's
/// size, format, matrix or range, or the size asked for, changes). Use from one thread.
///
/// `exact` conversions (snapshots) use accurate rounding and full chroma interpolation, as
/// `ffmpeg -vf scale=flags=bicubic+accurate_rnd+full_chroma_int` does; the others (previews)
/// plain bicubic, ffmpeg's default, three times faster (1080p: about 14 ms instead of 47).
final class RGBPicture {
    /// The converted picture (rgb24), valid after `convert` until the next call.
    private(set) var picture: UnsafeMutablePointer<AVFrame>?
    private var context: OpaquePointer?
    private var key: Key?

    private struct Key: Equatable {
        var width: Int32, height: Int32, format: Int32, matrix: UInt32, range: UInt32
        var outWidth: Int32, outHeight: Int32, exact: Bool
    }

    init() {}

    deinit {
        sws_freeContext(context)
        av_frame_free(&picture)
    }

    /// Converts `frame` to rgb24 at `width` x `height` into `picture`, and returns it.
    ///
    /// The corresponding FFmpeg calls are `sws_getContext`, `sws_setColorspaceDetails` and `sws_scale`.
    func convert(_ frame: borrowing Frame, width: Int, height: Int, exact: Bool) throws(StillImageError) -> UnsafeMutablePointer<AVFrame> {
        try convert(frame.header, base: frame.base, width: width, height: height, exact: exact)
    }

    /// As `convert(_:width:height:exact:)`, for a frame `header` says whose slot (or a copy of
    /// one: `CUDAPreviewReader`'s) starts at `base`.
    func convert(_ header: FrameHeader, base: UnsafeRawPointer, width: Int, height: Int,
                 exact: Bool) throws(StillImageError) -> UnsafeMutablePointer<AVFrame> {
        let source = av_get_pix_fmt(header.pixelFormatName)
        guard source != AV_PIX_FMT_NONE else { throw .unsupportedPixelFormat(header.pixelFormatName) }
        let planes: FramePlanes
        do { planes = try FramePlanes(header, base: base, as: source) } catch { throw .layout(error) }
        let color = header.description.color
        let k = Key(width: Int32(header.width), height: Int32(header.height), format: source.rawValue,
                    matrix: color.matrix, range: color.range, outWidth: Int32(width), outHeight: Int32(height), exact: exact)
        if key != k { try remake(k, source: source, color: color) }
        guard let picture, let context else { throw .ffmpeg("sws_getContext", "no context") }
        let rows = withUnsafeMutableBytes(of: &picture.pointee.data) { data in
            withUnsafeMutableBytes(of: &picture.pointee.linesize) { linesize in
                sws_scale(context, planes.sources, planes.linesize, 0, k.height,
                          data.bindMemory(to: UnsafeMutablePointer<UInt8>?.self).baseAddress,
                          linesize.bindMemory(to: Int32.self).baseAddress)
            }
        }
        guard rows == k.outHeight else { throw .ffmpeg("sws_scale", "converted \(rows) of \(k.outHeight) rows") }
        return picture
    }

    /// A new context and picture for `k`: the source's matrix and range in, full-range RGB out.
    private func remake(_ k: Key, source: AVPixelFormat, color: ColorDescription) throws(StillImageError) {
        sws_freeContext(context)
        context = nil
        key = nil
        av_frame_free(&picture)
        guard let p = av_frame_alloc() else { throw .ffmpeg("av_frame_alloc", "out of memory") }
        picture = p
        p.pointee.width = k.outWidth
        p.pointee.height = k.outHeight
        p.pointee.format = AV_PIX_FMT_RGB24.rawValue
        let r = av_frame_get_buffer(p, 0)
        guard r >= 0 else { throw .ffmpeg("av_frame_get_buffer", ffmpegMessage(r)) }
        let flags = k.exact ? SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT : SWS_BICUBIC
        guard let c = sws_getContext(k.width, k.height, source, k.outWidth, k.outHeight, AV_PIX_FMT_RGB24, flags, nil, nil, nil) else {
            throw .ffmpeg("sws_getContext", "no conversion from \(av_get_pix_fmt_name(source).map { String(cString: $0) } ?? "?") to rgb24")
        }
        _ = sws_setColorspaceDetails(c, sws_getCoefficients(color.swsColorspace), color.range == 2 ? 1 : 0,
                                     sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16)
        context = c
        key = k
    }
}
