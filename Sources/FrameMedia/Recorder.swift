import CFFmpeg
import FrameServer
import Glibc

/// How `Recorder` encodes and muxes (ffmpeg's output options).
public struct RecordOptions: Sendable {
    /// `-f`: the container (a libavformat muxer name); nil: from the file name's extension.
    public var container: String?
    /// `-c:v`: the encoder.
    public var codec = "libx264"
    /// `-b:v`: target bit rate in bits per second.
    public var bitRate: Int64?
    /// `-crf`: constant quality (encoders with a `crf` option: libx264, libx265, libvpx, ...).
    public var crf: Double?
    /// `-g`: frames between keyframes.
    public var gop: Int?
    /// `-preset`: the encoder's preset (libx264: ultrafast ... placebo).
    public var preset: String?

    public init() {}

    /// The containers a file name's extension selects, and the muxer for each.
    public static let extensions: [String: String] = ["mp4": "mp4", "m4v": "mp4", "mov": "mov", "mkv": "matroska", "nut": "nut"]

    /// Settings that keep a recording readable after the recorder is killed (SIGKILL) at any
    /// moment, up to the last fragment or cluster written:
    /// MP4/MOV fragmented (`movflags=+frag_keyframe+empty_moov+delay_moov+default_base_moof`, a fragment
    /// at every keyframe and at least every `fragmentMicros`); Matroska clusters closed every
    /// `fragmentMicros`; every packet flushed to the file as soon as the muxer emits it.
    public static let fragmentMicros: Int64 = 500_000
}

/// Encodes a stream's frames with libavcodec and writes them with libavformat, like an
/// asset writer: the container from the file name (or `-f`), the encoder's settings from
/// `RecordOptions`, frame rate and timestamps from the frames (their time base, pts and
/// duration; the stream's nominal rate as the frame rate).
///
/// Frames in a pixel format the encoder takes are handed over in place (libavcodec copies
/// what it keeps); others are converted with libswscale to the encoder's best format for
/// them (the frame's matrix and range). The recording keeps the first frame's size and format:
/// later frames of another size or format are scaled and converted to it.
///
/// The file stays readable when the recorder dies (see `RecordOptions.fragmentMicros`);
/// `finish()` drains the encoder and writes the trailer (index) for a complete file.
public final class Recorder {
    public let path: String
    public let options: RecordOptions
    /// The stream's exact nominal frame rate (set it before the first frame).
    public var frameRate: Rational?
    /// Frames handed to the encoder.
    public private(set) var frames = 0
    /// Packets written to the file.
    public private(set) var packets = 0
    /// Frames converted with libswscale (the others were encoded from the slot in place).
    public var convertedFrames: Int { adapter?.convertedFrames ?? 0 }

    private let outputFormat: UnsafePointer<AVOutputFormat>
    private let encoder: UnsafePointer<AVCodec>
    private var formatContext: UnsafeMutablePointer<AVFormatContext>?
    private var codecContext: UnsafeMutablePointer<AVCodecContext>?
    private var stream: UnsafeMutablePointer<AVStream>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var adapter: FrameAdapter?
    private var encoderTimeBase = AVRational(num: 1, den: 25)
    private var lastPts: Int64?
    private var nextPts: Int64 = 0
    private var ptsOffset: Int64 = 0
    private var finished = false
    /// avformat_write_header succeeded: only then may the encoder be drained and the trailer written.
    private var headerWritten = false
    private var finalBytes: Int64 = 0
    /// What the recording is, once started ("libx264 yuv420p 320x240 25 fps, mp4").
    public private(set) var outputDescription: String?

    /// Checks the container, encoder and settings (opening the encoder once on a small test
    /// picture) and creates the file; the first frame fixes size and format.
    public init(path: String, options: RecordOptions) throws(MediaOutputError) {
        self.path = path
        self.options = options
        av_log_set_level(AV_LOG_FATAL)   // failures are reported as one error line by the caller

        // The container.
        if let name = options.container {
            guard let f = av_guess_format(name, nil, nil) else { throw .unknownContainer(name) }
            outputFormat = f
        } else {
            let base = path.split(separator: "/").last.map(String.init) ?? path
            let ext = base.contains(".") ? String(base.split(separator: ".").last!).lowercased() : ""
            guard let muxer = RecordOptions.extensions[ext], let f = av_guess_format(muxer, nil, nil) else {
                throw .unknownExtension(path)
            }
            outputFormat = f
        }
        let containerName = String(cString: outputFormat.pointee.name)
        guard outputFormat.pointee.video_codec != AV_CODEC_ID_NONE else { throw .noVideoInContainer(containerName) }

        // The encoder.
        // An encoder's name (libx264), or a codec's, as ffmpeg's -c:v takes both (h264: its default encoder).
        let byCodec = avcodec_descriptor_get_by_name(options.codec).flatMap { avcodec_find_encoder($0.pointee.id) }
        guard let codec = avcodec_find_encoder_by_name(options.codec) ?? byCodec, codec.pointee.type == AVMEDIA_TYPE_VIDEO else {
            throw .unknownEncoder(options.codec)
        }
        encoder = codec
        // The settings, tried on a small picture, so a bad one fails now rather than at the first frame;
        // then the container, given that encoder's output (libavformat's own check, as ffmpeg's).
        let trialFormat = codec.pointee.pix_fmts?.pointee ?? AV_PIX_FMT_YUV420P
        var trial = try openEncoder(width: 64, height: 64, format: trialFormat, timeBase: AVRational(num: 1, den: 25),
                                    frameRate: AVRational(num: 25, den: 1),
                                    globalHeader: outputFormat.pointee.flags & AVFMT_GLOBALHEADER != 0)
        defer { avcodec_free_context(&trial) }
        if !Self.containerAccepts(outputFormat, trial) {
            throw .codecNotInContainer(containerName, String(cString: avcodec_get_name(codec.pointee.id)))
        }

        // The file.
        var oc: UnsafeMutablePointer<AVFormatContext>?
        var r = avformat_alloc_output_context2(&oc, outputFormat, nil, path)
        guard r >= 0, let oc else { throw .ffmpeg("avformat_alloc_output_context2", ffmpegMessage(r)) }
        formatContext = oc
        if outputFormat.pointee.flags & AVFMT_NOFILE == 0 {
            r = avio_open(&oc.pointee.pb, path, AVIO_FLAG_WRITE)
            guard r >= 0 else {
                avformat_free_context(oc)
                formatContext = nil
                throw .cannotOpen(path, ffmpegMessage(r))
            }
        }
        // Every packet reaches the file when the muxer emits it (see RecordOptions.fragmentMicros).
        oc.pointee.flush_packets = 1
        guard let p = av_packet_alloc() else { throw .ffmpeg("av_packet_alloc", "out of memory") }
        packet = p
    }

    deinit {
        avcodec_free_context(&codecContext)
        av_packet_free(&packet)
        if let oc = formatContext {
            if outputFormat.pointee.flags & AVFMT_NOFILE == 0 { avio_closep(&oc.pointee.pb) }
            avformat_free_context(oc)
        }
    }

    /// Whether `format` takes the stream `encoder` makes: a muxer initialised on a memory buffer.
    private static func containerAccepts(_ format: UnsafePointer<AVOutputFormat>,
                                         _ encoder: UnsafeMutablePointer<AVCodecContext>?) -> Bool {
        guard let encoder else { return false }
        var oc: UnsafeMutablePointer<AVFormatContext>?
        guard avformat_alloc_output_context2(&oc, format, nil, "trial") >= 0, let oc else { return true }
        defer {
            if oc.pointee.pb != nil {
                var buffer: UnsafeMutablePointer<UInt8>?
                _ = avio_close_dyn_buf(oc.pointee.pb, &buffer)
                av_free(buffer)
                oc.pointee.pb = nil
            }
            avformat_free_context(oc)
        }
        if format.pointee.flags & AVFMT_NOFILE == 0 {
            guard avio_open_dyn_buf(&oc.pointee.pb) >= 0 else { return true }
        }
        guard let st = avformat_new_stream(oc, nil),
              avcodec_parameters_from_context(st.pointee.codecpar, encoder) >= 0 else { return true }
        st.pointee.time_base = encoder.pointee.time_base
        return avformat_init_output(oc, nil) >= 0
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

    private func openEncoder(width: Int32, height: Int32, format: AVPixelFormat, timeBase: AVRational,
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

    /// Opens the encoder and writes the container header for the first frame's format.
    private func start(_ frame: borrowing Frame) throws(MediaOutputError) {
        let header = frame.header
        let d = header.description
        let source = try FrameAdapter.pixelFormat(of: header)
        guard let oc = formatContext else { throw .ffmpeg("avformat_alloc_output_context2", "no output") }

        // The encoder's pixel format: the stream's if it takes it, else its best for it.
        var format = source
        if let list = encoder.pointee.pix_fmts {
            var accepted: [AVPixelFormat] = []
            var p = list
            while p.pointee != AV_PIX_FMT_NONE { accepted.append(p.pointee); p += 1 }
            if !accepted.contains(source) {
                format = avcodec_find_best_pix_fmt_of_list(list, source, 0, nil)
                guard format != AV_PIX_FMT_NONE else {
                    throw .pixelFormat("the \(options.codec) encoder", header.pixelFormatName,
                                       accepted.compactMap { av_get_pix_fmt_name($0).map { String(cString: $0) } }.joined(separator: ", "))
                }
            }
        }
        let sourceFull = d.color.range == 2
        let adapter = try FrameAdapter(width: header.width, height: header.height, format: format,
                                       fullRange: sourceFull && !FrameAdapter.isRGB(source) ? true : nil)
        self.adapter = adapter

        // Time base 1/frame rate, as ffmpeg gives its encoders: timestamps are rounded onto
        // the rate's grid, and the codec's own timing (H.264's VUI) says the real rate.
        let rate = Self.frameRate(nominal: frameRate, d)
        encoderTimeBase = AVRational(num: rate.den, den: rate.num)
        // The colour the encoder will see (what the adapter writes when it converts).
        var color = d.color
        if format != source {
            color = color.converted(toRGB: FrameAdapter.isRGB(format), fullRange: sourceFull && !FrameAdapter.isRGB(source))
        }
        let sar = d.sampleAspectRatio
        let global = outputFormat.pointee.flags & AVFMT_GLOBALHEADER != 0
        codecContext = try openEncoder(width: Int32(header.width), height: Int32(header.height), format: format,
                                       timeBase: encoderTimeBase, frameRate: rate, globalHeader: global,
                                       what: "\(header.width)x\(header.height) " + (av_get_pix_fmt_name(format).map { String(cString: $0) } ?? "?")) { c in
            c.pointee.color_range = AVColorRange(rawValue: color.range)
            c.pointee.colorspace = AVColorSpace(rawValue: color.matrix)
            c.pointee.color_primaries = AVColorPrimaries(rawValue: color.primaries)
            c.pointee.color_trc = AVColorTransferCharacteristic(rawValue: color.transfer)
            if sar.num > 0, sar.den > 0 { c.pointee.sample_aspect_ratio = sar.av }
            // As ffmpeg: the first frame's field order (interlaced as TB/BT) and chroma location.
            c.pointee.field_order = d.fieldOrder.encoderFieldOrder(mjpeg: encoder.pointee.id == AV_CODEC_ID_MJPEG)
            c.pointee.chroma_sample_location = AVChromaLocation(rawValue: d.chromaLocation.rawValue)
        }
        guard let c = codecContext else { throw .ffmpeg("avcodec_open2", "no encoder") }

        guard let st = avformat_new_stream(oc, nil) else { throw .ffmpeg("avformat_new_stream", "out of memory") }
        stream = st
        var r = avcodec_parameters_from_context(st.pointee.codecpar, c)
        guard r >= 0 else { throw .ffmpeg("avcodec_parameters_from_context", ffmpegMessage(r)) }
        st.pointee.time_base = encoderTimeBase
        st.pointee.avg_frame_rate = rate
        st.pointee.r_frame_rate = rate
        st.pointee.sample_aspect_ratio = c.pointee.sample_aspect_ratio

        var muxerOptions: OpaquePointer?
        defer { av_dict_free(&muxerOptions) }
        let container = String(cString: outputFormat.pointee.name)
        if ["mp4", "mov", "ipod", "ismv", "3gp", "3g2", "psp", "f4v"].contains(container) {
            // delay_moov: the moov goes out with the first fragment, when the encoder's delay
            // (B-frames) is known, so its edit list keeps the first picture at time 0.
            av_dict_set(&muxerOptions, "movflags", "+frag_keyframe+empty_moov+delay_moov+default_base_moof", 0)
            av_dict_set(&muxerOptions, "frag_duration", "\(RecordOptions.fragmentMicros)", 0)
        } else if container == "matroska" || container == "webm" {
            av_dict_set(&muxerOptions, "cluster_time_limit", "\(RecordOptions.fragmentMicros / 1000)", 0)
        }
        r = avformat_write_header(oc, &muxerOptions)
        guard r >= 0 else { throw .ffmpeg("avformat_write_header", ffmpegMessage(r)) }
        headerWritten = true

        let encName = String(cString: encoder.pointee.name)
        let fmtName = av_get_pix_fmt_name(format).map { String(cString: $0) } ?? "?"
        let rateText = rate.den == 1 ? "\(rate.num)" : "\((Double(rate.num) / Double(rate.den) * 1000).rounded() / 1000)"
        outputDescription = "\(encName) \(fmtName) \(header.width)x\(header.height) \(rateText) fps, \(container)"
            + (format != source ? " (converted from \(header.pixelFormatName))" : "")
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

    /// Encodes `frame` and writes the packets the encoder has ready.
    public func write(_ frame: borrowing Frame) throws(MediaOutputError) {
        if adapter == nil { try start(frame) }
        guard let adapter, let c = codecContext else { return }
        let f = try adapter.avFrame(frame)
        let d = frame.header.description

        // Timestamps in the encoder's time base, strictly increasing (a restarted producer's
        // timestamps continue after the last frame's).
        var duration: Int64 = 1
        var pts = nextPts
        if let p = d.pts, d.timeBase.num > 0, d.timeBase.den > 0 {
            let tb = d.timeBase.av
            pts = av_rescale_q(p, tb, encoderTimeBase) + ptsOffset
            if d.duration > 0 { duration = max(1, av_rescale_q(d.duration, tb, encoderTimeBase)) }
        } else if d.duration > 0, d.timeBase.num > 0 {
            duration = max(1, av_rescale_q(d.duration, d.timeBase.av, encoderTimeBase))
        }
        if let lastPts, pts <= lastPts {
            ptsOffset += nextPts - pts
            pts = nextPts
        }
        f.pointee.pts = pts
        f.pointee.pkt_duration = duration
        f.pointee.pict_type = AV_PICTURE_TYPE_NONE
        d.applyFields(to: f)
        lastPts = pts
        nextPts = pts + duration

        let r = avcodec_send_frame(c, f)
        guard r >= 0 else { throw .ffmpeg("avcodec_send_frame", ffmpegMessage(r)) }
        frames += 1
        try drain()
    }

    private func drain() throws(MediaOutputError) {
        guard let c = codecContext, let packet, let st = stream, let oc = formatContext else { return }
        while true {
            var r = avcodec_receive_packet(c, packet)
            if r == cffmpeg_eagain() || r == cffmpeg_eof() { return }
            guard r >= 0 else { throw .ffmpeg("avcodec_receive_packet", ffmpegMessage(r)) }
            packet.pointee.stream_index = st.pointee.index
            av_packet_rescale_ts(packet, encoderTimeBase, st.pointee.time_base)
            r = av_interleaved_write_frame(oc, packet)   // takes the packet's reference
            guard r >= 0 else { throw .cannotOpen(path, ffmpegMessage(r)) }
            packets += 1
        }
    }

    /// Drains the encoder and writes the trailer; the file is complete after this.
    public func finish() throws(MediaOutputError) {
        guard !finished else { return }
        finished = true
        guard let oc = formatContext else { return }
        // No header (the container refused the stream at avformat_write_header): nothing to drain or end.
        if let c = codecContext, headerWritten {
            let r = avcodec_send_frame(c, nil)
            guard r >= 0 else { throw .ffmpeg("avcodec_send_frame", ffmpegMessage(r)) }
            try drain()
            let t = av_write_trailer(oc)
            guard t >= 0 else { throw .cannotOpen(path, ffmpegMessage(t)) }
        }
        if outputFormat.pointee.flags & AVFMT_NOFILE == 0, oc.pointee.pb != nil {
            avio_flush(oc.pointee.pb)
            finalBytes = max(0, avio_tell(oc.pointee.pb))
            let r = avio_closep(&oc.pointee.pb)
            guard r >= 0 else { throw .cannotOpen(path, ffmpegMessage(r)) }
        }
    }

    /// Bytes written to the file so far.
    public var bytesWritten: Int64 {
        guard let pb = formatContext?.pointee.pb else { return finalBytes }
        return max(0, avio_tell(pb))
    }
}
