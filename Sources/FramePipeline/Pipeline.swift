/// A pipeline description resolved into stages and streams: what `framesrv run` starts.
///
/// The syntax is gst-launch's. `!` links an element to the next; `name=NAME` on an element
/// names the stream it publishes (on `tee`, the stream going through it); `NAME.` starts a
/// new chain reading that stream (fan-out: several chains may start from one name); an exec
/// stage reads any named stream with {in:NAME} in its words (a join). Elements:
///
///     produce ARGS [audio=NAME]    a `framesrv produce` (the launcher adds --out and --wait-for);
///                                  audio=NAME publishes the input's sound as stream NAME
///                                  (--audio-out NAME; without it, -an)
///     filter ARGS                  a `framesrv filter` (adds --in, --out and --wait-for)
///     sink ARGS                    a `framesrv sink` (adds --in); `--audio NAME` (with --record)
///                                  reads the named audio stream too
///     queue [size=N]               a `framesrv filter --vf null --slots N` (default 30): copies
///                                  its input, losslessly, into a stream of N slots of its own
///     tee [name=NAME]              no process: a name for the stream, to branch from (a stream
///                                  its producer named keeps that name: NAME is one more name)
///     exec [--live] PROGRAM ARGS   any program; {in}, {out} and {wait-for} in ARGS become the
///                                  stream it reads, the stream it creates and its consumer count;
///                                  {in:NAME} the stream named NAME, which it reads too. It counts
///                                  as a lossless consumer of each, unless --live says it is not
///
/// A new chain also starts at `produce`, or at `exec`, right after a complete element that
/// is not an exec (two sources, or sources and then the stage that joins them).
public struct Pipeline: Sendable {
    public enum Kind: String, Sendable { case produce, filter, sink, exec, queue }

    public struct Stage: Sendable {
        public let kind: Kind
        /// The words after the element's keyword, as written (name= removed).
        public let words: [String]
        /// The stream this stage reads through `!` or NAME. (or {in}), the stream it creates
        /// (indices into `streams`).
        public internal(set) var input: Int?
        public internal(set) var output: Int?
        /// A produce stage's audio stream (audio=NAME), another stream it creates.
        public internal(set) var audioOutput: Int?
        /// Every stream the stage creates.
        public var outputs: [Int] { (output.map { [$0] } ?? []) + (audioOutput.map { [$0] } ?? []) }
        /// The named streams an exec stage reads through {in:NAME}, in the order written.
        public internal(set) var joins: [Int] = []
        /// Every stream the stage reads.
        public var inputs: [Int] { (input.map { [$0] } ?? []) + joins }
        /// The name= given on the element itself, if any.
        public internal(set) var name: String? = nil
        /// An exec stage's own options, before its program (`exec --live PROGRAM ...`).
        public var execOptions: [String] { kind == .exec ? Array(words.prefix { Self.execOptionNames.contains($0) }) : [] }
        static let execOptionNames: Set<String> = ["--live", "--lossless"]
        /// An exec stage's program and its arguments.
        public var program: [String] { Array(words.dropFirst(execOptions.count)) }
        /// Whether it reads every frame (filter, sink and exec without --live; every queue).
        public var lossless: Bool {
            kind == .exec ? !execOptions.contains("--live") : kind != .produce && !words.contains("--live")
        }
        /// A queue's size=N (default `Pipeline.defaultQueueSize`).
        public var queueSize: Int {
            words.first { $0.hasPrefix("size=") }.flatMap { Int($0.dropFirst(5)) } ?? Pipeline.defaultQueueSize
        }
        /// The element as written, shortened: for status rows and error lines.
        public var label: String {
            let text = ([kind.rawValue] + words).joined(separator: " ")
            return text.count <= 48 ? text : String(text.prefix(45)) + "..."
        }
    }

    public struct Stream: Sendable {
        public internal(set) var name: String
        public let producer: Int
        /// Lossless consumers: the producer's --wait-for.
        public internal(set) var waitFor = 0
        public internal(set) var consumers: [Int] = []
    }

    public internal(set) var stages: [Stage] = []
    public internal(set) var streams: [Stream] = []

    /// The frames a `queue` holds without size=N.
    public static let defaultQueueSize = 30

    init(stages: [Stage], streams: [Stream]) {
        self.stages = stages
        self.streams = streams
    }

    /// Parses `text` (see `PipelineTokens`); unnamed streams are called BASE-1, BASE-2, ...
    public init(parsing text: String, base: String) throws(PipelineError) {
        try self.init(words: try PipelineTokens.split(text), base: base)
    }

    /// Parses words already split (a description given as several arguments).
    public init(words: [String], base: String) throws(PipelineError) {
        let chains = try PipelineSyntax.chains(words)
        var builder = PipelineBuilder(base: base)
        for chain in chains { try builder.add(chain) }
        self = try builder.finish()
    }

    /// The order to start stages in: consumers before their producers (sinks first, sources
    /// last), so every lossless consumer is attached or waiting before a frame is published.
    public var startOrder: [Int] {
        var depth = [Int?](repeating: nil, count: stages.count)
        func depthOf(_ i: Int) -> Int {
            if let d = depth[i] { return d }
            let d = stages[i].inputs.map { depthOf(streams[$0].producer) + 1 }.max() ?? 0
            depth[i] = d
            return d
        }
        return stages.indices.sorted { (depthOf($0), $0) > (depthOf($1), $1) }
    }

    /// Stream indices in pipeline order: each stream after the one its producer reads.
    public var streamOrder: [Int] { startOrder.reversed().flatMap { stages[$0].outputs } }

    /// The stages that read no stream: the ones Ctrl-C stops, so the rest drain.
    public var sources: [Int] { stages.indices.filter { stages[$0].inputs.isEmpty } }

    /// How the stage is started: `framesrv` with these arguments, or (exec) a program.
    public func commandLine(_ i: Int) -> (framesrv: Bool, arguments: [String]) {
        let s = stages[i]
        let input = s.input.map { streams[$0].name }, output = s.output.map { streams[$0].name }
        // produce counts the lossless consumers of its audio stream with its pictures' (--wait-for).
        let waitFor = s.outputs.reduce(0) { $0 + streams[$1].waitFor }
        switch s.kind {
        case .exec:
            return (false, s.program.map { word in
                s.joins.reduce(word) { $0.replacingAll("{in:\(streams[$1].name)}", with: streams[$1].name) }
                    .replacingAll("{in}", with: input ?? "").replacingAll("{out}", with: output ?? "")
                    .replacingAll("{wait-for}", with: String(waitFor))
            })
        case .produce, .filter, .sink, .queue:
            var args = s.kind == .queue ? ["filter", "--vf", "null", "--slots", String(s.queueSize), "--name", "queue"]
                : [s.kind.rawValue] + s.words
            if let input { args += ["--in", input] }
            if let output { args += ["--out", output] }
            if let audio = s.audioOutput {
                args += ["--audio-out", streams[audio].name]
            } else if s.kind == .produce, s.words.contains(where: { $0 == "-i" || $0 == "--input" }) {
                args += ["-an"]   // a file's sound goes nowhere without audio=NAME (produce says it is not carried)
            }
            if waitFor > 0 { args += ["--wait-for", String(waitFor)] }
            return (true, args)
        }
    }
}

extension String {
    func replacingAll(_ target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}

extension Pipeline.Stage {
    /// The audio stream a sink records beside its pictures (`--audio NAME`), if any.
    static func sinkAudio(_ words: [String]) -> String? {
        guard let i = words.firstIndex(of: "--audio"), i + 1 < words.count else { return nil }
        return words[i + 1]
    }

    /// The NAMEs of the {in:NAME} in an exec stage's words, each once, in the order written.
    static func joinNames(_ words: [String]) -> [String] {
        var names: [String] = []
        for word in words {
            var rest = Substring(word)
            while let open = rest.firstRange(of: "{in:") {
                rest = rest[open.upperBound...]
                guard let close = rest.firstIndex(of: "}") else { break }
                let name = String(rest[..<close])
                if !names.contains(name) { names.append(name) }
                rest = rest[rest.index(after: close)...]
            }
        }
        return names
    }
}

extension Pipeline {
    /// Each stage's short name for the lines it writes, as docker compose prefixes a
    /// service's (`edges | text`): its name=, else its script or program (exec) or its
    /// kind; a name two stages would share gets the stage's number (`sink.3`).
    public var prefixes: [String] {
        let bases = stages.map(\.shortName)
        return bases.enumerated().map { i, base in bases.filter { $0 == base }.count > 1 ? "\(base).\(i + 1)" : base }
    }
}

extension Pipeline.Stage {
    static let interpreters: Set<String> = ["python", "python3", "sh", "bash", "node", "ruby", "perl", "env", "uv"]

    /// name=, the script an interpreter runs (`python3 edges.py` is edges.py), the program, or the kind.
    var shortName: String {
        if let name { return name }
        guard kind == .exec, let first = program.first else { return kind.rawValue }
        let base = { (word: String) in String(word.split(separator: "/").last ?? Substring(word)) }
        if Self.interpreters.contains(base(first)), let script = program.dropFirst().first,
           !script.hasPrefix("-"), !script.contains(" "), !script.contains("{") {
            return base(script)
        }
        return base(first)
    }
}
