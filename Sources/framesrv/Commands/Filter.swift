import FrameMedia
import FrameServer
import Glibc

/// `framesrv filter`: runs a libavfilter graph on every frame of one stream and publishes
/// the result as another.
enum FilterCommand: Command {
    static let name = "filter"
    static let summary = "filter a stream into another with a libavfilter graph (ffmpeg's -vf syntax) or a preset"
    static let help = """
    usage: framesrv filter --in A --out B (--vf GRAPH | --preset NAME) [--live | --lossless]
                           [--slots N] [--wait SECONDS] [--wait-for N] [--threads N] [--live-source] [--quiet]

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
      --slots N            slots in B's pool, 1..64 (default 8)
      --wait SECONDS       give up if A has not appeared by then (default: wait forever)
      --wait-for N         publish nothing until N lossless consumers are attached to B
      --threads N          filter threads (default 0: libavfilter decides, as ffmpeg does)
      --quiet              no summary line, no progress line (shown on a terminal)

    Formats the graph makes that framesrv cannot carry are converted by libavfilter to one it
    can (as ffmpeg does for an encoder). A graph libavfilter rejects, an unknown preset or a
    misused option is a usage error (exit status 2); what fails while running (a graph that
    cannot take A's frames, an unreadable blend image) is exit status 1.
    """

    static func run(_ args: inout Arguments) throws -> Int32 {
        let input = try args.value("--in", "-i")
        let out = try args.value("--out", "-o")
        let vf = try args.value("--vf", "-vf")
        let preset = try args.value("--preset")
        let live = args.flag("--live")
        let lossless = args.flag("--lossless")
        let liveSource = args.flag("--live-source")
        let slots = try args.int("--slots", range: 1...64) ?? 8
        let wait = try args.double("--wait", range: 0...1e9)
        let waitFor = try args.int("--wait-for", range: 0...63) ?? 0
        let threads = try args.int("--threads", range: 0...256) ?? 0
        let quiet = args.flag("--quiet", "-q")
        try args.finish()

        guard let input else { throw UsageError("missing --in A: the stream to read") }
        guard let out else { throw UsageError("missing --out B: the stream to create") }
        guard input != out else { throw UsageError("--in and --out name the same stream '\(input)'") }
        guard !(live && lossless) else { throw UsageError("choose one of --live and --lossless") }
        guard (vf != nil) != (preset != nil) else {
            throw UsageError("say what to run: --vf GRAPH or --preset NAME (one of them)")
        }
        let text: String
        var blendImage: String?
        if let preset {
            (text, blendImage) = try expand(preset: preset)
        } else {
            text = vf!
            guard !text.allSatisfy({ $0 == " " }) else { throw UsageError("--vf needs a filter graph, not an empty string") }
        }
        if let blendImage {
            // The image must decode now: libavfilter's movie source would only fail at the first frame.
            guard access(blendImage, R_OK) == 0 else {
                throw BlendImageError(image: blendImage, reason: String(cString: strerror(errno)))
            }
            do {
                let decoder = try MediaDecoder(input: blendImage)
                switch decoder.next() {
                case .none: throw BlendImageError(image: blendImage, reason: "no picture decodes from it")
                case .some: break
                }
            } catch let error as MediaInputError {
                throw BlendImageError(image: blendImage, reason: error.description)
            }
        }
        let graph: FilterGraph
        do {
            graph = try FilterGraph(graph: text, threads: threads)
        } catch {
            if let blendImage {
                if case .invalidGraph(_, let message) = error { throw BlendImageError(image: blendImage, reason: message) }
                throw BlendImageError(image: blendImage, reason: error.description)
            }
            switch error {
            case .invalidGraph, .notAVideoGraph: throw UsageError(error.description)
            default: throw error
            }
        }
        return try runFilter(graph, input: input, out: out, mode: live ? .live : .lossless, liveSource: live || liveSource,
                             slots: slots, wait: wait, waitFor: waitFor, quiet: quiet)
    }

    /// A blend image that cannot be read or decoded (one line: the image, why).
    struct BlendImageError: Error, CustomStringConvertible {
        let image: String
        let reason: String
        var description: String { "cannot use '\(image)' as the blend image: \(reason)" }
    }

    /// The graph of a preset (and, for blend, the image it reads).
    static func expand(preset: String) throws(UsageError) -> (String, String?) {
        let (name, argument) = preset.firstIndex(of: "=").map {
            (String(preset[..<$0]), String(preset[preset.index(after: $0)...]))
        } ?? (preset, nil)
        switch name {
        case "gray", "sepia", "rgb":
            guard argument == nil else { throw UsageError("the preset '\(name)' takes no argument") }
            switch name {
            case "gray": return ("format=gray", nil)
            case "sepia": return ("colorchannelmixer=.393:.769:.189:0:.349:.686:.168:0:.272:.534:.131", nil)
            default: return ("format=rgb24", nil)
            }
        case "blur":
            guard let argument, let sigma = Double(argument), sigma.isFinite, sigma >= 0, sigma <= 1024 else {
                throw UsageError("the preset blur takes a sigma from 0 to 1024: blur=SIGMA (for example blur=4), not '\(preset)'")
            }
            _ = sigma
            return ("gblur=sigma=\(argument)", nil)
        case "blend":
            guard let argument, let colon = argument.lastIndex(of: ":"),
                  case let image = String(argument[..<colon]), !image.isEmpty,
                  case let opacityText = String(argument[argument.index(after: colon)...]),
                  let opacity = Double(opacityText), opacity >= 0, opacity <= 1 else {
                throw UsageError("the preset blend takes an image and an opacity from 0 to 1: blend=IMAGE:OPACITY (for example blend=logo.png:0.5), not '\(preset)'")
            }
            _ = opacity
            let graph = "movie=\(escapeForGraph(escapeForOption(image))),format=rgba,colorchannelmixer=aa=\(opacityText)[framesrv_blend];"
                + "[in][framesrv_blend]overlay"
            return (graph, image)
        default:
            throw UsageError("unknown preset '\(preset)'; presets are gray, sepia, blur=SIGMA, rgb, blend=IMAGE:OPACITY (see 'framesrv filter --help')")
        }
    }

    /// libavfilter's first level of quoting: an option value (`\`, `'` and `:` escaped).
    static func escapeForOption(_ s: String) -> String { escape(s, "\\':") }
    /// The second level: a filter's arguments inside a graph.
    static func escapeForGraph(_ s: String) -> String { escape(s, "\\'[],;") }
    private static func escape(_ s: String, _ special: String) -> String {
        var out = ""
        for c in s {
            if special.contains(c) { out.append("\\") }
            out.append(c)
        }
        return out
    }

    static func runFilter(_ graph: FilterGraph, input: String, out: String, mode: DeliveryMode, liveSource: Bool,
                          slots: Int, wait: Double?, waitFor: Int, quiet: Bool) throws -> Int32 {
        var options = ConsumerOptions(mode: mode)
        options.waitSeconds = wait
        options.name = "filter"
        installStopHandlers()
        let consumer = try Consumer(stream: input, options: options)
        consumer.shouldStop = { stopRequested != 0 }

        var producer: Producer?
        defer { producer?.close() }
        var inputRate: Double?
        var framesIn = 0
        var formats: [FrameFormat] = []
        var waited = false
        let start = monotonicNanos()
        // ffmpeg's status line on a terminal: frames published to B and the media time they cover.
        var clock = MediaClock()
        var progress = Progress(enabled: stderrIsTerminal && !quiet)
        // Set when A's producer went away: B's next frame (the new producer's first through a
        // new graph) starts a new timeline.
        var discontinuity = false

        /// B, once the graph's output frame rate is known; waits for --wait-for consumers.
        func output() throws -> Producer? {
            if let producer { return producer }
            var o = ProducerOptions()
            o.slots = slots
            o.liveSource = liveSource
            let rate = graph.outputFrameRate.map { Double($0.num) / Double($0.den) } ?? inputRate
            o.nominalRate = rate.flatMap { $0 > 0 ? $0 : nil }
            let p = try Producer(stream: out, options: o)
            p.shouldStop = { stopRequested != 0 }   // SIGINT/SIGTERM end a wait for a slot of B
            producer = p
            while waitFor > 0, !waited, !p.waitForLosslessConsumers(waitFor, timeoutSeconds: 0.5) {
                if stopRequested != 0 { return nil }
            }
            waited = true
            return p
        }

        /// Publishes every frame the graph has ready: one copy each, into B's slot.
        func drain() throws {
            while let frame = try graph.receive() {
                guard let p = try output() else { return }
                if formats.last != frame.format { formats.append(frame.format) }
                // A new size or pixel format is just a new reservation: B starts a new epoch if it must.
                guard var slot = try p.reserve(frame.format) else { continue }   // live source: dropped
                frame.copyPlanes(into: slot)
                slot.description = frame.description
                if discontinuity {
                    slot.description.flags.insert(.discontinuity)
                    discontinuity = false
                }
                slot.publish()
                clock.record(frame.description, frameRate: p.options.nominalRate)
                progress.update(frames: clock.frames, mediaSeconds: clock.seconds)
            }
        }

        // A's producer gone without ending the stream: the old run's last frames go through
        // the graph into B now, and the new producer's first frame builds a new graph (its
        // timestamps start again; filters with state must not see them as going backwards).
        var eventError: Error?
        consumer.onEvent = { event in
            guard case .producerGone(let pid) = event else { return }
            warn("producer of '\(input)' (pid \(pid)) exited without ending the stream; waiting for it to come back")
            do {
                try graph.sendEnd()
                try drain()
                graph.restart()
                if framesIn > 0 { discontinuity = true }
            } catch {
                if eventError == nil { eventError = error }
            }
        }

        while stopRequested == 0, let frame = try consumer.next() {
            if let eventError { throw eventError }
            framesIn += 1
            if inputRate == nil {
                // The stream's nominal frame rate: what the graph's source is told (as ffmpeg tells it the input's).
                let rate = (try? StreamSnapshot.read(input, in: consumer.directory))?.nominalRate ?? 0
                inputRate = rate > 0 ? rate : nil
                graph.inputFrameRate = inputRate.flatMap { Rational(nominalRate: $0) }
            }
            let shared = frame.share()
            if !graph.accepts(shared.header) {
                // A new size or pixel format: the old graph's last frames out, then a new graph.
                try graph.sendEnd()
                try drain()
            }
            // In place while the frames libavfilter keeps stay within what the stream allows
            // this consumer to hold (live: the hold limit; lossless: half the pool, so the
            // producer keeps slots to write into); past that, copied.
            // (`held` counts this frame: with one slot, A's only one, every frame is copied.)
            let held = consumer.heldFrames
            let inPlace = consumer.liveHoldLimit.map { held < $0 } ?? (held <= (consumer.slotCount ?? 2) / 2)
            try graph.send(shared, inPlace: inPlace)
            if producer == nil, try output() == nil { break }
            try drain()
            // The graph's output ended (trim): so does B, as ffmpeg stops there.
            if graph.isFinished { break }
        }
        if let eventError { throw eventError }
        // End of A (or SIGINT/SIGTERM): everything still in the graph comes out, then B ends.
        try graph.sendEnd()
        try drain()
        if producer == nil, framesIn == 0, stopRequested == 0 {
            // A ended before any frame: B exists and ends too, so its consumers end as well.
            _ = try output()
        }
        producer?.finish()
        progress.finish(frames: clock.frames, mediaSeconds: clock.seconds)
        if !quiet {
            let secs = Double(monotonicNanos() - start) / 1e9
            let what = formats.map(\.description).joined(separator: ", then ")
            let published = producer?.publishedCount ?? 0
            print("filter: \(input) -> \(out): \(framesIn) frames in (\(graph.framesInPlace) in place, \(graph.framesCopied) copied),"
                  + " published \(published) frames of \(what.isEmpty ? "nothing" : what) (one copy each)"
                  + " in \(formatDouble(secs, 2)) s (\(formatDouble(Double(framesIn) / max(secs, 1e-9), 0)) fps),"
                  + " dropped \(producer?.droppedCount ?? 0), graph '\(graph.graph)'")
        }
        return 0
    }
}
