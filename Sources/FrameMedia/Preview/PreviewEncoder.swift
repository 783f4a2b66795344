import CFFmpeg
import FrameServer

/// What a preview or a snapshot is encoded as.
public enum ImageFormat: Sendable, Hashable {
    /// JPEG from libavcodec's mjpeg encoder: full-range BT.601 4:2:0, as JFIF (and so every
    /// browser) reads it. `quality` is ffmpeg's `-q:v` scale: 2 (best) ... 31 (smallest).
    case jpeg(quality: Int)
    /// PNG, full-range rgb24: lossless after the conversion to RGB.
    case png
}

/// Encodes held frames as JPEG or PNG images for previews and snapshots, reading each frame
/// in its slot (the one copy is the conversion to RGB with the frame's own matrix and range,
/// at a width capped by `maxWidth`). The libswscale and libavcodec contexts are kept across
/// frames and re-made only when a frame's shape changes. PNGs are converted exactly as
/// `ffmpeg -vf scale=flags=bicubic+accurate_rnd+full_chroma_int` does, JPEGs with ffmpeg's
/// default (plain bicubic, faster). Use from one thread; `convert` then
/// `encodeConverted` lets a caller release the slot before encoding.
public final class PreviewEncoder {
    public let format: ImageFormat
    /// The widest image made, nil for the frame's own size.
    public let maxWidth: Int?
    private let rgb = RGBPicture()
    private var converted: UnsafeMutablePointer<AVFrame>?
    private let yuv = JPEGPlanes()
    private var codec: ImageCodec?
    private var frames: Int64 = 0

    /// The range of `ImageFormat.jpeg`'s quality.
    public static let jpegQualities = 2...31

    public init(_ format: ImageFormat, maxWidth: Int? = nil) {
        if case .jpeg(let q) = format {
            self.format = .jpeg(quality: min(max(q, Self.jpegQualities.lowerBound), Self.jpegQualities.upperBound))
        } else {
            self.format = format
        }
        self.maxWidth = maxWidth.map { max(2, $0) }
    }

    /// The size a `width` x `height` frame becomes: its own when it fits in `maxWidth`, else
    /// `maxWidth` wide (rounded down to even) with the same shape, the height even too.
    public static func imageSize(width: Int, height: Int, maxWidth: Int?) -> (width: Int, height: Int) {
        guard let maxWidth, width > maxWidth, width > 0 else { return (width, height) }
        let w = max(2, maxWidth & ~1)
        let h = max(2, Int((Double(height) * Double(w) / Double(width)).rounded()) & ~1)
        return (w, h)
    }

    /// Converts and encodes `frame`; returns the image file's bytes.
    public func encode(_ frame: borrowing Frame) throws(StillImageError) -> [UInt8] {
        try convert(frame)
        return try encodeConverted()
    }

    /// Converts `frame` into this encoder's own picture: the slot is not needed afterwards.
    public func convert(_ frame: borrowing Frame) throws(StillImageError) {
        let size = Self.imageSize(width: Int(frame.header.width), height: Int(frame.header.height), maxWidth: maxWidth)
        converted = try rgb.convert(frame, width: size.width, height: size.height, exact: format == .png)
    }

    /// Converts a picture in memory of the caller's, laid out as `header` says from `base` on
    /// (`CUDAPreviewReader`'s download of a CUDA frame).
    public func convert(_ header: FrameHeader, base: UnsafeRawPointer) throws(StillImageError) {
        let size = Self.imageSize(width: header.width, height: header.height, maxWidth: maxWidth)
        converted = try rgb.convert(header, base: base, width: size.width, height: size.height, exact: format == .png)
    }

    /// Encodes the picture `convert` made last; returns the image file's bytes.
    public func encodeConverted() throws(StillImageError) -> [UInt8] {
        guard let picture = converted else { throw .ffmpeg("avcodec_send_frame", "no picture converted") }
        let width = picture.pointee.width, height = picture.pointee.height
        if codec.map({ $0.width != width || $0.height != height }) ?? true {
            codec = nil
            codec = try ImageCodec(format, width: width, height: height)
        }
        let input: UnsafeMutablePointer<AVFrame>
        switch format {
        case .png: input = picture
        case .jpeg(let quality):
            input = try yuv.convert(picture)
            input.pointee.quality = Int32(quality) * FF_QP2LAMBDA
        }
        frames += 1
        input.pointee.pts = frames
        return try codec!.encode(input)
    }
}

/// An RGB picture as full-range BT.601 yuv420p (the mjpeg encoder's JFIF input), through a
/// kept libswscale context.
final class JPEGPlanes {
    private var context: OpaquePointer?
    private var picture: UnsafeMutablePointer<AVFrame>?

    deinit {
        sws_freeContext(context)
        av_frame_free(&picture)
    }

    /// Converts `rgb` (rgb24) to yuv420p of the same size; returns the converted picture.
    ///
    /// The corresponding FFmpeg calls are `sws_getContext`, `sws_setColorspaceDetails` and `sws_scale`.
    func convert(_ rgb: UnsafeMutablePointer<AVFrame>) throws(StillImageError) -> UnsafeMutablePointer<AVFrame> {
        let width = rgb.pointee.width, height = rgb.pointee.height
        if picture.map({ $0.pointee.width != width || $0.pointee.height != height }) ?? true {
            try remake(width: width, height: height)
        }
        guard let picture, let context else { throw .ffmpeg("sws_getContext", "no context") }
        let rows = withUnsafeBytes(of: rgb.pointee.data) { src in
            withUnsafeBytes(of: rgb.pointee.linesize) { srcLines in
                withUnsafeMutableBytes(of: &picture.pointee.data) { dst in
                    withUnsafeMutableBytes(of: &picture.pointee.linesize) { dstLines in
                        sws_scale(context, src.bindMemory(to: UnsafePointer<UInt8>?.self).baseAddress,
                                  srcLines.bindMemory(to: Int32.self).baseAddress, 0, height,
                                  dst.bindMemory(to: UnsafeMutablePointer<UInt8>?.self).baseAddress,
                                  dstLines.bindMemory(to: Int32.self).baseAddress)
                    }
                }
            }
        }
        guard rows == height else { throw .ffmpeg("sws_scale", "converted \(rows) of \(height) rows") }
        return picture
    }

    private func remake(width: Int32, height: Int32) throws(StillImageError) {
        sws_freeContext(context)
        context = nil
        av_frame_free(&picture)
        guard let p = av_frame_alloc() else { throw .ffmpeg("av_frame_alloc", "out of memory") }
        picture = p
        p.pointee.width = width
        p.pointee.height = height
        p.pointee.format = AV_PIX_FMT_YUV420P.rawValue
        p.pointee.color_range = AVCOL_RANGE_JPEG
        p.pointee.colorspace = AVCOL_SPC_BT470BG
        let r = av_frame_get_buffer(p, 0)
        guard r >= 0 else { throw .ffmpeg("av_frame_get_buffer", ffmpegMessage(r)) }
        guard let c = sws_getContext(width, height, AV_PIX_FMT_RGB24, width, height, AV_PIX_FMT_YUV420P,
                                     SWS_BICUBIC, nil, nil, nil) else {
            throw .ffmpeg("sws_getContext", "no conversion from rgb24 to yuv420p")
        }
        let bt601 = sws_getCoefficients(SWS_CS_DEFAULT)
        _ = sws_setColorspaceDetails(c, bt601, 1, bt601, 1, 0, 1 << 16, 1 << 16)
        context = c
    }
}

/// A libavcodec image encoder (mjpeg or png) opened for one size, kept across frames.
final class ImageCodec {
    let width: Int32
    let height: Int32
    private var context: UnsafeMutablePointer<AVCodecContext>?
    private var packet: UnsafeMutablePointer<AVPacket>?

    /// Opens the encoder for `format` at `width` x `height`.
    ///
    /// The corresponding FFmpeg calls are `avcodec_find_encoder` and `avcodec_open2`.
    init(_ format: ImageFormat, width: Int32, height: Int32) throws(StillImageError) {
        self.width = width
        self.height = height
        let jpeg = format != .png
        guard let codec = avcodec_find_encoder(jpeg ? AV_CODEC_ID_MJPEG : AV_CODEC_ID_PNG) else {
            throw .ffmpeg("avcodec_find_encoder", "no \(jpeg ? "mjpeg" : "png") encoder")
        }
        guard let c = avcodec_alloc_context3(codec), let p = av_packet_alloc() else {
            throw .ffmpeg("avcodec_alloc_context3", "out of memory")
        }
        context = c
        packet = p
        c.pointee.width = width
        c.pointee.height = height
        c.pointee.time_base = AVRational(num: 1, den: 25)
        c.pointee.pix_fmt = jpeg ? AV_PIX_FMT_YUV420P : AV_PIX_FMT_RGB24
        if case .jpeg(let quality) = format {
            c.pointee.color_range = AVCOL_RANGE_JPEG   // full range: JFIF, no non-standard flag needed
            c.pointee.colorspace = AVCOL_SPC_BT470BG
            c.pointee.flags |= AV_CODEC_FLAG_QSCALE
            c.pointee.global_quality = Int32(quality) * FF_QP2LAMBDA
        }
        let r = avcodec_open2(c, codec, nil)
        guard r >= 0 else { throw .ffmpeg("avcodec_open2", ffmpegMessage(r)) }
    }

    deinit {
        av_packet_free(&packet)
        avcodec_free_context(&context)
    }

    /// Encodes one picture; returns the image file's bytes.
    ///
    /// The corresponding FFmpeg calls are `avcodec_send_frame` and `avcodec_receive_packet`.
    func encode(_ picture: UnsafeMutablePointer<AVFrame>) throws(StillImageError) -> [UInt8] {
        guard let context, let packet else { throw .ffmpeg("avcodec_send_frame", "encoder closed") }
        var r = avcodec_send_frame(context, picture)
        guard r >= 0 else { throw .ffmpeg("avcodec_send_frame", ffmpegMessage(r)) }
        r = avcodec_receive_packet(context, packet)
        guard r >= 0, let data = packet.pointee.data else { throw .ffmpeg("avcodec_receive_packet", ffmpegMessage(r)) }
        defer { av_packet_unref(packet) }
        return Array(UnsafeBufferPointer(start: data, count: Int(packet.pointee.size)))
    }
}
