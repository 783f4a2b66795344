import FrameMedia
import FrameServer

/// `framesrv filter`: runs a libavfilter graph on every frame of one stream and publishes
/// the result as another.
enum FilterCommand: Command {
    static let name = "filter"
    static let summary = "filter a stream into another with a libavfilter graph (ffmpeg's -vf syntax) or a preset"
    static let help = """
    usage: framesrv filter --in A --out B (--vf GRAPH | --preset NAME | --af GRAPH) [--live | --lossless]
                           [--slots N] [--wait SECONDS] [--wait-for N [--linger S]] [--threads N] [--live-source] [--quiet] [--name NAME]

    Reads stream A, runs every frame through a libavfilter graph as 'ffmpeg -i A -vf GRAPH'
    does, and publishes what comes out as stream B. Frames go into the graph without a copy
    (libavfilter reads the slot; A gets the slot back when libavfilter lets the frame go);
    each frame out is copied once, into B's slot. Timestamps, time base, duration, key flag
    and aspect ratio pass through the graph; each frame's colour description (matrix, range,
    primaries, transfer) goes into the graph, so conversions use the stream's own matrix and
    range as ffmpeg's do, and B's frames carry what the graph says of theirs. A new size or
    pixel format in A flushes the graph and builds a new one; B follows (a larger format
    starts a new pool epoch) without its consumers restarting. The end of A flushes the
    graph (closing it at the end of A's last frame, as ffmpeg does) and ends B; so do SIGINT
    and SIGTERM (exit status 0). A graph whose output ends before A does (trim=end_frame=N)
    ends B there, and the filter stops reading A, as ffmpeg stops. If A's producer exits
    without ending the stream, the filter flushes the graph into B and waits for a new one,
    as a sink does; the new producer's frames go through a new graph, and B's first frame
    of them is marked as a discontinuity.

      --in A               the stream to read
      --out B              the stream to create (once A's first frame has configured the
                           graph; its nominal rate is the graph's output frame rate)
      --vf GRAPH           a libavfilter graph, one video input and one video output, in
                           ffmpeg's -vf syntax (scale filters get ffmpeg's flags=bicubic)
      --af GRAPH           A and B are audio streams (produce's --audio-out): a libavfilter audio
                           graph, one input and one output, in ffmpeg's -af syntax (volume=0.5,
                           aresample=48000, loudnorm, pan=mono|c0=c0, atempo=1.25), as 'ffmpeg -i A
                           -af GRAPH'; timestamps (1/sample_rate) pass through. Frames are copied into
                           the graph and each frame out once into B's slot
      --preset NAME        a ready-made graph (instead of --vf):
                             gray                 format=gray
                             sepia                colorchannelmixer=.393:.769:.189:0:.349:.686:.168:0:.272:.534:.131
                             blur=SIGMA           gblur=sigma=SIGMA
                             rgb                  format=rgb24 (libavfilter's scale, with each frame's matrix and range)
                             blend=IMAGE:OPACITY  movie=IMAGE,format=rgba,colorchannelmixer=aa=OPACITY[framesrv_blend];
                                                  [in][framesrv_blend]overlay   (IMAGE over the stream; OPACITY 0 to 1)
      --lossless           read every frame of A; A's producer waits for this filter (default)
      --live               read only the newest frame of A; never slows A. B is then a live
                           source too: it never waits for B's consumers (drops and counts)
      --live-source        make B a live source with --lossless as well
      --poll-us N          busy-poll A up to N us per frame before sleeping (0..1000000, default 0:
                           only on a stream faster than 20,000 frames/s, as sink's)
      --slots N            slots in B's pool, 1..64 (default 8)
      --wait SECONDS       give up if A has not appeared by then (default: wait forever, saying
                           so once on a terminal); also waits past an A that already ended
                           (without --wait that is one error line: its frames went to nobody)
      --wait-for N         publish nothing until N lossless consumers are attached to B; once
                           every consumer of B has left, publish nothing: wait --linger seconds
                           for one, then end
      --linger S           how long (default 5; -1: for ever)
      --threads N          filter threads (default 0: libavfilter decides, as ffmpeg does)
      --quiet              no summary line, no progress line (shown on a terminal)
      --name NAME          what this consumer is called in ls/top/inspect (default: its
                           role, 'filter PRESET -> OUT')

    A CUDA stream (produce --hwaccel cuda, framesrv-cuda upload) is filtered on the GPU with
    FFmpeg's CUDA filters (scale_cuda, yadif_cuda, thumbnail_cuda, ...): each frame enters the
    graph in place, the graph's output must be CUDA frames, and B is a CUDA stream on the same
    device (each frame out copied once on the device).

    Formats the graph makes that framesrv cannot carry are converted by libavfilter to one it
    can (as ffmpeg does for an encoder). A graph libavfilter rejects, an unknown preset or a
    misused option is a usage error (exit status 2); what fails while running (a graph that
    cannot take A's frames, an unreadable blend image) is exit status 1.
    """

    static func run(_ o: FilterOptions) throws -> ExitStatus {
        if o.audio { return try runAudio(o) }
        if let image = o.blendImage { try BlendImageError.check(image) }
        let graph: FilterGraph
        do {
            graph = try FilterGraph(graph: o.graph, threads: o.threads)
        } catch {
            if let image = o.blendImage {
                if case .invalidGraph(_, let message) = error { throw BlendImageError(image: image, reason: message) }
                throw BlendImageError(image: image, reason: error.description)
            }
            switch error {
            case .invalidGraph, .notAVideoGraph: throw UsageError(error.description)
            default: throw error
            }
        }
        installStopHandlers()
        let pipeline = FilterPipeline(graph: graph, consumer: try Consumer(stream: o.input, options: o.consumerOptions),
                                      output: o.out, outputOptions: o.outputOptions) { StopSignal.requested }
        defer { pipeline.close() }
        // ffmpeg's status line on a terminal: frames published to B and the media time they cover.
        var clock = MediaClock()
        var progress = Progress(enabled: stderrIsTerminal && !o.quiet)
        pipeline.onPublish = { description, rate in
            clock.record(description, frameRate: rate?.doubleValue)
            progress.update(frames: clock.frames, mediaSeconds: clock.seconds)
        }
        pipeline.onWaiting = { if stderrIsTerminal, !o.quiet { warn(SinkCommand.waitingLine(o.input)) } }
        pipeline.onProducerGone = { pid in
            guard o.consumerOptions.reattach else { return }   // the error that ends the filter says it
            warn("producer of '\(o.input)' (pid \(pid)) exited without ending the stream; waiting for it to come back")
        }
        if case .failure(let error) = Result(catching: { () throws(ConsumerError) in try pipeline.consumer.attach() }) {
            guard let device = error.cudaDevice else { throw error }
            pipeline.close()
            return try runCUDA(o, device: device)   // a CUDA stream: FFmpeg's CUDA filters, on the GPU
        }
        let start = monotonicNanos()
        try pipeline.run()
        progress.finish(frames: clock.frames, mediaSeconds: clock.seconds)
        if !o.quiet { print(summary(pipeline, seconds: Double(monotonicNanos() - start) / 1e9)) }
        if pipeline.consumer.sourceFailed {
            throw CommandError.filterInputFailed(input: o.input, output: o.out)
        }
        return .success
    }

    /// A CUDA input: the graph runs FFmpeg's CUDA filters from CUDA stream A into CUDA stream B.
    static func runCUDA(_ o: FilterOptions, device: String) throws -> ExitStatus {
        let out = o.outputOptions
        let pipeline = try CUDAFilterPipeline(
            graph: o.graph, input: o.input, device: device, live: o.consumerOptions.mode == .live, waitSeconds: o.consumerOptions.waitSeconds,
            output: .init(name: o.out, device: 0, slots: out.slots, rate: nil, liveSource: out.liveSource, waitFor: out.waitFor)
        ) { StopSignal.requested }
        defer { pipeline.close() }
        let start = monotonicNanos()
        try pipeline.run()
        if !o.quiet {
            let secs = Double(monotonicNanos() - start) / 1e9
            let what = pipeline.formats.map(\.description).joined(separator: ", then ")
            print("filter: \(o.input) -> \(o.out) (CUDA): \(pipeline.framesIn) frames in (in place), published \(pipeline.framesOut) "
                  + "of \(what.isEmpty ? "nothing" : what) (one device copy each) in \(formatDouble(secs, 2)) s, graph '\(o.graph)'")
        }
        return .success
    }

    /// --af: the audio pipeline; a graph libavfilter rejects is a usage error.
    static func runAudio(_ o: FilterOptions) throws -> ExitStatus {
        installStopHandlers()
        let pipeline: AudioFilterPipeline
        do {
            pipeline = try AudioFilterPipeline(graph: o.graph, input: o.input, consumerOptions: o.consumerOptions, output: o.out,
                                               outputOptions: o.outputOptions) { StopSignal.requested }
        } catch let error as FilterError {
            switch error {
            case .invalidGraph, .notAnAudioGraph: throw UsageError(error.description)
            default: throw error
            }
        }
        defer { pipeline.close() }
        let start = monotonicNanos()
        try pipeline.run()
        if !o.quiet {
            let secs = Double(monotonicNanos() - start) / 1e9
            let what = pipeline.formats.map { "\($0.sampleRate) Hz \($0.layout) \($0.sampleFormat)" }.joined(separator: ", then ")
            print("filter: \(o.input) -> \(o.out): \(pipeline.framesIn) audio frames in, published \(pipeline.framesOut) of "
                  + "\(what.isEmpty ? "nothing" : what) (one copy each) in \(formatDouble(secs, 2)) s, graph '\(pipeline.graphText)'")
        }
        if pipeline.consumer.sourceFailed { throw CommandError.filterInputFailed(input: o.input, output: o.out) }
        return .success
    }

    static func summary(_ p: FilterPipeline, seconds secs: Double) -> String {
        let what = p.formats.map(\.description).joined(separator: ", then ")
        return "filter: \(p.consumer.stream) -> \(p.output): \(p.framesIn) frames in (\(p.graph.framesInPlace) in place, \(p.graph.framesCopied) copied),"
            + " published \(p.producer?.publishedCount ?? 0) frames of \(what.isEmpty ? "nothing" : what) (one copy each)"
            + " in \(formatDouble(secs, 2)) s (\(formatDouble(Double(p.framesIn) / max(secs, 1e-9), 0)) fps),"
            + " dropped \(p.producer?.droppedCount ?? 0), graph '\(p.graph.graph)'"
    }
}
