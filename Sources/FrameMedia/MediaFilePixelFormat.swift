import CFFmpeg

/// The pixel format a media file (`sink --record`) is encoded in, and why (`MediaFileWriter`'s policy).
///
/// - `-pix_fmt FMT`: that format (checked against the encoder before any frame).
/// - H.264 and H.265 encoders: 4:2:0, which every player plays: yuv420p, or yuv420p10le for
///   input deeper than 8 bits (when the encoder takes it). A 4:2:0 input the encoder takes is
///   kept as it is (nv12, yuvj420p...). When this drops chroma (RGB, 4:4:4 or 4:2:2 in) or
///   depth, `note` says so once, and names ffmpeg's choice, which `-pix_fmt` keeps.
/// - Other encoders (FFV1 and the other lossless ones included): the input's format when the
///   encoder takes it, else the encoder's best match for it (ffmpeg's choice).
struct MediaFilePixelFormat {
    let format: AVPixelFormat
    /// One line for the user when the choice loses something ffmpeg's would keep.
    let note: String?

    /// The format for frames in `source`, given the encoder and `-pix_fmt` (nil: the default).
    init(source: AVPixelFormat, encoder: UnsafePointer<AVCodec>, requested: AVPixelFormat?) throws(MediaOutputError) {
        if let requested { format = requested; note = nil; return }
        let accepted = Self.formats(of: encoder)
        let ffmpegs = try Self.ffmpegsChoice(source, encoder, accepted)
        let id = encoder.pointee.id
        guard id == AV_CODEC_ID_H264 || id == AV_CODEC_ID_HEVC, let target = Self.playable(source, accepted),
              target != ffmpegs else {
            format = ffmpegs
            note = nil
            return
        }
        format = target
        let lost = [Self.chroma(source) > Self.chroma(target) ? "chroma resolution" : nil,
                    Self.depth(source) > Self.depth(target) ? "bit depth" : nil].compactMap { $0 }
        let name = String(cString: encoder.pointee.name)
        note = lost.isEmpty ? nil : "\(name) records \(Self.name(source)) frames as 4:2:0 (\(Self.name(target))), which players "
            + "expect; this drops \(lost.joined(separator: " and ")): -pix_fmt \(Self.name(ffmpegs)) keeps it, as ffmpeg does"
    }

    /// The pixel formats `encoder` takes; empty when it does not say (it takes any).
    static func formats(of encoder: UnsafePointer<AVCodec>) -> [AVPixelFormat] {
        var accepted: [AVPixelFormat] = []
        guard var p = encoder.pointee.pix_fmts else { return accepted }
        while p.pointee != AV_PIX_FMT_NONE { accepted.append(p.pointee); p += 1 }
        return accepted
    }

    /// ffmpeg's choice: the source's format when the encoder takes it, else its best match.
    static func ffmpegsChoice(_ source: AVPixelFormat, _ encoder: UnsafePointer<AVCodec>,
                              _ accepted: [AVPixelFormat]) throws(MediaOutputError) -> AVPixelFormat {
        guard !accepted.isEmpty, !accepted.contains(source) else { return source }
        let best = accepted.withUnsafeBufferPointer { list in
            // avcodec_find_best_pix_fmt_of_list reads up to AV_PIX_FMT_NONE.
            let terminated = Array(list) + [AV_PIX_FMT_NONE]
            return terminated.withUnsafeBufferPointer { avcodec_find_best_pix_fmt_of_list($0.baseAddress, source, 0, nil) }
        }
        guard best != AV_PIX_FMT_NONE else {
            throw .pixelFormat("the \(String(cString: encoder.pointee.name)) encoder", name(source),
                               accepted.map(name).joined(separator: ", "))
        }
        return best
    }

    /// The 4:2:0 format every player plays for `source`, among `accepted`: the source itself
    /// when it is 4:2:0 YUV of at most 10 bits, else yuv420p10le for deeper input, else yuv420p.
    static func playable(_ source: AVPixelFormat, _ accepted: [AVPixelFormat]) -> AVPixelFormat? {
        if chroma(source) == 4, av_pix_fmt_desc_get(source)?.pointee.log2_chroma_h == 1, depth(source) <= 10, accepted.contains(source) { return source }
        if depth(source) > 8, accepted.contains(AV_PIX_FMT_YUV420P10LE) { return AV_PIX_FMT_YUV420P10LE }
        return accepted.contains(AV_PIX_FMT_YUV420P) ? AV_PIX_FMT_YUV420P : nil
    }

    /// How much chroma a format carries, in chroma samples per 16 pixels: 16 for 4:4:4 and
    /// RGB, 8 for 4:2:2 and 4:4:0, 4 for 4:2:0 and 4:1:1, 0 for gray.
    static func chroma(_ f: AVPixelFormat) -> Int {
        guard let d = av_pix_fmt_desc_get(f) else { return 0 }
        let flags = d.pointee.flags
        if flags & UInt64(AV_PIX_FMT_FLAG_RGB | AV_PIX_FMT_FLAG_PAL) != 0 { return 16 }
        let hasAlpha = flags & UInt64(AV_PIX_FMT_FLAG_ALPHA) != 0
        guard Int(d.pointee.nb_components) - (hasAlpha ? 1 : 0) >= 3 else { return 0 }
        return 16 >> (Int(d.pointee.log2_chroma_w) + Int(d.pointee.log2_chroma_h))
    }

    /// Bits per component (the first component's).
    static func depth(_ f: AVPixelFormat) -> Int {
        guard let d = av_pix_fmt_desc_get(f) else { return 8 }
        return Int(d.pointee.comp.0.depth)
    }

    static func name(_ f: AVPixelFormat) -> String { av_get_pix_fmt_name(f).map { String(cString: $0) } ?? "?" }
}
