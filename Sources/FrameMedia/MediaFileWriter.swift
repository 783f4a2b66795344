import CFFmpeg
import FrameServer
import Glibc

/// Encodes a stream's frames with libavcodec and writes them with libavformat, like an
/// asset writer: the container from the file name (or `-f`), the encoder's settings from
/// `MediaFileOptions`, timestamps from the frames, the stream's nominal rate as the frame rate.
///
/// Timestamps (`-fps_mode`): by default every frame keeps its own pts, in its own time base
/// (the first frame's is the encoder's and the stream's, so variable frame rates survive);
/// `cfr` duplicates and drops frames onto the nominal rate's grid as ffmpeg does.
///
/// The pixel format is `MediaFilePixelFormat`'s choice. Frames already in it are handed over in
/// place (libavcodec copies what it keeps); others are converted with libswscale (the frame's
/// matrix and range, as ffmpeg's scale filter). The recording keeps the first frame's size and
/// format: later frames of another size or format are scaled and converted to it.
///
/// The file stays readable when its writer dies (see `MediaFileOptions.fragmentMicros`);
/// `finish()` drains the encoder and writes the trailer (index) for a complete file.
public final class MediaFileWriter {
    public let path: String
    public let options: MediaFileOptions
    /// The stream's exact nominal frame rate (set it before the first frame).
    public var frameRate: Rational?
    /// Frames handed to the encoder (with -fps_mode cfr: after duplicating and dropping).
    public internal(set) var frames = 0
    /// Packets written to the file.
    public internal(set) var packets = 0
    /// Frames converted with libswscale (the others were encoded from the slot in place).
    public var convertedFrames: Int { adapter?.convertedFrames ?? 0 }

    let outputFormat: UnsafePointer<AVOutputFormat>
    let encoder: UnsafePointer<AVCodec>
    var formatContext: UnsafeMutablePointer<AVFormatContext>?
    var codecContext: UnsafeMutablePointer<AVCodecContext>?
    var stream: UnsafeMutablePointer<AVStream>?
    var packet: UnsafeMutablePointer<AVPacket>?
    var adapter: FrameAdapter?
    var encoderTimeBase = AVRational(num: 1, den: 25)
    var requestedFormat: AVPixelFormat?
    var clock: MediaFileClock?
    /// -fps_mode cfr: the sync, and a copy of the last frame encoded (to repeat it).
    var constantRate: ConstantRateSync?
    var lastFrame: UnsafeMutablePointer<AVFrame>?
    var finished = false
    /// avformat_write_header succeeded: only then may the encoder be drained and the trailer written.
    var headerWritten = false
    var finalBytes: Int64 = 0
    /// What the recording is, once started ("libx264 yuv420p 320x240 25 fps, mp4").
    public internal(set) var outputDescription: String?
    /// Said once when the recording starts, when it loses something the stream has (chroma
    /// dropped by the 4:2:0 default, timestamps rounded for an encoder): one line each.
    public internal(set) var notes: [String] = []
    /// Frames repeated and dropped by `-fps_mode cfr`.
    public internal(set) var duplicated = 0, dropped = 0
    /// The sound's format, set before the first frame: the header then has an audio stream
    /// too (`writeAudio`). nil: a silent recording.
    public var audioFormat: AudioFormat?
    /// The audio encoder, its stream, and the conversion to the encoder's format and frame size.
    var audioCodec: UnsafeMutablePointer<AVCodecContext>?
    var audioStream: UnsafeMutablePointer<AVStream>?
    var audioConverter: AudioSampleConverter?
    /// The sound's encoder and format ("aac 44100 Hz stereo fltp"), once its stream exists.
    var audioDescription: String?
    /// Audio frames handed to the encoder.
    public internal(set) var audioFrames = 0

    /// Checks the container, encoder and settings (opening the encoder once on a small test
    /// picture) and creates the file; the first frame fixes size and format.
    public init(path: String, options: MediaFileOptions) throws(MediaOutputError) {
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
            guard let muxer = MediaFileOptions.extensions[ext], let f = av_guess_format(muxer, nil, nil) else {
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
        // Every packet reaches the file when the muxer emits it (see MediaFileOptions.fragmentMicros).
        oc.pointee.flush_packets = 1
        guard let p = av_packet_alloc() else { throw .ffmpeg("av_packet_alloc", "out of memory") }
        packet = p
    }

    deinit {
        avcodec_free_context(&codecContext)
        avcodec_free_context(&audioCodec)
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
        let accepted = MediaFilePixelFormat.formats(of: encoder)
        guard accepted.isEmpty || accepted.contains(format) else {
            throw .pixelFormat("the \(encoderName) encoder", name, accepted.map(MediaFilePixelFormat.name).joined(separator: ", "))
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

    /// Bytes written to the file so far.
    public var bytesWritten: Int64 {
        guard let pb = formatContext?.pointee.pb else { return finalBytes }
        return max(0, avio_tell(pb))
    }
}
