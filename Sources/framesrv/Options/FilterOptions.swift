import FrameMedia
import FrameServer

/// `framesrv filter`'s options, parsed and checked from the arguments alone (the blend
/// image is checked when the command runs).
struct FilterOptions: CommandOptions {
    var input: String
    var out: String
    /// The libavfilter graph text (from --vf or the preset).
    var graph: String
    /// The image the blend preset reads.
    var blendImage: String?
    var consumerOptions = ConsumerOptions()
    var outputOptions = FilterOutputOptions()
    var threads = 0
    var quiet = false
    /// --af: the graph is an audio one (A and B are audio streams).
    var audio = false

    init(parsing arguments: [String]) throws(UsageError) {
        var args = Arguments(arguments, command: "filter")
        let input = try args.value("--in", "-i")
        let out = try args.newStreamName("--out", "-o")
        let vf = try args.value("--vf", "-vf")
        let af = try args.value("--af", "-af")
        let preset = try args.value("--preset")
        let live = args.flag("--live")
        let lossless = args.flag("--lossless")
        let liveSource = args.flag("--live-source")
        outputOptions.slots = try args.int("--slots", range: 1...64) ?? 8
        consumerOptions.waitSeconds = try args.double("--wait", range: 0...1e9)
        consumerOptions.waitPastEnd = consumerOptions.waitSeconds != nil
        consumerOptions.pollMicros = try args.int("--poll-us", range: 0...1_000_000) ?? 0
        outputOptions.waitFor = try args.int("--wait-for", range: 0...63) ?? 0
        outputOptions.linger = try ProduceOptions.linger(try args.double("--linger", range: -1...86_400))
        threads = try args.int("--threads", range: 0...256) ?? 0
        quiet = args.flag("--quiet", "-q")
        let name = try args.value("--name")
        try args.finish()

        guard let input else { throw UsageError("missing --in A: the stream to read") }
        guard let out else { throw UsageError("missing --out B: the stream to create") }
        guard input != out else { throw UsageError("--in and --out name the same stream '\(input)'") }
        guard !(live && lossless) else { throw UsageError("choose one of --live and --lossless") }
        self.input = input
        self.out = out
        consumerOptions.mode = live ? .live : .lossless
        consumerOptions.name = name.map { ClientName.fit($0) } ?? ClientName.filter(preset ?? vf ?? af ?? "", out: out)
        outputOptions.name = consumerOptions.name
        outputOptions.liveSource = live || liveSource
        if let af {
            guard vf == nil, preset == nil else { throw UsageError("--af filters sound, --vf and --preset pictures: give one of them") }
            guard !af.allSatisfy({ $0 == " " }) else { throw UsageError("--af needs a filter graph, not an empty string") }
            (graph, audio) = (af, true)
            return
        }
        switch (vf, preset) {
        case (nil, let preset?):
            let compiled: FilterPreset
            do { compiled = try FilterPreset(parsing: preset) } catch { throw UsageError(error.description) }
            (graph, blendImage) = (compiled.graph, compiled.image)
        case (let vf?, nil):
            guard !vf.allSatisfy({ $0 == " " }) else { throw UsageError("--vf needs a filter graph, not an empty string") }
            graph = vf
        default:
            throw UsageError("say what to run: --vf GRAPH or --preset NAME (pictures), or --af GRAPH (sound): one of them")
        }
    }
}
