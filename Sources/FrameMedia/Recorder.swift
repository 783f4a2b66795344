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
    /// `-pix_fmt`: the pixel format to encode; nil: see `RecordPixelFormat` (4:2:0 for
    /// H.264/H.265, else the stream's when the encoder takes it).
    public var pixelFormat: String?
    /// `-fps_mode`: every frame's own timestamp (passthrough), or resampled to the nominal rate (cfr).
    public var frameRateMode = FrameRateMode.passthrough

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
/// `RecordOptions`, timestamps from the frames, the stream's nominal rate as the frame rate.
///
/// Timestamps (`-fps_mode`): by default every frame keeps its own pts, in its own time base
/// (the first frame's is the encoder's and the stream's, so variable frame rates survive);
/// `cfr` duplicates and drops frames onto the nominal rate's grid as ffmpeg does.
///
/// The pixel format is `RecordPixelFormat`'s choice. Frames already in it are handed over in
/// place (libavcodec copies what it keeps); others are converted with libswscale (the frame's
/// matrix and range, as ffmpeg's scale filter). The recording keeps the first frame's size and
/// format: later frames of another size or format are scaled and converted to it.
///
/// The file stays readable when the recorder dies (see `RecordOptions.fragmentMicros`);
/// `finish()` drains the encoder and writes the trailer (index) for a complete file.
public final class Recorder {
    public let path: String
    public let options: RecordOptions
    /// The stream's exact nominal frame rate (set it before the first frame).
    public var frameRate: Rational?
    /// Frames handed to the encoder (with -fps_mode cfr: after duplicating and dropping).
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
    private var requestedFormat: AVPixelFormat?
    private var clock: RecordClock?
    /// -fps_mode cfr: the sync, and a copy of the last frame encoded (to repeat it).
    private var constantRate: ConstantRateSync?
    private var lastFrame: UnsafeMutablePointer<AVFrame>?
    private var finished = false
    /// avformat_write_header succeeded: only then may the encoder be drained and the trailer written.
    private var headerWritten = false
    private var finalBytes: Int64 = 0
    /// What the recording is, once started ("libx264 yuv420p 320x240 25 fps, mp4").
    public private(set) var outputDescription: String?
    /// Said once when the recording starts, when it loses something the stream has (chroma
    /// dropped by the 4:2:0 default, timestamps rounded for an encoder): one line each.
    public private(set) var notes: [String] = []
    /// Frames repeated and dropped by `-fps_mode cfr`.
    public private(set) var duplicated = 0, dropped = 0

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
        if let name = options.pixelFormat { requestedFormat = try Self.checkPixelFormat(name, codec) }
        // The settings, tried on a small picture, so a bad one fails now rather than at the first frame;
        // then the container, given that encoder's output (libavformat's own check, as ffmpeg's).
        let trialFormat = requestedFormat ?? codec.pointee.pix_fmts?.pointee ?? AV_PIX_FMT_YUV420P
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
        av_frame_free(&lastFrame)
        av_packet_free(&packet)
        if let oc = formatContext {
            if outputFormat.pointee.flags & AVFMT_NOFILE == 0 { avio_closep(&oc.pointee.pb) }
            avformat_free_context(oc)
        }
    }

    /// `-pix_fmt NAME`: FFmpeg's format of that name, which `encoder` must take.
    private static func checkPixelFormat(_ name: String, _ encoder: UnsafePointer<AVCodec>) throws(MediaOutputError) -> AVPixelFormat {
        let format = av_get_pix_fmt(name)
        let encoderName = String(cString: encoder.pointee.name)
        guard format != AV_PIX_FMT_NONE else {
            throw .encoderRefused(encoderName, "-pix_fmt '\(name)'", "FFmpeg knows no such pixel format (ffmpeg -pix_fmts lists them)")
        }
        let accepted = RecordPixelFormat.formats(of: encoder)
        guard accepted.isEmpty || accepted.contains(format) else {
            throw .pixelFormat("the \(encoderName) encoder", name, accepted.map(RecordPixelFormat.name).joined(separator: ", "))
        }
        return format
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

    /// Opens the encoder and writes the container header for the first frame's format.
    private func start(_ frame: borrowing Frame) throws(MediaOutputError) {
        let header = frame.header
        let d = header.description
        let source = try FrameAdapter.pixelFormat(of: header)
        let choice = try RecordPixelFormat(source: source, encoder: encoder, requested: requestedFormat)
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
        outputDescription = "\(encName) \(RecordPixelFormat.name(format)) \(header.width)x\(header.height) \(rateText) fps"
            + (options.frameRateMode == .cfr ? " cfr" : "") + ", \(String(cString: outputFormat.pointee.name))"
            + (format != source ? " (converted from \(header.pixelFormatName))" : "")
    }

    /// Opens the encoder for frames like `header`'s, in `format`. Its time base: passthrough,
    /// the frame's own (every pts kept exactly); cfr, or an encoder that refuses the frame's,
    /// 1/rate as ffmpeg gives its encoders (timestamps on the rate's grid).
    private func openEncoder(for header: FrameHeader, format: AVPixelFormat, color: ColorDescription,
                             rate: AVRational) throws(MediaOutputError) {
        let d = header.description
        let grid = AVRational(num: rate.den, den: rate.num)
        let own = d.timeBase.num > 0 && d.timeBase.den > 0 ? d.timeBase.av : grid
        var timeBases = options.frameRateMode == .cfr ? [grid] : [own]
        if av_cmp_q(own, grid) != 0, options.frameRateMode == .passthrough { timeBases.append(grid) }
        let what = "\(header.width)x\(header.height) " + RecordPixelFormat.name(format)
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
        clock = RecordClock(timeBase: options.frameRateMode == .cfr ? own : encoderTimeBase, rate: rate)
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

    /// The stream and the container header (with the crash-safe settings of `RecordOptions.fragmentMicros`).
    private func writeHeader(rate: AVRational) throws(MediaOutputError) {
        guard let oc = formatContext, let c = codecContext else { throw .ffmpeg("avcodec_open2", "no encoder") }
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

    /// Encodes `frame` and writes the packets the encoder has ready.
    public func write(_ frame: borrowing Frame) throws(MediaOutputError) {
        if adapter == nil { try start(frame) }
        guard let adapter, var clock else { return }
        let f = try adapter.avFrame(frame)
        let d = frame.header.description
        let (pts, duration) = clock.stamp(d)
        self.clock = clock
        f.pointee.pict_type = AV_PICTURE_TYPE_NONE
        d.applyFields(to: f)
        guard var sync = constantRate else {
            try encode(f, pts: pts, duration: duration)
            return
        }
        // -fps_mode cfr: ffmpeg's sync, in periods of the rate (the encoder's time base).
        // The frame's duration in periods, rounded; a frame shorter than half a period counts one.
        let periods = Float(Double(duration) * av_q2d(clock.timeBase) / av_q2d(encoderTimeBase)).rounded(.toNearestOrEven)
        let plan = sync.frame(at: ConstantRateSync.syncTime(pts, clock.timeBase, encoderTimeBase), duration: Double(max(periods, 1)))
        constantRate = sync
        if plan.total == 0 { dropped += 1 } else { duplicated += plan.total - 1 }
        for i in 0..<plan.total {
            let picture = i < plan.previous ? (lastFrame ?? f) : f
            try encode(picture, pts: plan.firstPts + Int64(i), duration: 1)
        }
        try keep(f)
    }

    /// Sends one picture to the encoder and writes what it has ready.
    private func encode(_ f: UnsafeMutablePointer<AVFrame>, pts: Int64, duration: Int64) throws(MediaOutputError) {
        guard let c = codecContext else { return }
        f.pointee.pts = pts
        f.pointee.pkt_duration = duration
        let r = avcodec_send_frame(c, f)
        guard r >= 0 else { throw .ffmpeg("avcodec_send_frame", ffmpegMessage(r)) }
        frames += 1
        try drain()
    }

    /// -fps_mode cfr: a copy of the frame just encoded, which a gap after it repeats.
    private func keep(_ f: UnsafeMutablePointer<AVFrame>) throws(MediaOutputError) {
        if lastFrame == nil {
            guard let copy = av_frame_alloc() else { throw .ffmpeg("av_frame_alloc", "out of memory") }
            copy.pointee.width = f.pointee.width
            copy.pointee.height = f.pointee.height
            copy.pointee.format = f.pointee.format
            let r = av_frame_get_buffer(copy, 0)
            lastFrame = copy
            guard r >= 0 else { av_frame_free(&lastFrame); throw .ffmpeg("av_frame_get_buffer", ffmpegMessage(r)) }
        }
        guard let copy = lastFrame else { return }
        var r = av_frame_make_writable(copy)
        if r >= 0 { r = av_frame_copy(copy, f) }
        if r >= 0 { r = av_frame_copy_props(copy, f) }
        guard r >= 0 else { throw .ffmpeg("av_frame_copy", ffmpegMessage(r)) }
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
            if var sync = constantRate, let last = lastFrame {
                // ffmpeg repeats the last frame at the end as often as the frames before it were.
                let (total, first) = sync.end()
                for i in 0..<total { try encode(last, pts: first + Int64(i), duration: 1) }
                duplicated += total
            }
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
