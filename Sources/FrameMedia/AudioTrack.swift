import CFFmpeg
import FrameServer
import Glibc

/// The audio of a media input: its packets (read by `MediaDecoder`, which demuxes the one
/// input for both) decoded as ffmpeg 5.1 decodes them and published, frame by frame, into
/// an audio stream (PROTOCOL.md 4.6).
///
/// Timestamps follow fftools: the input's offset (its start time, so it starts at 0) is
/// added to every packet in the stream's time base, and each frame's pts goes to
/// 1/sample_rate through `av_rescale_delta`, which keeps consecutive frames contiguous
/// (ffmpeg's `decode_audio`). A frame header says time base 1/sample_rate and duration
/// nb_samples. A decoder that allows it (AV_CODEC_CAP_DR1: aac, opus, flac, mp3, ac3, ...)
/// decodes into the slots themselves (`SlotAllocator`), from the second frame on: the
/// first frame, copied, starts the pool at the size the copy path uses. Other frames
/// are copied once; the summary line counts both.
public final class AudioTrack {
    /// The input's stream index of the track.
    public let streamIndex: Int32
    /// The decoder's name (`aac`, `opus`, `flac`, ...).
    public let codecName: String
    /// `#1 audio (aac)`, as produce's messages name streams.
    public let label: String
    /// Frames decoded, published, and not published (a format framesrv cannot carry, a
    /// frame out of range): each counted, the first reason kept.
    public private(set) var decoded = 0, published = 0, skipped = 0
    /// Packets the decoder rejected (decoding went on, as ffmpeg does).
    public private(set) var decodeErrors = 0
    /// Why the first frame was skipped or the first packet rejected.
    public private(set) var firstProblem: String?
    /// The formats published, each when it first came.
    public private(set) var formats: [AudioFormat] = []
    /// Asked before each frame is published, with its media time in seconds: false stops
    /// the track (sound-only inputs pace themselves through it: -re, pause).
    var beforePublish: ((Double) -> Bool)?

    private var codec: UnsafeMutablePointer<AVCodecContext>?
    private let decoder: UnsafePointer<AVCodec>
    /// Lends the decoder the stream's slots once the pool exists (zero copy).
    private let allocator = SlotAllocator()
    /// Whether the allocator still waits to be given the stream, once its pool exists (false:
    /// given, or never to be: --copy).
    private var allocatorAwaitsPool: Bool
    /// The stream's parameters (the input's, valid while it is open: MediaDecoder closes this track first).
    private let parameters: UnsafeMutablePointer<AVCodecParameters>
    private var frame: UnsafeMutablePointer<AVFrame>?
    private let timeBase: AVRational
    private var tsOffset: Int64
    /// `tsOffset` from the start (and -ss): a loop's next play starts from it again.
    private let baseOffset: Int64
    /// The plays before this one (--loop), added to every packet's timestamps (fftools'
    /// process_input), in the stream's time base.
    private var loopOffset: Int64 = 0
    /// The packets' timestamps so far (offsets added) and the last frame's samples: what a
    /// play lasts (fftools' seek_to_start).
    private var minPts = Int64.max, maxPts = Int64.min
    private var lastSamples: Int32 = 0
    private var rescaleLast: Int64
    private var previousPacketPts: Int64
    private var nextPts: Int64 = 0
    private var producer: Producer?
    /// Whether the next frame published starts after a gap (a seek): discontinuity flag.
    private var discontinuity = false
    /// After -ss or a seek: frames that end before pts 0 are dropped (whole frames: ffmpeg's
    /// atrim would also cut the one that straddles 0).
    private var trimming: Bool
    /// -t, in samples from pts 0 once the rate is known: frames from there on are dropped.
    private let durationMicros: Int64?
    /// A frame began at or after -t's end: a file of sound only reads no further (a
    /// capture device would otherwise go on for ever, its frames dropped).
    public private(set) var reachedDuration = false
    /// A capture device's -t counts the samples it gives from the first read on (after the wait
    /// for consumers), as ffmpeg's starts when it starts reading; its timestamps (the wall
    /// clock's, and a device's time filter's first guess after a wait) do not measure it: a
    /// wait longer than -t left nothing to publish. Samples so far.
    private let durationCountsSamples: Bool
    private var samplesKept: Int64 = 0

    /// The audio stream ffmpeg would pick beside video stream `video` (`av_find_best_stream`),
    /// nil when the input has none or no decoder for it.
    static func find(in ctx: UnsafeMutablePointer<AVFormatContext>, related video: Int32) -> Int32? {
        let index = av_find_best_stream(ctx, AVMEDIA_TYPE_AUDIO, -1, video, nil, 0)
        return index >= 0 ? index : nil
    }

    /// The input's `n`th audio stream (0-based, as ffmpeg's `-map 0:a:N` counts), nil if it has fewer.
    static func find(in ctx: UnsafeMutablePointer<AVFormatContext>, nth n: Int) -> Int32? {
        let audio = audioStreams(in: ctx)
        return n >= 0 && n < audio.count ? Int32(audio[n]) : nil
    }

    /// How many audio streams the input has.
    static func count(in ctx: UnsafeMutablePointer<AVFormatContext>) -> Int { audioStreams(in: ctx).count }

    private static func audioStreams(in ctx: UnsafeMutablePointer<AVFormatContext>) -> [Int] {
        (0..<Int(ctx.pointee.nb_streams)).filter { ctx.pointee.streams[$0]!.pointee.codecpar!.pointee.codec_type == AVMEDIA_TYPE_AUDIO }
    }

    /// Opens a decoder for stream `index` of `ctx`; `startMicros` is the input's offset as
    /// MediaDecoder computes it (its start time), in microseconds.
    init(_ ctx: UnsafeMutablePointer<AVFormatContext>, index: Int32, startMicros: Int64,
         trimming: Bool = false, durationMicros: Int64? = nil, capture: Bool = false, zeroCopy: Bool = true) throws(MediaInputError) {
        streamIndex = index
        allocatorAwaitsPool = zeroCopy   // (--copy: never lent)
        durationCountsSamples = capture
        self.trimming = trimming
        self.durationMicros = durationMicros
        let stream = ctx.pointee.streams[Int(index)]!
        let parameters = stream.pointee.codecpar!
        let name = String(cString: avcodec_get_name(parameters.pointee.codec_id))
        label = "#\(index) audio (\(name))"
        guard let decoder = avcodec_find_decoder(parameters.pointee.codec_id) else { throw .unsupportedCodec("audio \(label)", name) }
        codecName = String(cString: decoder.pointee.name)
        timeBase = stream.pointee.time_base
        tsOffset = -av_rescale_q(startMicros, AVRational(num: 1, den: AV_TIME_BASE), timeBase)
        baseOffset = tsOffset
        rescaleLast = cffmpeg_nopts()
        previousPacketPts = cffmpeg_nopts()
        self.decoder = decoder
        self.parameters = parameters
        frame = av_frame_alloc()
        guard frame != nil else { close(); throw .ffmpeg("av_frame_alloc", "out of memory") }
        let r = openCodec()
        guard r >= 0 else { close(); throw .unsupportedCodec("audio \(label)", "\(codecName) (\(ffmpegMessage(r)))") }
    }

    /// A new decoder context for the stream (the one before freed): FFmpeg's status.
    private func openCodec() -> Int32 {
        avcodec_free_context(&codec)
        codec = avcodec_alloc_context3(decoder)
        guard let codec else { return cffmpeg_averror(ENOMEM) }
        var r = avcodec_parameters_to_context(codec, parameters)
        if r >= 0 {
            codec.pointee.pkt_timebase = timeBase
            allocator.install(on: codec)
            r = avcodec_open2(codec, decoder, nil)
        }
        if r < 0 { avcodec_free_context(&self.codec) }
        return r
    }

    deinit { close() }

    /// Frees the decoder (also done at deinit).
    public func close() {
        avcodec_free_context(&codec)
        av_frame_free(&frame)
    }

    /// Publishes into `producer` from now on (an audio stream: `ProducerOptions.media`).
    public func attach(_ producer: Producer) { self.producer = producer }

    /// Decodes one packet of the track (timestamps as read) and publishes what comes out.
    func send(_ packet: UnsafeMutablePointer<AVPacket>) throws(ProducerError) {
        guard let codec else { return }
        if packet.pointee.pts != cffmpeg_nopts() {
            packet.pointee.pts &+= tsOffset &+ loopOffset
            minPts = min(minPts, packet.pointee.pts)
            maxPts = max(maxPts, packet.pointee.pts)
        }
        if packet.pointee.dts != cffmpeg_nopts() { packet.pointee.dts &+= tsOffset &+ loopOffset }
        let r = avcodec_send_packet(codec, packet)
        if r < 0, r != cffmpeg_eagain() { noteDecodeError(r); return }
        try receive(after: packet)
    }

    /// Sends the end of the input and publishes the frames the decoder still had.
    func drain() throws(ProducerError) {
        guard let codec else { return }
        _ = avcodec_send_packet(codec, nil)
        try receive(after: nil)
    }

    /// The end of one play of a looping input (fftools' process_input): the decoder drained
    /// into the stream and flushed. Returns how long the plays so far last, in the stream's
    /// time base (the last frame's samples plus the packets' span: fftools' seek_to_start),
    /// nil when no frame was decoded.
    func endPlay() throws(ProducerError) -> (duration: Int64, timeBase: AVRational)? {
        guard let codec else { return nil }
        _ = avcodec_send_packet(codec, nil)
        try receive(after: nil)
        avcodec_flush_buffers(codec)
        guard lastSamples > 0, codec.pointee.sample_rate > 0 else { return nil }
        var duration = av_rescale_q(Int64(lastSamples), AVRational(num: 1, den: codec.pointee.sample_rate), timeBase)
        if maxPts > minPts, maxPts &- minPts < Int64.max - duration { duration += maxPts - minPts }
        return (duration, timeBase)
    }

    /// The plays before this one, in seconds (what `loopOffset` adds to each timestamp).
    var loopSeconds: Double { timeBase.den > 0 ? Double(loopOffset) * Double(timeBase.num) / Double(timeBase.den) : 0 }

    /// The next play of a looping input: its packets' timestamps follow the plays before,
    /// `offset` later (in `timeBase`, as `endPlay` said), from the input's first offset.
    func startPlay(offset: Int64, in base: AVRational) {
        loopOffset = av_rescale_q(offset, base, timeBase)
        tsOffset = baseOffset
    }

    /// After a seek: a new decoder (as fresh as `ffmpeg -ss T`'s: flushing one keeps state,
    /// AAC's noise generator for one, that changes the samples); the next frame carries a
    /// discontinuity, and its timestamps take `offsetMicros` (the input's new offset) from
    /// then on. A decoder that cannot be opened again is a decode error; the sound then ends.
    func restart(offsetMicros: Int64) {
        guard codec != nil else { return }
        let r = openCodec()
        if r < 0 { noteDecodeError(r) }
        loopOffset = 0
        minPts = Int64.max
        maxPts = Int64.min
        lastSamples = 0   // (no frame since: a play's length comes from the video, as ffmpeg's)
        nextPts = 0
        tsOffset = -av_rescale_q(offsetMicros, AVRational(num: 1, den: AV_TIME_BASE), timeBase)
        rescaleLast = cffmpeg_nopts()
        previousPacketPts = cffmpeg_nopts()
        discontinuity = true
        trimming = true
    }

    /// Takes every frame the decoder has; `packet` (the one just sent) stands in for a
    /// frame without a pts and resets the rescaling after a gap, for the first frame only,
    /// as fftools' `decode_audio` does.
    private func receive(after packet: UnsafeMutablePointer<AVPacket>?) throws(ProducerError) {
        guard let codec, let frame else { return }
        var packet = packet
        while true {
            av_frame_unref(frame)
            let r = avcodec_receive_frame(codec, frame)
            if r == cffmpeg_eagain() || r == cffmpeg_eof() { return }
            guard r >= 0 else { noteDecodeError(r); return }
            decoded += 1
            lastSamples = frame.pointee.nb_samples
            let pts = stamp(frame, packet: packet)
            packet = nil
            try publish(frame, pts: pts)
        }
    }

    /// The frame's pts in 1/sample_rate (fftools' decode_audio), or the end of the frame
    /// before when neither the frame nor its packet has one.
    private func stamp(_ frame: UnsafeMutablePointer<AVFrame>, packet: UnsafeMutablePointer<AVPacket>?) -> Int64 {
        let rate = frame.pointee.sample_rate
        var pts = frame.pointee.pts
        if pts == cffmpeg_nopts(), let packet { pts = packet.pointee.pts }
        if let packet {
            let p = packet.pointee
            if p.duration != 0, previousPacketPts != cffmpeg_nopts(), p.pts != cffmpeg_nopts(),
               p.pts &- previousPacketPts > p.duration { rescaleLast = cffmpeg_nopts() }
            previousPacketPts = p.pts
        }
        guard pts != cffmpeg_nopts(), rate > 0 else { return nextPts }
        let samples = AVRational(num: 1, den: rate)
        return av_rescale_delta(timeBase, pts, samples, frame.pointee.nb_samples, &rescaleLast, samples)
    }

    /// Copies the frame into a slot and publishes it; a frame framesrv cannot carry is
    /// skipped and counted.
    private func publish(_ frame: UnsafeMutablePointer<AVFrame>, pts: Int64) throws(ProducerError) {
        nextPts = pts &+ Int64(frame.pointee.nb_samples)
        var pts = pts
        guard let producer, trim(frame, pts: &pts) else { return }
        let format: AudioFormat
        switch Self.format(of: frame) {
        case .failure(let why): noteSkipped(why); return
        case .success(let found): format = found
        }
        if formats.last.map({ !$0.sameStream(as: format) }) ?? true { formats.append(format) }
        if let beforePublish, !beforePublish(Double(pts) / Double(format.sampleRate)) { return }
        var d = FrameDescription()
        d.pts = pts
        d.flags = discontinuity ? [.keyframe, .discontinuity] : [.keyframe]
        discontinuity = false
        if let lease = allocator.lease(of: frame), let rows = Self.rows(of: frame, format, in: lease),
           producer.publish(lease, audio: format, rows: rows, description: Self.stamped(d, format)) {
            published += 1
            return
        }
        if try Self.publish(frame, format, d, into: producer, capacity: Int(codec?.pointee.frame_size ?? 0)) { published += 1 }
        if allocatorAwaitsPool {   // the pool exists now, sized as the copy path sizes it
            allocator.attach(producer, wait: !producer.options.liveSource)   // a live source drops instead
            allocatorAwaitsPool = false
        }
    }

    /// Where `frame`'s rows lie in `lease`'s slot: its data pointers, one stride apart;
    /// nil when they are not (the frame is then copied).
    static func rows(of frame: UnsafeMutablePointer<AVFrame>, _ format: AudioFormat, in lease: SlotLease) -> AudioRows? {
        guard let extended = frame.pointee.extended_data, let first = extended[0] else { return nil }
        let offset = UnsafeMutableRawPointer(first) - lease.base
        var stride = format.stride   // one row (packed, or mono): 4.6's multiple of 64
        if format.rows > 1 {
            guard let second = extended[1] else { return nil }
            stride = UnsafeMutableRawPointer(second) - UnsafeMutableRawPointer(first)
            for row in 2..<format.rows where extended[row].map({ UnsafeMutableRawPointer($0) - UnsafeMutableRawPointer(first) }) != row * stride {
                return nil
            }
        }
        let rows = AudioRows(offset: offset, stride: stride)
        return rows.fit(format, in: lease.capacity) ? rows : nil
    }

    /// `d` with what every published audio frame says: time base 1/sample_rate, duration
    /// nb_samples, captured now.
    static func stamped(_ d: FrameDescription, _ format: AudioFormat) -> FrameDescription {
        var description = d
        description.timeBase = Rational(1, Int32(format.sampleRate))
        description.duration = Int64(format.samples)
        description.captureNanos = monotonicNanos()
        return description
    }

    /// Copies a decoded or filtered frame of `format` into a slot of `producer` and publishes
    /// it with `d`'s pts and flags (time base 1/sample_rate, duration nb_samples, captured
    /// now). False when a live source dropped it. A new pool holds at least `capacity` (and
    /// 4096) samples a slot.
    static func publish(_ frame: UnsafeMutablePointer<AVFrame>, _ format: AudioFormat, _ d: FrameDescription,
                        into producer: Producer, capacity: Int) throws(ProducerError) -> Bool {
        guard var slot = try producer.reserve(audio: format, capacity: max(4096, capacity)) else { return false }
        for row in 0..<slot.format.rows {
            let target = slot.row(row)
            guard let source = frame.pointee.extended_data[row] else { continue }
            memcpy(target.baseAddress!, source, target.count)
        }
        slot.description = stamped(d, format)
        slot.publish()
        return true
    }

    /// ffmpeg's trim of an accurate -ss, a seek and -t, to the sample: the samples of `frame`
    /// before 0 (`trimming`) and from -t's end on are cut, in place (its data pointers moved
    /// past the first ones), and `pts` moved to the first sample kept; false when none is.
    private func trim(_ frame: UnsafeMutablePointer<AVFrame>, pts: inout Int64) -> Bool {
        let samples = Int64(frame.pointee.nb_samples), rate = frame.pointee.sample_rate
        var first: Int64 = 0, end = samples
        if trimming, pts < 0 { first = min(samples, 0 &- pts) }
        if let durationMicros, rate > 0 {
            let limit = av_rescale_q(durationMicros, AVRational(num: 1, den: AV_TIME_BASE), AVRational(num: 1, den: rate))
            end = min(end, limit &- (durationCountsSamples ? samplesKept : pts))
            if end <= 0 { reachedDuration = true }
        }
        guard end > first else { return false }
        samplesKept &+= end - first
        if first > 0 { Self.dropLeading(Int(first), of: frame) }
        frame.pointee.nb_samples = Int32(end - first)
        pts += first
        return true
    }

    /// Moves the frame's sample pointers `count` samples on (each plane of a planar format,
    /// the one interleaved plane of a packed one).
    static func dropLeading(_ count: Int, of frame: UnsafeMutablePointer<AVFrame>) {
        let format = AVSampleFormat(rawValue: frame.pointee.format)
        let channels = Int(frame.pointee.ch_layout.nb_channels)
        let planar = av_sample_fmt_is_planar(format) != 0
        let step = count * Int(av_get_bytes_per_sample(format)) * (planar ? 1 : channels)
        let planes = planar ? channels : 1
        guard let extended = frame.pointee.extended_data else { return }
        let inline = withUnsafeMutablePointer(to: &frame.pointee.data) {
            UnsafeMutableRawPointer($0) == UnsafeMutableRawPointer(extended)
        }
        for p in 0..<planes { extended[p] = extended[p].map { $0 + step } }
        guard !inline else { return }   // extended_data is data itself
        withUnsafeMutablePointer(to: &frame.pointee.data) {
            $0.withMemoryRebound(to: UnsafeMutablePointer<UInt8>?.self, capacity: 8) { data in
                for p in 0..<min(planes, 8) { data[p] = extended[p] }
            }
        }
    }

    /// What framesrv makes of a decoded frame's format, or why it cannot carry it.
    static func format(of frame: UnsafeMutablePointer<AVFrame>) -> Result<AudioFormat, AudioFrameProblem> {
        let f = frame.pointee
        let name = av_get_sample_fmt_name(AVSampleFormat(rawValue: f.format)).map { String(cString: $0) } ?? "format \(f.format)"
        guard let sampleFormat = SampleFormat(name: name) else { return .failure(.init("sample format \(name)")) }
        let order = f.ch_layout.order.rawValue
        let channels = Int(f.ch_layout.nb_channels)
        let layout: ChannelLayout
        switch order {
        case AV_CHANNEL_ORDER_NATIVE.rawValue: layout = .native(mask: f.ch_layout.u.mask, channels: channels)
        case AV_CHANNEL_ORDER_AMBISONIC.rawValue: layout = .ambisonic(channels)
        case AV_CHANNEL_ORDER_UNSPEC.rawValue:
            // As ffmpeg (guess_input_channel_layout): FFmpeg's default layout for the count.
            var guess = AVChannelLayout()
            av_channel_layout_default(&guess, Int32(channels))
            defer { av_channel_layout_uninit(&guess) }
            layout = guess.order == AV_CHANNEL_ORDER_NATIVE ? .native(mask: guess.u.mask, channels: channels) : .unspecified(channels)
        default: layout = .unspecified(channels)   // a custom order travels as its count
        }
        let format = AudioFormat(sampleFormat, sampleRate: Int(f.sample_rate), layout: layout, samples: Int(f.nb_samples))
        if let problem = AudioFormat.problem(rate: format.sampleRate, samples: format.samples, layout: layout) {
            return .failure(.init(problem))
        }
        return .success(format)
    }

    private func noteDecodeError(_ code: Int32) {
        decodeErrors += 1
        if firstProblem == nil { firstProblem = "decoding audio failed: \(ffmpegMessage(code))" }
    }

    private func noteSkipped(_ why: AudioFrameProblem) {
        skipped += 1
        if firstProblem == nil { firstProblem = "an audio frame framesrv cannot carry (\(why.text)) was skipped" }
    }
}

/// Why a decoded audio frame cannot travel (PROTOCOL.md 4.6's limits).
struct AudioFrameProblem: Error {
    let text: String
    init(_ text: String) { self.text = text }
}

extension AudioFormat {
    /// The same stream format (rate, layout, sample format), whatever the frame's length.
    func sameStream(as other: AudioFormat) -> Bool {
        sampleFormat == other.sampleFormat && sampleRate == other.sampleRate && layout == other.layout
    }
}
