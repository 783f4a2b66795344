import CFFmpeg
import FrameServer
import Glibc

/// Decodes the first video stream of a file or of standard input with libavformat and
/// libavcodec, one frame at a time, as `ffmpeg -i INPUT -map 0:v:0` would.
///
/// Decode errors are counted (`decodeErrors`) and decoding goes on, as ffmpeg does; what
/// makes decoding impossible (a missing file, no video stream, no decoder) throws at `init`.
/// Timestamps are rebased so that the input starts at 0, as ffmpeg does without `-copyts`:
/// the offset is added to every packet (fftools' `ts_offset`), as are, with `loops`, the
/// durations of the plays before (fftools' `seek_to_start`). `-ss` and `-t` then keep the
/// frames ffmpeg's `trim` filter keeps. Use it from one thread.
///
/// libavdevice's inputs are registered, so `formatName` may name a device as ffmpeg's `-f`
/// does (`lavfi`, `x11grab`, `v4l2`, ...); `isLiveSource` says whether the input is a capture
/// device, whose frames come at the device's pace whether or not anyone reads them.
public final class MediaDecoder {
    /// What was opened: `-` for standard input.
    public let input: String
    /// The video stream's time base (the unit of every frame's pts and duration).
    public let timeBase: Rational
    /// FFmpeg's guess of the stream's frame rate (`av_guess_frame_rate`), exact; nil if unknown.
    public let frameRate: Rational?
    /// The stream's chroma location (codecpar), for frames that do not say theirs.
    let streamChromaLocation: ChromaLocation
    /// The decoder's name (`h264`, `ffv1`, ...).
    public let codecName: String
    /// Packets or frames the decoder rejected, frames it concealed errors in, and read errors
    /// (decoding went on).
    public internal(set) var decodeErrors = 0
    /// Frames returned so far.
    public internal(set) var framesDecoded = 0
    /// Packets or frames the decoder rejected (what ffmpeg counts as decoding errors; not
    /// concealed frames, not read errors).
    public internal(set) var decodeFailures = 0
    /// ffmpeg's `-max_error_rate` rule (default 2/3): more decoding errors than that share of
    /// all decode attempts is a failed input; ffmpeg then exits with status 69.
    public func tooManyErrors(maxErrorRate: Double = 2.0 / 3.0) -> Bool {
        decodeFailures > 0 && Double(decodeFailures) > maxErrorRate * Double(framesDecoded + decodeFailures)
    }
    /// Packets the demuxer skipped as damaged (it logged an error and read on: libavformat's
    /// NUT demuxer past a frame it finds too large, for one), which never reached the decoder.
    public internal(set) var skippedPackets = 0
    /// Told at the first skipped packet, then at most once a second, how many it skipped since
    /// and the demuxer's words (`reportPendingSkips` says the rest at the end).
    public var onSkipped: ((String) -> Void)?
    var skipsUnreported = 0
    var lastSkipReport: UInt64?
    var lastSkipReason = ""
    /// What the first decode error was (with `strict`, why decoding ended), nil if none.
    public internal(set) var firstError: String?
    /// The input format's name as libavformat calls it (`mov,mp4,m4a,3gp,3g2,mj2`, `x11grab`, ...).
    public let inputFormatName: String
    /// The input format is one of libavdevice's input devices (its class's category says so).
    public let isDevice: Bool
    /// A capture device (every device but `lavfi`, whose filter graph makes frames only when
    /// asked for them): its frames come at its own pace, so a producer must not wait for
    /// consumers (ffmpeg's own device inputs drop what is not read in time, too).
    public var isLiveSource: Bool { isDevice && inputFormatName != "lavfi" }

    /// The input's streams that are not published (subtitles, data, other video and audio
    /// streams, the audio without `options.audio`), as `#1 audio (aac)`.
    public private(set) var uncarriedStreams: [String] = []
    /// The audio stream decoded beside the video (`options.audio`), nil when there is none.
    public private(set) var audio: AudioTrack?
    /// Why the audio track could not be opened (it is then not carried), nil if it was.
    public private(set) var audioProblem: String?
    /// What stopped publishing the audio (its producer failed): `next()` then ends.
    var audioFailure: ProducerError?
    /// The input's offset, microseconds (its start time, plus -ss), as fftools' ts_offset.
    let startMicros: Int64

    var format: UnsafeMutablePointer<AVFormatContext>?
    /// The demuxer, for what the seek extension reads (duration, seekable).
    var formatContext: UnsafeMutablePointer<AVFormatContext>? { format }
    var codec: UnsafeMutablePointer<AVCodecContext>?
    var packet: UnsafeMutablePointer<AVPacket>?
    var frame: UnsafeMutablePointer<AVFrame>?
    let streamIndex: Int32
    /// The index of the video stream published.
    public var videoStreamIndex: Int { Int(streamIndex) }
    /// Decodes into a producer's slots when attached (zero copy).
    let allocator: SlotAllocator?
    /// Added to every packet's timestamps (ffmpeg's ts_offset, in the stream's time base):
    /// `baseOffset` from the start (and -ss), another after a run-time seek.
    var tsOffset: Int64
    let baseOffset: Int64
    /// The media time (seconds from the input's start) that pts 0 stands for: -ss, or the
    /// target of the last run-time seek.
    public internal(set) var origin: Double
    let options: MediaInputOptions
    /// Plays still to come after this one (-1: forever).
    var loopsLeft: Int
    /// What the plays so far add to timestamps, and the pts span seen (fftools' duration, min_pts, max_pts).
    var loopOffset: Int64 = 0
    /// How long the plays so far last by their sound (`AudioTrack.endPlay`), nil without sound.
    var audioPlays: (duration: Int64, timeBase: AVRational)?
    var minPts = Int64.max, maxPts = Int64.min
    /// Times the input went back to its start (`loops`): the play now is number `loopsPlayed + 1`.
    public internal(set) var loopsPlayed = 0
    /// The file time (seconds from the input's start) that pts `loopOffset` stands for in
    /// this play: -ss, or the target of the last run-time seek until the next loop.
    var playOrigin: Double
    let frameDurationGuess: Int64
    /// Frames before pts 0 are dropped (-ss, a run-time seek: ffmpeg's accurate seek).
    var trimming: Bool
    /// The `-t` limit in the stream's time base, and the first kept frame's pts.
    let durationLimit: Int64?
    var firstKeptPts: Int64?
    /// The pts a frame the decoder gives without one gets (a raw H.264 stream has none), as
    /// ffmpeg's command line gives it: the end of the frame before (its pts plus its duration).
    var followingPts: Int64 = 0
    /// Seeking failed (`-ss` on a pipe): frames are still dropped up to the start, as ffmpeg does.
    public private(set) var seekFailed = false
    var receiving = false
    var draining = false
    var finished = false

    /// Opens `input` (a path or URL; `-` reads standard input), optionally forcing the
    /// input format `formatName` (ffmpeg's `-f`), and prepares a decoder for its first
    /// video stream running `threads` threads (0: as many as FFmpeg likes, ffmpeg's default).
    public init(input: String, formatName: String? = nil, threads: Int = 0,
                options: MediaInputOptions = MediaInputOptions(), allocator: SlotAllocator? = nil) throws(MediaInputError) {
        self.input = input
        self.allocator = allocator
        self.options = options
        loopsLeft = options.loops
        av_log_set_level(AV_LOG_FATAL)   // errors are counted and reported by the caller
        _ = devicesRegistered
        let ctx = try Self.openInput(input, formatName: formatName)
        format = ctx
        inputFormatName = String(cString: ctx.pointee.iformat.pointee.name)
        isDevice = cffmpeg_is_device(ctx.pointee.iformat) != 0
        // -map 0:a:N of a stream the input lacks is an error, as ffmpeg's "matches no streams".
        if options.audio, let n = options.audioStream, AudioTrack.find(in: ctx, nth: n) == nil {
            let has = AudioTrack.count(in: ctx)
            avformat_close_input(&format)
            throw .noAudioStream(input, n, has: has)
        }
        let found: (index: Int32, decoder: UnsafePointer<AVCodec>)?
        do { found = try Self.videoDecoder(in: ctx, input: input) } catch {
            // An input with sound only (WAV, FLAC, ...) is its audio stream when audio is wanted.
            guard case .noVideoStream = error, options.audio,
                  (options.audioStream.map { AudioTrack.find(in: ctx, nth: $0) } ?? AudioTrack.find(in: ctx, related: -1)) != nil else {
                avformat_close_input(&format)
                throw error
            }
            found = nil
        }
        streamIndex = found?.index ?? -1
        let stream = found.map { ctx.pointee.streams[Int($0.index)]! }
        let parameters = stream?.pointee.codecpar
        codecName = found.map { String(cString: $0.decoder.pointee.name) } ?? "none"
        streamChromaLocation = parameters.flatMap { ChromaLocation(rawValue: UInt32($0.pointee.chroma_location.rawValue)) } ?? .unspecified
        let tb = stream?.pointee.time_base ?? AVRational(num: 1, den: AV_TIME_BASE)
        timeBase = Rational(tb.num, tb.den)
        let fr = stream.map { av_guess_frame_rate(ctx, $0, nil) } ?? AVRational(num: 0, den: 1)
        frameRate = fr.num > 0 && fr.den > 0 ? Rational(fr.num, fr.den) : nil
        // ffmpeg (without -copyts) shifts the input so that its start time (plus -ss) is 0.
        let start = ctx.pointee.start_time
        let timestamp = (options.start ?? 0) + (start == cffmpeg_nopts() ? 0 : start)
        let microseconds = AVRational(num: 1, den: AV_TIME_BASE)
        startMicros = timestamp
        tsOffset = -av_rescale_q(timestamp, microseconds, tb)
        baseOffset = tsOffset
        origin = Double(options.start ?? 0) / 1e6
        playOrigin = origin
        trimming = options.start != nil
        durationLimit = options.duration.map { av_rescale_q($0, microseconds, tb) }
        // One frame's duration, for the loop offset (fftools: from the average frame rate, else 1).
        let avg = stream?.pointee.avg_frame_rate ?? AVRational(num: 0, den: 1)
        frameDurationGuess = avg.num > 0 && avg.den > 0 ? av_rescale_q(1, AVRational(num: avg.den, den: avg.num), tb) : 1
        let seekIndex = found?.index ?? -1
        if options.start != nil, Self.seekFile(ctx, streamIndex: seekIndex, to: timestamp) < 0 { seekFailed = true }
        if let found, let parameters {
            try openCodec(found.decoder, parameters: parameters, timeBase: tb, threads: threads)
        } else {
            packet = av_packet_alloc()
            guard packet != nil else { close(); throw .ffmpeg("av_packet_alloc", "out of memory") }
        }
        let refusedAudio = options.audio ? openAudio(ctx) : nil
        // A track chosen but refused is said in `audioProblem`, not again among the others.
        uncarriedStreams = Self.streamNames(ctx, except: [streamIndex] + [audio?.streamIndex, refusedAudio].compactMap { $0 })
        if audio == nil, found == nil { close(); throw .noVideoStream(input) }
    }

    /// Whether the input has a video stream (false: an input with sound only, `audio`).
    public var hasVideo: Bool { streamIndex >= 0 }

    /// Opens the audio stream ffmpeg would map beside the video; a track that cannot be
    /// decoded is said in `audioProblem` and left out: its index is returned.
    private func openAudio(_ ctx: UnsafeMutablePointer<AVFormatContext>) -> Int32? {
        let chosen = options.audioStream.map { AudioTrack.find(in: ctx, nth: $0) } ?? AudioTrack.find(in: ctx, related: streamIndex)
        guard let index = chosen else { return nil }   // (-map 0:a:N of a missing stream was refused at open)
        do {
            audio = try AudioTrack(ctx, index: index, startMicros: startMicros, trimming: options.start != nil,
                                   durationMicros: options.duration, capture: isLiveSource, zeroCopy: options.audioZeroCopy)
        } catch {
            audioProblem = error.description
            return index
        }
        return nil
    }

    deinit { close() }

    /// Frees everything FFmpeg allocated (also done at deinit).
    public func close() {
        audio?.close()
        avcodec_free_context(&codec)
        av_packet_free(&packet)
        av_frame_free(&frame)
        if format != nil { avformat_close_input(&format) }
        finished = true
    }
}

/// libavdevice's inputs (`-f x11grab`, `-f v4l2`, `-f lavfi`, ...), registered once before
/// the first input is opened.
private let devicesRegistered: Void = avdevice_register_all()
