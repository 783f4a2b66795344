import CFFmpeg
import FrameServer
import Glibc

/// Why a media input cannot be decoded at all (one clear line each).
public enum MediaInputError: Error, CustomStringConvertible, Sendable {
    /// libavformat cannot open or read the input (missing file, unknown format, ...).
    case cannotOpen(String, String)
    /// `-f NAME` names no input format libavformat knows.
    case unknownInputFormat(String)
    /// The input has no video stream.
    case noVideoStream(String)
    /// libavcodec has no decoder for the video stream's codec.
    case unsupportedCodec(String, String)
    /// A decoded frame has a pixel format framesrv cannot carry.
    case unsupportedPixelFormat(String)
    /// An FFmpeg call failed (its name and FFmpeg's message).
    case ffmpeg(String, String)
    /// With `strict`: the first decode error (the input, what failed).
    case decodeError(String, String)

    public var description: String {
        switch self {
        case .cannotOpen(let input, let message): return "cannot open '\(input)': \(message)"
        case .unknownInputFormat(let name): return "FFmpeg knows no input format '\(name)'"
        case .noVideoStream(let input): return "'\(input)' has no video stream"
        case .unsupportedCodec(let input, let codec): return "no decoder for the video codec '\(codec)' of '\(input)'"
        case .unsupportedPixelFormat(let name):
            return "decoded frames are \(name), which framesrv cannot carry (known: "
                + PixelFormat.allCases.map(\.name).joined(separator: ", ") + ", and yuvj420p/yuvj422p/yuvj444p)"
        case .ffmpeg(let call, let message): return "FFmpeg's \(call) failed: \(message)"
        case .decodeError(let input, let what): return "decode error in '\(input)' (--strict): \(what)"
        }
    }
}

/// Input options with ffmpeg's meaning (`ffmpeg -ss T -t D -stream_loop N -i INPUT`).
public struct MediaInputOptions: Sendable {
    /// `-ss`: start here (microseconds from the input's start): seek to the keyframe before
    /// it, decode and drop the frames before it (ffmpeg's accurate seek); timestamps start at 0 there.
    public var start: Int64?
    /// `-t`: stop after this much output (microseconds), measured from the first frame kept.
    public var duration: Int64?
    /// `-stream_loop`: play the input this many more times (-1: forever), timestamps continuing.
    public var loops = 0
    /// The first decode error ends decoding (`next()` returns nil, `firstError` says why)
    /// instead of being counted and skipped.
    public var strict = false

    public init(start: Int64? = nil, duration: Int64? = nil, loops: Int = 0, strict: Bool = false) {
        self.start = start; self.duration = duration; self.loops = loops; self.strict = strict
    }

    /// Parses a time as ffmpeg's `-ss`/`-t` do (`av_parse_time`): seconds (`1.5`) or
    /// `[-][HH:]MM:SS[.m...]`; microseconds, nil if it is not a time.
    public static func parseTime(_ text: String) -> Int64? {
        var us: Int64 = 0
        guard !text.isEmpty, av_parse_time(&us, text, 1) >= 0 else { return nil }
        return us
    }
}

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
    public private(set) var decodeErrors = 0
    /// Frames returned so far.
    public private(set) var framesDecoded = 0
    /// Packets or frames the decoder rejected (what ffmpeg counts as decoding errors; not
    /// concealed frames, not read errors).
    public private(set) var decodeFailures = 0
    /// ffmpeg's `-max_error_rate` rule (default 2/3): more decoding errors than that share of
    /// all decode attempts is a failed input; ffmpeg then exits with status 69.
    public func tooManyErrors(maxErrorRate: Double = 2.0 / 3.0) -> Bool {
        decodeFailures > 0 && Double(decodeFailures) > maxErrorRate * Double(framesDecoded + decodeFailures)
    }
    /// What the first decode error was (with `strict`, why decoding ended), nil if none.
    public private(set) var firstError: String?
    /// The input format's name as libavformat calls it (`mov,mp4,m4a,3gp,3g2,mj2`, `x11grab`, ...).
    public let inputFormatName: String
    /// The input format is one of libavdevice's input devices (its class's category says so).
    public let isDevice: Bool
    /// A capture device (every device but `lavfi`, whose filter graph makes frames only when
    /// asked for them): its frames come at its own pace, so a producer must not wait for
    /// consumers (ffmpeg's own device inputs drop what is not read in time, too).
    public var isLiveSource: Bool { isDevice && inputFormatName != "lavfi" }

    /// The input's streams that are not published (audio, subtitles, data, other video
    /// streams), as `#1 audio (aac)`: framesrv carries one video stream for now.
    public private(set) var uncarriedStreams: [String] = []

    private var format: UnsafeMutablePointer<AVFormatContext>?
    /// The demuxer, for what the seek extension reads (duration, seekable).
    var formatContext: UnsafeMutablePointer<AVFormatContext>? { format }
    private var codec: UnsafeMutablePointer<AVCodecContext>?
    private var packet: UnsafeMutablePointer<AVPacket>?
    private var frame: UnsafeMutablePointer<AVFrame>?
    private let streamIndex: Int32
    /// The index of the video stream published.
    public var videoStreamIndex: Int { Int(streamIndex) }
    /// Decodes into a producer's slots when attached (zero copy).
    private let allocator: SlotAllocator?
    /// Added to every packet's timestamps (ffmpeg's ts_offset, in the stream's time base):
    /// `baseOffset` from the start (and -ss), another after a run-time seek.
    private var tsOffset: Int64
    private let baseOffset: Int64
    /// The media time (seconds from the input's start) that pts 0 stands for: -ss, or the
    /// target of the last run-time seek.
    public private(set) var origin: Double
    private let options: MediaInputOptions
    /// Plays still to come after this one (-1: forever).
    private var loopsLeft: Int
    /// What the plays so far add to timestamps, and the pts span seen (fftools' duration, min_pts, max_pts).
    private var loopOffset: Int64 = 0
    private var minPts = Int64.max, maxPts = Int64.min
    /// Times the input went back to its start (`loops`): the play now is number `loopsPlayed + 1`.
    public private(set) var loopsPlayed = 0
    /// The file time (seconds from the input's start) that pts `loopOffset` stands for in
    /// this play: -ss, or the target of the last run-time seek until the next loop.
    private var playOrigin: Double
    private let frameDurationGuess: Int64
    /// Frames before pts 0 are dropped (-ss, a run-time seek: ffmpeg's accurate seek).
    private var trimming: Bool
    /// The `-t` limit in the stream's time base, and the first kept frame's pts.
    private let durationLimit: Int64?
    private var firstKeptPts: Int64?
    /// Seeking failed (`-ss` on a pipe): frames are still dropped up to the start, as ffmpeg does.
    public private(set) var seekFailed = false
    private var receiving = false
    private var draining = false
    private var finished = false

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
        var inputFormat: UnsafePointer<AVInputFormat>?
        if let formatName {
            guard let f = av_find_input_format(formatName) else { throw .unknownInputFormat(formatName) }
            inputFormat = f
        }
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        var r = avformat_open_input(&ctx, input == "-" ? "pipe:0" : input, inputFormat, nil)
        guard r >= 0, let ctx else { throw .cannotOpen(input, ffmpegMessage(r)) }
        format = ctx
        inputFormatName = String(cString: ctx.pointee.iformat.pointee.name)
        isDevice = cffmpeg_is_device(ctx.pointee.iformat) != 0
        r = avformat_find_stream_info(ctx, nil)
        guard r >= 0 else {
            avformat_close_input(&format)
            throw .cannotOpen(input, ffmpegMessage(r))
        }
        let index = av_find_best_stream(ctx, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
        guard index >= 0 else {
            avformat_close_input(&format)
            if index == cffmpeg_decoder_not_found() { throw .unsupportedCodec(input, "?") }
            throw .noVideoStream(input)
        }
        streamIndex = index
        uncarriedStreams = Self.streamNames(ctx, except: index)
        let stream = ctx.pointee.streams[Int(index)]!
        let parameters = stream.pointee.codecpar!
        let codecID = parameters.pointee.codec_id
        guard let decoder = avcodec_find_decoder(codecID) else {
            let name = String(cString: avcodec_get_name(codecID))
            avformat_close_input(&format)
            throw .unsupportedCodec(input, name)
        }
        codecName = String(cString: decoder.pointee.name)
        streamChromaLocation = ChromaLocation(rawValue: UInt32(parameters.pointee.chroma_location.rawValue)) ?? .unspecified
        let tb = stream.pointee.time_base
        timeBase = Rational(tb.num, tb.den)
        let fr = av_guess_frame_rate(ctx, stream, nil)
        frameRate = fr.num > 0 && fr.den > 0 ? Rational(fr.num, fr.den) : nil
        // ffmpeg (without -copyts) shifts the input so that its start time (plus -ss) is 0.
        let start = ctx.pointee.start_time
        let timestamp = (options.start ?? 0) + (start == cffmpeg_nopts() ? 0 : start)
        let microseconds = AVRational(num: 1, den: AV_TIME_BASE)
        tsOffset = -av_rescale_q(timestamp, microseconds, tb)
        baseOffset = tsOffset
        origin = Double(options.start ?? 0) / 1e6
        playOrigin = origin
        trimming = options.start != nil
        durationLimit = options.duration.map { av_rescale_q($0, microseconds, tb) }
        // One frame's duration, for the loop offset (fftools: from the average frame rate, else 1).
        let avg = stream.pointee.avg_frame_rate
        frameDurationGuess = avg.num > 0 && avg.den > 0 ? av_rescale_q(1, AVRational(num: avg.den, den: avg.num), tb) : 1
        if options.start != nil, Self.seekFile(ctx, streamIndex: index, to: timestamp) < 0 { seekFailed = true }

        codec = avcodec_alloc_context3(decoder)
        packet = av_packet_alloc()
        frame = av_frame_alloc()
        guard let codec, packet != nil, frame != nil else {
            close()
            throw .ffmpeg("avcodec_alloc_context3", "out of memory")
        }
        r = avcodec_parameters_to_context(codec, parameters)
        guard r >= 0 else { close(); throw .ffmpeg("avcodec_parameters_to_context", ffmpegMessage(r)) }
        codec.pointee.pkt_timebase = tb
        codec.pointee.thread_count = Int32(max(0, threads))
        allocator?.install(on: codec)
        r = avcodec_open2(codec, decoder, nil)
        guard r >= 0 else { close(); throw .unsupportedCodec(input, "\(codecName) (\(ffmpegMessage(r)))") }
    }

    deinit { close() }

    /// The end of one play with more to come (the decoder drained): as fftools' seek_to_start,
    /// back to the start, with timestamps continuing after the longest play so far.
    private func seekToStart() -> Bool {
        guard let format, let codec else { return false }
        let r = avformat_seek_file(format, -1, Int64.min, format.pointee.start_time == cffmpeg_nopts() ? 0 : format.pointee.start_time,
                                   format.pointee.start_time == cffmpeg_nopts() ? 0 : format.pointee.start_time, 0)
        guard r >= 0 else { noteError("seeking back to the start", r); return false }
        avcodec_flush_buffers(codec)
        // After a run-time seek the plays to come are rebased as the first one was.
        tsOffset = baseOffset
        var duration = frameDurationGuess
        if maxPts > minPts { duration += maxPts - minPts }
        loopOffset = max(loopOffset, duration)
        if loopsLeft > 0 { loopsLeft -= 1 }
        loopsPlayed += 1
        playOrigin = Double(options.start ?? 0) / 1e6
        draining = false
        receiving = false
        return true
    }

    /// Seeks to media time `seconds` (from the input's start) at run time, as `-ss` does at
    /// the start: to the keyframe before it, the decoder flushed, the frames before it
    /// decoded and dropped, and timestamps rebased so that it is pts 0 (ffmpeg's rule: the
    /// frames are those of `ffmpeg -ss T -i INPUT`). `-t` counts again from there.
    public func seek(to seconds: Double) throws(MediaInputError) {
        guard let format, let codec else { throw .ffmpeg("avformat_seek_file", "the input is closed") }
        let start = format.pointee.start_time == cffmpeg_nopts() ? 0 : format.pointee.start_time
        let timestamp = Int64((seconds * 1e6).rounded()) + start
        let r = Self.seekFile(format, streamIndex: streamIndex, to: timestamp)
        guard r >= 0 else { throw .ffmpeg("avformat_seek_file", ffmpegMessage(r)) }
        avcodec_flush_buffers(codec)
        tsOffset = -av_rescale_q(timestamp, AVRational(num: 1, den: AV_TIME_BASE), AVRational(num: timeBase.num, den: timeBase.den))
        origin = seconds
        playOrigin = seconds
        trimming = true
        firstKeptPts = nil
        loopOffset = 0
        minPts = Int64.max
        maxPts = Int64.min
        receiving = false
        draining = false
        finished = false
    }

    /// Where a frame lies in the file: seconds from the input's start, whichever play of a
    /// loop it belongs to (its media time goes on growing across plays; this does not).
    public func filePosition(of description: FrameDescription) -> Double? {
        guard let pts = description.pts, timeBase.den > 0 else { return nil }
        return max(0, Double(pts - loopOffset) * Double(timeBase.num) / Double(timeBase.den) + playOrigin)
    }

    /// Counts a decode error; the first one is remembered, and with `strict` ends decoding.
    /// Returns whether decoding goes on.
    @discardableResult
    private func noteError(_ what: String, _ code: Int32? = nil, failure: Bool = true) -> Bool {
        decodeErrors += 1
        if failure { decodeFailures += 1 }
        if firstError == nil { firstError = code.map { "\(what): \(ffmpegMessage($0))" } ?? what }
        if options.strict { finished = true; return false }
        return true
    }

    /// Frees everything FFmpeg allocated (also done at deinit).
    public func close() {
        avcodec_free_context(&codec)
        av_packet_free(&packet)
        av_frame_free(&frame)
        if format != nil { avformat_close_input(&format) }
        finished = true
    }

    /// The next decoded frame, or nil at the end of the input (the decoder drained).
    /// The frame is valid until the next call.
    public func next() -> DecodedFrame? {
        guard let codec, let packet, let frame, let format, !finished else { return nil }
        var consecutiveErrors = 0
        while true {
            if receiving {
                av_frame_unref(frame)
                let r = avcodec_receive_frame(codec, frame)
                if r == 0 {
                    // ffmpeg's trim filter (accurate seek, -t): frames before the start are dropped;
                    // the stream ends once a frame is -t or more after the first one kept.
                    let pts = frame.pointee.best_effort_timestamp
                    if pts != cffmpeg_nopts() {
                        if trimming, pts < 0 { continue }
                        if let durationLimit {
                            if firstKeptPts == nil { firstKeptPts = pts }
                            if pts - firstKeptPts! >= durationLimit { finished = true; return nil }
                        }
                    }
                    // A frame the decoder concealed errors in is still delivered (as ffmpeg does), and
                    // counted; with `strict` it ends decoding instead.
                    if frame.pointee.decode_error_flags != 0 || frame.pointee.flags & AV_FRAME_FLAG_CORRUPT != 0 {
                        guard noteError("frame \(framesDecoded + 1) has errors the decoder concealed", failure: false) else { return nil }
                    }
                    framesDecoded += 1
                    // As ffmpeg: the container's aspect ratio when it has one, else the frame's.
                    let sar = av_guess_sample_aspect_ratio(format, format.pointee.streams[Int(streamIndex)], frame)
                    return DecodedFrame(frame: frame, timeBase: timeBase, sampleAspectRatio: Rational(sar.num, sar.den),
                                        chroma: streamChromaLocation, allocator: allocator)
                } else if r == cffmpeg_eof() {
                    if draining, loopsLeft != 0, seekToStart() { continue }
                    finished = true
                    return nil
                } else if r == cffmpeg_eagain() {
                    receiving = false
                    if draining {
                        if loopsLeft != 0, seekToStart() { continue }
                        finished = true
                        return nil
                    }
                } else {
                    guard noteError("decoding failed", r) else { return nil }
                    consecutiveErrors += 1
                    if !draining { receiving = false }
                    if consecutiveErrors > 10_000 { finished = true; return nil }
                }
                continue
            }
            let r = av_read_frame(format, packet)
            if r < 0 {
                // End of input (or a read error, which ffmpeg also treats as the end): drain.
                if r != cffmpeg_eof(), !noteError("reading the input failed", r, failure: false) { return nil }
                _ = avcodec_send_packet(codec, nil)
                draining = true
                receiving = true
                continue
            }
            defer { av_packet_unref(packet) }
            guard packet.pointee.stream_index == streamIndex else { continue }
            // fftools' process_input: the input's offset, then the plays before this one.
            if packet.pointee.pts != cffmpeg_nopts() {
                packet.pointee.pts += tsOffset + loopOffset
                maxPts = max(maxPts, packet.pointee.pts)
                minPts = min(minPts, packet.pointee.pts)
            }
            if packet.pointee.dts != cffmpeg_nopts() { packet.pointee.dts += tsOffset + loopOffset }
            let s = avcodec_send_packet(codec, packet)
            if s < 0, s != cffmpeg_eagain(), !noteError("decoding a packet failed", s) { return nil }
            receiving = true
        }
    }
}

/// libavdevice's inputs (`-f x11grab`, `-f v4l2`, `-f lavfi`, ...), registered once before
/// the first input is opened.
private let devicesRegistered: Void = avdevice_register_all()

/// One decoded frame, valid until the decoder's next `next()`.
public struct DecodedFrame: ~Copyable {
    let frame: UnsafeMutablePointer<AVFrame>
    /// The frame's pixel format, nil when framesrv has no code for it (see `pixelFormatName`).
    public let pixelFormat: PixelFormat?
    /// FFmpeg's name for the decoded pixel format.
    public let pixelFormatName: String
    public let width: Int
    public let height: Int
    /// Timestamps (rebased, in the stream's time base), colour, aspect ratio (the container's
    /// when it has one, as ffmpeg), key flag, field order and chroma location (the stream's
    /// when the frame does not say).
    public let description: FrameDescription

    let allocator: SlotAllocator?

    /// The deprecated full-range "j" formats have the layout of their plain twins.
    private static let jpegFormats = ["yuvj420p": PixelFormat.yuv420p, "yuvj422p": .yuv422p, "yuvj444p": .yuv444p]

    /// The framesrv format that carries FFmpeg's pixel format `name`, if any.
    static func framesrvFormat(named name: String) -> PixelFormat? {
        jpegFormats[name] ?? PixelFormat(name: name)
    }

    init(frame: UnsafeMutablePointer<AVFrame>, timeBase: Rational, sampleAspectRatio: Rational, chroma: ChromaLocation,
         allocator: SlotAllocator?) {
        self.frame = frame
        self.allocator = allocator
        let f = frame.pointee
        let fmt = AVPixelFormat(rawValue: f.format)
        pixelFormatName = av_get_pix_fmt_name(fmt).map { String(cString: $0) } ?? "format \(f.format)"
        pixelFormat = Self.framesrvFormat(named: pixelFormatName)
        width = Int(f.width)
        height = Int(f.height)
        var color = ColorDescription(f)
        // The "j" formats are full range when the frame does not say.
        if Self.jpegFormats[pixelFormatName] != nil, color.range == 0 { color.range = 2 }
        // best_effort_timestamp: packets were rebased.
        description = FrameDescription(f, color: color, pts: f.best_effort_timestamp, duration: f.pkt_duration,
                                       timeBase: timeBase, sampleAspectRatio: sampleAspectRatio, chroma: chroma)
    }

    /// The frame's framesrv format, or the error naming a pixel format framesrv cannot carry.
    public func frameFormat() throws(MediaInputError) -> FrameFormat {
        guard let pixelFormat else { throw .unsupportedPixelFormat(pixelFormatName) }
        return FrameFormat(pixelFormat, width: width, height: height)
    }

    /// Publishes the frame where it is, without a copy, when the decoder decoded it into one
    /// of `producer`'s slots (see `SlotAllocator`). False when it must be copied instead: it
    /// lives in FFmpeg's memory, or its slot was published already (a decoder that outputs
    /// one picture twice) or belongs to an earlier pool epoch.
    public func publishInPlace(to producer: Producer, description: FrameDescription) -> Bool {
        guard let allocator, let lease = allocator.lease(of: frame), let pixelFormat else { return false }
        let format = FrameFormat(pixelFormat, width: width, height: height)
        var offsets: [Int] = [], strides: [Int] = []
        let f = frame.pointee
        withUnsafeBytes(of: f.data) { dataTuple in
            withUnsafeBytes(of: f.linesize) { linesizeTuple in
                let data = dataTuple.bindMemory(to: UnsafeMutablePointer<UInt8>?.self)
                let linesize = linesizeTuple.bindMemory(to: Int32.self)
                for i in pixelFormat.planes.indices {
                    guard let p = data[i] else { return }
                    offsets.append(UnsafeMutableRawPointer(p) - lease.base)
                    strides.append(Int(linesize[i]))
                }
            }
        }
        guard offsets.count == pixelFormat.planes.count else { return false }
        return producer.publish(lease, format: format, layout: PlaneLayout(offsets: offsets, strides: strides),
                                description: description)
    }

    /// Copies the frame's planes, row by row, into `slot` (which must have this frame's format).
    public func copyPlanes(into slot: borrowing WritableFrame) { copyFramePlanes(frame, into: slot) }
}

/// Copies `frame`'s planes, row by row, into `slot` (which must have the frame's format).
func copyFramePlanes(_ frame: UnsafePointer<AVFrame>, into slot: borrowing WritableFrame) {
    let format = slot.format
    for (i, plane) in avPlanes(frame, count: format.pixelFormat.planes.count).enumerated() {
        guard let src = plane.data else { continue }
        let dst = slot.plane(i).baseAddress!
        let rowBytes = format.rowBytes(plane: i), stride = format.stride(plane: i)
        for y in 0..<format.rows(plane: i) {
            memcpy(dst + y * stride, src + y * plane.linesize, rowBytes)
        }
    }
}

extension MediaDecoder {
    /// Every stream of `ctx` but `index`, as `#N type (codec)`.
    static func streamNames(_ ctx: UnsafeMutablePointer<AVFormatContext>, except index: Int32) -> [String] {
        (0..<Int(ctx.pointee.nb_streams)).filter { $0 != Int(index) }.map { i in
            let par = ctx.pointee.streams[i]!.pointee.codecpar!.pointee
            let type = av_get_media_type_string(par.codec_type).map { String(cString: $0) } ?? "unknown"
            return "#\(i) \(type) (\(String(cString: avcodec_get_name(par.codec_id))))"
        }
    }
}
