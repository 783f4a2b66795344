import CFFmpeg
import FrameServer
import Glibc

/// What can go wrong writing a frame as a still image (`framesrv inspect --snapshot`).
/// (The other outputs throw `MediaOutputError`.)
public enum StillImageError: Error, CustomStringConvertible, Sendable {
    /// FFmpeg has no pixel format by this name.
    case unsupportedPixelFormat(String)
    /// A frame's pixel format has no code in this build of framesrv.
    case unreadablePixelFormat(String)
    /// An FFmpeg call failed (its name and FFmpeg's message).
    case ffmpeg(String, String)
    /// Writing the output failed.
    case io(String, Errno)

    public var description: String {
        switch self {
        case .unsupportedPixelFormat(let f): return "FFmpeg does not know pixel format '\(f)'"
        case .unreadablePixelFormat(let f): return "frames are in pixel format '\(f)', which this framesrv cannot read"
        case .ffmpeg(let call, let message): return "FFmpeg's \(call) failed: \(message)"
        case .io(let path, let e): return "cannot write \(path): \(e)"
        }
    }
}

/// FFmpeg's text for an error code.
func ffmpegMessage(_ code: Int32) -> String {
    var buf = [CChar](repeating: 0, count: 256)
    av_strerror(code, &buf, buf.count)
    return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Still images of frames, through libswscale and libavcodec.
public enum StillImage {
    /// Converts `frame` to RGB, honouring its colour matrix and range, and writes it as a PNG file.
    ///
    /// The corresponding FFmpeg calls are `sws_scale` (with `sws_setColorspaceDetails`) and
    /// the PNG encoder's `avcodec_send_frame` / `avcodec_receive_packet`.
    public static func writePNG(_ frame: borrowing Frame, to path: String) throws(StillImageError) {
        let header = frame.header
        let width = Int32(header.width), height = Int32(header.height)
        let source = av_get_pix_fmt(header.pixelFormatName)
        guard source != AV_PIX_FMT_NONE else { throw .unsupportedPixelFormat(header.pixelFormatName) }

        guard let rgb = av_frame_alloc() else { throw .ffmpeg("av_frame_alloc", "out of memory") }
        var rgbFrame: UnsafeMutablePointer<AVFrame>? = rgb
        defer { av_frame_free(&rgbFrame) }
        rgb.pointee.width = width
        rgb.pointee.height = height
        rgb.pointee.format = AV_PIX_FMT_RGB24.rawValue
        var r = av_frame_get_buffer(rgb, 0)
        guard r >= 0 else { throw .ffmpeg("av_frame_get_buffer", ffmpegMessage(r)) }

        // Convert: the source's own matrix and range in, full-range RGB out.
        let flags = SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT
        guard let sws = sws_getContext(width, height, source, width, height, AV_PIX_FMT_RGB24, flags, nil, nil, nil) else {
            throw .ffmpeg("sws_getContext", "no conversion from \(header.pixelFormatName) to rgb24")
        }
        defer { sws_freeContext(sws) }
        let color = header.description.color
        _ = sws_setColorspaceDetails(sws, sws_getCoefficients(color.swsColorspace), color.range == 2 ? 1 : 0,
                                     sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16)
        let planes = FramePlanes(header, base: frame.base)
        r = withUnsafeMutableBytes(of: &rgb.pointee.data) { data in
            withUnsafeMutableBytes(of: &rgb.pointee.linesize) { linesize in
                sws_scale(sws, planes.sources, planes.linesize, 0, height,
                          data.bindMemory(to: UnsafeMutablePointer<UInt8>?.self).baseAddress,
                          linesize.bindMemory(to: Int32.self).baseAddress)
            }
        }
        guard r == height else { throw .ffmpeg("sws_scale", "converted \(r) of \(height) rows") }

        // Encode one PNG.
        guard let codec = avcodec_find_encoder(AV_CODEC_ID_PNG) else { throw .ffmpeg("avcodec_find_encoder", "no PNG encoder") }
        guard let context = avcodec_alloc_context3(codec) else { throw .ffmpeg("avcodec_alloc_context3", "out of memory") }
        var ctx: UnsafeMutablePointer<AVCodecContext>? = context
        defer { avcodec_free_context(&ctx) }
        context.pointee.width = width
        context.pointee.height = height
        context.pointee.pix_fmt = AV_PIX_FMT_RGB24
        context.pointee.time_base = AVRational(num: 1, den: 25)
        r = avcodec_open2(context, codec, nil)
        guard r >= 0 else { throw .ffmpeg("avcodec_open2", ffmpegMessage(r)) }
        r = avcodec_send_frame(context, rgb)
        guard r >= 0 else { throw .ffmpeg("avcodec_send_frame", ffmpegMessage(r)) }
        _ = avcodec_send_frame(context, nil)
        guard let packet = av_packet_alloc() else { throw .ffmpeg("av_packet_alloc", "out of memory") }
        var pkt: UnsafeMutablePointer<AVPacket>? = packet
        defer { av_packet_free(&pkt) }
        r = avcodec_receive_packet(context, packet)
        guard r >= 0, let data = packet.pointee.data else { throw .ffmpeg("avcodec_receive_packet", ffmpegMessage(r)) }

        do {
            let file = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o644)
            try file.writeAll(UnsafeRawBufferPointer(start: data, count: Int(packet.pointee.size)))
        } catch {
            throw .io(path, error)
        }
    }
}
