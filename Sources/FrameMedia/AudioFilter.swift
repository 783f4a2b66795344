import CFFmpeg
import FrameServer
import Glibc

/// A libavfilter audio graph in ffmpeg's `-af` syntax: `abuffer` (the stream's format, time
/// base 1/sample_rate) -> the graph -> `abuffersink`, rebuilt when the stream's format
/// changes. Every sample format FFmpeg makes is one framesrv carries, so the sink takes any.
final class AudioFilterGraph {
    let text: String
    private var graph: UnsafeMutablePointer<AVFilterGraph>?
    private var source: UnsafeMutablePointer<AVFilterContext>?
    private var sink: UnsafeMutablePointer<AVFilterContext>?
    private(set) var format: AudioFormat?
    private var input = av_frame_alloc()
    private var output = av_frame_alloc()

    /// Checks that `text` parses into one audio input and one audio output (on a stereo
    /// 48 kHz fltp input), so a bad graph is a usage error before anything runs.
    init(_ text: String) throws(FilterError) {
        self.text = text
        guard input != nil, output != nil else { throw .ffmpeg("av_frame_alloc", "out of memory") }
        try build(AudioFormat(.fltp, sampleRate: 48000, layout: .stereo, samples: 1024), configure: false)
        avfilter_graph_free(&graph)
        (source, sink) = (nil, nil)   // the trial graph's, freed with it
    }

    deinit {
        avfilter_graph_free(&graph)
        av_frame_free(&input)
        av_frame_free(&output)
    }

    /// Feeds a frame read from a slot and hands each frame the graph makes to `body`.
    func push(_ frame: borrowing Frame, _ body: (UnsafeMutablePointer<AVFrame>) throws -> Void) throws {
        guard let input, let format = frame.header.audioFormat else { return }
        if self.format.map({ !$0.sameStream(as: format) }) ?? true {
            try drainForRebuild(body)
            try build(format, configure: true)
        }
        try AudioSampleConverter.withAVFrame(input, frame, format) { f throws(MediaOutputError) in
            let r = av_buffersrc_add_frame_flags(source, f, Int32(AV_BUFFERSRC_FLAG_KEEP_REF))
            guard r >= 0 else { throw .ffmpeg("av_buffersrc_add_frame", ffmpegMessage(r)) }
        }
        try pull(body)
    }

    /// The end of the input: flushes the graph into `body`.
    func finish(_ body: (UnsafeMutablePointer<AVFrame>) throws -> Void) throws {
        guard source != nil else { return }
        let r = av_buffersrc_add_frame_flags(source, nil, 0)
        guard r >= 0 else { throw FilterError.ffmpeg("av_buffersrc_add_frame", ffmpegMessage(r)) }
        try pull(body)
    }

    /// Frames the graph has ready.
    private func pull(_ body: (UnsafeMutablePointer<AVFrame>) throws -> Void) throws {
        guard let output, sink != nil else { return }
        while true {
            av_frame_unref(output)
            let r = av_buffersink_get_frame(sink, output)
            if r == cffmpeg_eagain() || r == cffmpeg_eof() { return }
            guard r >= 0 else { throw FilterError.ffmpeg("av_buffersink_get_frame", ffmpegMessage(r)) }
            // Out in 1/sample_rate, as the stream's frames say (a graph may end in another time base).
            let tb = av_buffersink_get_time_base(sink)
            if output.pointee.pts != cffmpeg_nopts(), output.pointee.sample_rate > 0 {
                output.pointee.pts = av_rescale_q(output.pointee.pts, tb, AVRational(num: 1, den: output.pointee.sample_rate))
            }
            try body(output)
        }
    }

    /// A new input format: what the old graph holds goes out first.
    private func drainForRebuild(_ body: (UnsafeMutablePointer<AVFrame>) throws -> Void) throws { try finish(body) }

    /// abuffer -> the parsed graph -> abuffersink for `format`; configured when `configure`.
    private func build(_ format: AudioFormat, configure: Bool) throws(FilterError) {
        avfilter_graph_free(&graph)
        (source, sink) = (nil, nil)
        guard let g = avfilter_graph_alloc() else { throw .ffmpeg("avfilter_graph_alloc", "out of memory") }
        graph = g
        var r = avfilter_graph_create_filter(&source, avfilter_get_by_name("abuffer"), "in",
                                             AudioSampleConverter.abufferArguments(format), nil, g)
        if r >= 0 { r = avfilter_graph_create_filter(&sink, avfilter_get_by_name("abuffersink"), "out", nil, nil, g) }
        guard r >= 0 else { throw .ffmpeg("avfilter_graph_create_filter(abuffer)", ffmpegMessage(r)) }
        try FilterGraph.connect(text, source: source!, sink: sink!, media: AVMEDIA_TYPE_AUDIO, in: g)
        guard configure else { return }
        let configured = withLogCapture { avfilter_graph_config(g, nil) }
        guard configured.value >= 0 else {
            throw .cannotConfigure(text, "\(format)", configured.message ?? ffmpegMessage(configured.value))
        }
        self.format = format
    }
}

/// `framesrv filter --af`: reads an audio stream, runs every frame through an
/// `AudioFilterGraph` and publishes what comes out as another audio stream; timestamps
/// (1/sample_rate) pass through the graph as ffmpeg's do. The input is copied into the
/// graph (libavfilter's buffer), each output frame once into its slot.
public final class AudioFilterPipeline {
    public let consumer: Consumer
    public let output: String
    public private(set) var producer: Producer?
    public private(set) var framesIn = 0
    public private(set) var framesOut = 0
    /// The output's formats, each when it first came.
    public private(set) var formats: [AudioFormat] = []
    private let graph: AudioFilterGraph
    private let outputOptions: FilterOutputOptions
    public var graphText: String { graph.text }

    /// `graph`: the -af text (checked here: a bad one throws before the consumer attaches).
    public init(graph text: String, input: String, consumerOptions: ConsumerOptions, output: String,
                outputOptions: FilterOutputOptions, shouldStop: @escaping () -> Bool) throws {
        graph = try AudioFilterGraph(text)
        var options = consumerOptions
        options.media = .audio
        consumer = try Consumer(stream: input, options: options)
        consumer.shouldStop = shouldStop
        self.output = output
        self.outputOptions = outputOptions
    }

    /// Filters the input to its end, then flushes the graph and ends the output.
    public func run() throws {
        while let frame = try consumer.next() {
            framesIn += 1
            let flags = frame.header.flags
            try graph.push(frame) { try publish($0, flags: flags) }
            frame.release()
        }
        try graph.finish { try publish($0, flags: []) }
        producer?.finish(failed: consumer.sourceFailed)
    }

    /// Ends the output (if it was made).
    public func close() { producer?.close() }

    private func publish(_ frame: UnsafeMutablePointer<AVFrame>, flags: FrameFlags) throws {
        guard case .success(let format) = AudioTrack.format(of: frame) else {
            throw FilterError.unsupportedOutput("audio \(frame.pointee.format)")
        }
        let producer = try self.producer ?? openOutput()
        if formats.last.map({ !$0.sameStream(as: format) }) ?? true { formats.append(format) }
        var d = FrameDescription()
        d.pts = frame.pointee.pts == cffmpeg_nopts() ? nil : frame.pointee.pts
        d.flags = flags.contains(.discontinuity) ? [.keyframe, .discontinuity] : [.keyframe]
        if try AudioTrack.publish(frame, format, d, into: producer, capacity: 0) { framesOut += 1 }
    }

    private func openOutput() throws -> Producer {
        var options = ProducerOptions()
        options.media = .audio
        options.slots = max(outputOptions.slots, 16)
        options.liveSource = outputOptions.liveSource
        options.name = outputOptions.name
        options.lingerWhenDeserted = outputOptions.waitFor > 0 ? outputOptions.linger : nil
        let producer = try Producer(stream: output, options: options)
        if outputOptions.waitFor > 0 { _ = producer.waitForLosslessConsumers(outputOptions.waitFor, timeoutSeconds: nil) }
        self.producer = producer
        return producer
    }
}
