// MediaFileWriter's encoder: opened on a trial picture at init, then for the first frame (format, time base, colour).

import CFFmpeg
import FrameServer
import Glibc

extension MediaFileWriter {
    /// Opens the encoder and writes the container header for the first frame's format.
    func start(_ frame: borrowing Frame) throws(MediaOutputError) {
        let header = frame.header
        let d = header.description
        let source = try FrameAdapter.pixelFormat(of: header)
        let choice = try MediaFilePixelFormat(source: source, encoder: encoder, requested: requestedFormat)
        let format = choice.format
        notes += choice.note.map { [$0] } ?? []
        let sourceFull = d.color.range == 2
        let adapter = try FrameAdapter(width: header.width, height: header.height, format: format,
                                       fullRange: sourceFull && !FrameAdapter.isRGB(source) ? true : nil)
        self.adapter = adapter

        // The colour the encoder will see (what the adapter writes when it converts).
        var color = d.color
        if format != source {
            color = color.converted(toRGB: FrameAdapter.isRGB(format), fullRange: sourceFull && !FrameAdapter.isRGB(source))
        }
        let rate = Self.frameRate(nominal: frameRate, d)
        try openEncoder(for: header, format: format, color: color, rate: rate)
        try writeHeader(rate: rate)

        let encName = String(cString: encoder.pointee.name)
        let rateText = rate.den == 1 ? "\(rate.num)" : "\((Double(rate.num) / Double(rate.den) * 1000).rounded() / 1000)"
        outputDescription = "\(encName) \(MediaFilePixelFormat.name(format)) \(header.width)x\(header.height) \(rateText) fps"
            + (options.frameRateMode == .cfr ? " cfr" : "") + ", \(String(cString: outputFormat.pointee.name))"
            + (format != source ? " (converted from \(header.pixelFormatName))" : "")
            + (audioDescription.map { "; audio \($0)" } ?? "")
    }

    /// Opens the encoder for frames like `header`'s, in `format`. Its time base: passthrough,
    /// the frame's own (every pts kept exactly); cfr, or an encoder that refuses the frame's,
    /// 1/rate as ffmpeg gives its encoders (timestamps on the rate's grid).
    func openEncoder(for header: FrameHeader, format: AVPixelFormat, color: ColorDescription,
                             rate: AVRational) throws(MediaOutputError) {
        let d = header.description
        let grid = AVRational(num: rate.den, den: rate.num)
        let own = d.timeBase.num > 0 && d.timeBase.den > 0 ? d.timeBase.av : grid
        var timeBases = options.frameRateMode == .cfr ? [grid] : [own]
        if av_cmp_q(own, grid) != 0, options.frameRateMode == .passthrough { timeBases.append(grid) }
        let what = "\(header.width)x\(header.height) " + MediaFilePixelFormat.name(format)
        let global = outputFormat.pointee.flags & AVFMT_GLOBALHEADER != 0
        for (i, tb) in timeBases.enumerated() {
            do {
                codecContext = try openEncoder(width: Int32(header.width), height: Int32(header.height), format: format,
                                               timeBase: tb, frameRate: rate, globalHeader: global, what: what) { c in
                    self.describe(c, d, color)
                }
            } catch where i + 1 < timeBases.count {
                continue
            }
            encoderTimeBase = tb
            if i > 0 {
                notes.append("the \(options.codec) encoder refused the stream's time base \(d.timeBase): "
                             + "timestamps are rounded to 1/\(Self.rateText(rate)) s (-fps_mode passthrough)")
            }
            break
        }
        // Passthrough: timestamps in the encoder's time base; cfr: in the frame's, for the sync to place.
        clock = MediaFileClock(timeBase: options.frameRateMode == .cfr ? own : encoderTimeBase, rate: rate)
        if options.frameRateMode == .cfr { constantRate = ConstantRateSync() }
    }

    /// The encoder's colour, aspect ratio, field order and chroma location, as ffmpeg sets them from the first frame.
    private func describe(_ c: UnsafeMutablePointer<AVCodecContext>, _ d: FrameDescription, _ color: ColorDescription) {
        c.pointee.color_range = AVColorRange(rawValue: color.range)
        c.pointee.colorspace = AVColorSpace(rawValue: color.matrix)
        c.pointee.color_primaries = AVColorPrimaries(rawValue: color.primaries)
        c.pointee.color_trc = AVColorTransferCharacteristic(rawValue: color.transfer)
        let sar = d.sampleAspectRatio
        if sar.num > 0, sar.den > 0 { c.pointee.sample_aspect_ratio = sar.av }
        // As ffmpeg: the first frame's field order (interlaced as TB/BT) and chroma location.
        c.pointee.field_order = d.fieldOrder.encoderFieldOrder(mjpeg: encoder.pointee.id == AV_CODEC_ID_MJPEG)
        c.pointee.chroma_sample_location = AVChromaLocation(rawValue: d.chromaLocation.rawValue)
    }

    /// libx264's presets, fastest first.
    public static let x264Presets = ["ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow", "slower",
                                     "veryslow", "placebo"]

    /// The settings as the user gave them, for messages.
    private var settingsText: String {
        var s: [String] = []
        if let b = options.bitRate { s.append("-b:v \(b)") }
        if let c = options.crf { s.append("--crf \(c)") }
        if let g = options.gop { s.append("-g \(g)") }
        if let p = options.preset { s.append("--preset '\(p)'") }
        return s.isEmpty ? "its default settings" : s.joined(separator: " ")
    }

    func openEncoder(width: Int32, height: Int32, format: AVPixelFormat, timeBase: AVRational,
                             frameRate: AVRational, globalHeader: Bool, what: String? = nil,
                             configure: (UnsafeMutablePointer<AVCodecContext>) -> Void = { _ in })
        throws(MediaOutputError) -> UnsafeMutablePointer<AVCodecContext>?
    {
        let name = options.codec
        guard let c = avcodec_alloc_context3(encoder) else { throw .ffmpeg("avcodec_alloc_context3", "out of memory") }
        var ctx: UnsafeMutablePointer<AVCodecContext>? = c
        c.pointee.width = width
        c.pointee.height = height
        c.pointee.pix_fmt = format
        c.pointee.time_base = timeBase
        c.pointee.framerate = frameRate
        c.pointee.thread_count = 0
        if globalHeader { c.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER) }
        if let b = options.bitRate { c.pointee.bit_rate = b }
        if let g = options.gop { c.pointee.gop_size = Int32(g) }
        // libx265 logs its settings to stderr itself: errors only, as libavcodec's own log here.
        if let priv = c.pointee.priv_data, av_opt_find(priv, "x265-params", nil, 0, 0) != nil {
            _ = av_opt_set(priv, "x265-params", "log-level=error", 0)
        }
        if let crf = options.crf {
            guard let priv = c.pointee.priv_data, av_opt_find(priv, "crf", nil, 0, 0) != nil,
                  av_opt_set(priv, "crf", "\(crf)", 0) >= 0 else {
                avcodec_free_context(&ctx)
                throw .encoderOption(name, "--crf")
            }
        }
        if let preset = options.preset {
            // x264 prints its own complaint about an unknown preset: check the name first.
            if name.hasPrefix("libx264"), !Self.x264Presets.contains(preset) {
                avcodec_free_context(&ctx)
                throw .encoderRefused(name, "--preset '\(preset)'", "its presets are " + Self.x264Presets.joined(separator: ", "))
            }
            guard let priv = c.pointee.priv_data, av_opt_find(priv, "preset", nil, 0, 0) != nil else {
                avcodec_free_context(&ctx)
                throw .encoderOption(name, "--preset")
            }
            let r = av_opt_set(priv, "preset", preset, 0)
            guard r >= 0 else {
                avcodec_free_context(&ctx)
                throw .encoderRefused(name, "--preset '\(preset)'", ffmpegMessage(r))
            }
        }
        configure(c)
        let r = avcodec_open2(c, encoder, nil)
        guard r >= 0 else {
            avcodec_free_context(&ctx)
            var message = ffmpegMessage(r)
            if let desc = av_pix_fmt_desc_get(format), (desc.pointee.log2_chroma_w > 0 && width % 2 != 0)
                || (desc.pointee.log2_chroma_h > 0 && height % 2 != 0) {
                message += " (this encoder may need an even width and height for chroma-subsampled formats: "
                    + "scale with 'framesrv produce --size')"
            }
            throw .encoderRefused(name, (what.map { $0 + " with " } ?? "") + settingsText, message)
        }
        return ctx
    }

    static func rateText(_ rate: AVRational) -> String {
        rate.den == 1 ? "\(rate.num)" : "\(rate.num)/\(rate.den)"
    }

    /// The recording's frame rate: the exact nominal rate, else the first frame's duration,
    /// else 25.
    static func frameRate(nominal: Rational?, _ d: FrameDescription) -> AVRational {
        if let nominal, nominal.num > 0, nominal.den > 0 { return nominal.av }
        if d.duration > 0, d.timeBase.num > 0, d.timeBase.den > 0 {
            let tb = FrameMD5Writer.outputTimeBase(d)
            if tb.num > 0 { return AVRational(num: tb.den, den: tb.num) }
        }
        return AVRational(num: 25, den: 1)
    }
}
