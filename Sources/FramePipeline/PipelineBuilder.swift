/// Turns chains into stages and streams, resolving names once every chain is read.
struct PipelineBuilder {
    let base: String
    var pipeline = PipelineStub()
    /// Stream names declared with name=, and the chains waiting to read them.
    var named: [String: Int] = [:]
    var pending: [(name: String, stage: Int)] = []
    /// Exec stages' {in:NAME} joins, resolved with the rest.
    var joins: [(name: String, stage: Int)] = []

    init(base: String) { self.base = base }

    mutating func add(_ chain: PipelineChain) throws(PipelineError) {
        var current: Int? = nil          // the stream the next element reads
        var waitingName = chain.from      // or the name it will resolve to
        for (position, element) in chain.elements.enumerated() {
            var words = Array(element.dropFirst())
            let name = try Self.takeName(&words, element: element[0])
            let audio = element[0] == "produce" ? try Self.takeName(&words, element: element[0], key: "audio") : nil
            let hasInput = current != nil || waitingName != nil
            let kind: Pipeline.Kind
            switch element[0] {
            case "tee":
                guard hasInput else { throw PipelineError("'tee' needs a stream before it ('produce ... ! tee name=t')") }
                guard words.isEmpty else { throw PipelineError("'tee' takes only name=NAME, not '\(words[0])'") }
                if let name, let current {
                    // A stream its producer named keeps its name (produce name=cam ! tee name=t): t is one more.
                    let namedByProducer = pipeline.stages[pipeline.streams[current].producer].name != nil
                    try declare(name, current)
                    if !namedByProducer { pipeline.streams[current].name = name }
                }
                if let name, current == nil { throw PipelineError("'tee name=\(name)' right after '\(waitingName!).': the stream already has a name") }
                continue
            case "exec":
                try Self.checkExec(words)
                kind = .exec
            case "queue":
                try Self.checkQueue(words)
                kind = .queue
            default:
                kind = Pipeline.Kind(rawValue: element[0])!
                try Self.refuseLauncherOptions(kind, words)
            }
            let reads = kind == .exec ? words.contains { $0.contains("{in}") } : kind != .produce
            let writes = kind == .exec ? words.contains { $0.contains("{out}") } : kind != .sink
            try Self.checkLinks(element, kind: kind, reads: reads, writes: writes, hasInput: hasInput,
                                isLast: position == chain.elements.count - 1, name: name)
            let index = pipeline.stages.count
            pipeline.stages.append(Pipeline.Stage(kind: kind, words: words, input: current, output: nil, name: name))
            if reads, current == nil, let waitingName { pending.append((waitingName, index)) }
            if kind == .exec { joins += Pipeline.Stage.joinNames(words).map { ($0, index) } }
            if kind == .sink, let sound = Pipeline.Stage.sinkAudio(words) { joins.append((sound, index)) }
            current = nil
            waitingName = nil
            if writes {
                let stream = pipeline.streams.count
                pipeline.streams.append(Pipeline.Stream(name: name ?? "\(base)-\(stream + 1)", producer: index))
                pipeline.stages[index].output = stream
                if let name { try declare(name, stream) }
                current = stream
            }
            if let audio {   // the sound, a stream beside the pictures (branches start from it)
                pipeline.streams.append(Pipeline.Stream(name: audio, producer: index))
                pipeline.stages[index].audioOutput = pipeline.streams.count - 1
                try declare(audio, pipeline.streams.count - 1)
            }
        }
        if chain.elements.isEmpty { throw PipelineError("'\(chain.from!).' leads nowhere: follow it with '! sink ...'") }
    }

    /// `exec [--live | --lossless] PROGRAM ARGS`.
    static func checkExec(_ words: [String]) throws(PipelineError) {
        let options = words.prefix { Pipeline.Stage.execOptionNames.contains($0) }
        guard options.count < words.count else {
            throw PipelineError("'exec' needs a program: exec [--live] PROGRAM ARGS ({in}, {out})")
        }
        guard Set(options).count == options.count, options.count < 2 else {
            throw PipelineError("'exec \(options.joined(separator: " "))': --live and --lossless are one choice, given once")
        }
    }

    /// `queue [size=N]`, N in 1...64 (a pool's slots).
    static func checkQueue(_ words: [String]) throws(PipelineError) {
        for word in words {
            guard word.hasPrefix("size="), let n = Int(word.dropFirst(5)), (1...64).contains(n), words.count == 1 else {
                throw PipelineError("'queue \(words.joined(separator: " "))': a queue takes only size=N, N from 1 to 64 frames")
            }
        }
    }

    /// An element reads a stream exactly when one comes before it, and publishes one when more follows.
    static func checkLinks(_ element: [String], kind: Pipeline.Kind, reads: Bool, writes: Bool, hasInput: Bool,
                           isLast: Bool, name: String?) throws(PipelineError) {
        let label = element.joined(separator: " ")
        if reads && !hasInput { throw PipelineError("'\(label)' reads a stream: put it after '!' or after NAME.") }
        if !reads && hasInput {
            throw PipelineError(kind == .exec ? "'\(label)' has no {in} for the stream before it" : "'\(label)' starts a chain: it cannot follow '!'")
        }
        if !writes && !isLast {
            throw PipelineError(kind == .exec ? "'\(label)' has no {out}: nothing can follow it" : "'\(label)' ends a chain: nothing can follow it")
        }
        if !writes, let name { throw PipelineError("'\(label)' publishes no stream to call '\(name)'") }
    }

    mutating func declare(_ name: String, _ stream: Int) throws(PipelineError) {
        guard named[name] == nil else { throw PipelineError("two elements are called '\(name)'") }
        named[name] = stream
    }

    /// Links named readers, counts lossless consumers and refuses what cannot run.
    mutating func finish() throws(PipelineError) -> Pipeline {
        for (name, stage) in pending {
            guard let stream = named[name] else { throw PipelineError("'\(name).' reads a stream nothing is called: add name=\(name) to an element") }
            pipeline.stages[stage].input = stream
        }
        try resolveJoins()
        for (i, stage) in pipeline.stages.enumerated() {
            for input in stage.inputs {
                pipeline.streams[input].consumers.append(i)
                if stage.lossless { pipeline.streams[input].waitFor += 1 }
            }
        }
        for stream in pipeline.streams where stream.consumers.isEmpty {
            let label = pipeline.stages[stream.producer].label
            throw PipelineError("the stream of '\(label)' goes nowhere: end its chain with a sink")
        }
        try refuseLoops()
        guard !pipeline.stages.isEmpty else { throw PipelineError("the pipeline has no stage") }
        return Pipeline(stages: pipeline.stages, streams: pipeline.streams)
    }

    /// Each {in:NAME} becomes one more input of its stage: a stream it reads once.
    mutating func resolveJoins() throws(PipelineError) {
        for (name, stage) in joins {
            guard let stream = named[name] else {
                if pipeline.stages[stage].kind == .sink {
                    throw PipelineError("'--audio \(name)' reads a stream nothing is called: add audio=\(name) to the produce whose sound it is")
                }
                throw PipelineError("'{in:\(name)}' reads a stream nothing is called: add name=\(name) to an element")
            }
            guard !pipeline.stages[stage].inputs.contains(stream) else {
                throw PipelineError("'\(pipeline.stages[stage].label)' reads stream '\(name)' twice")
            }
            pipeline.stages[stage].joins.append(stream)
        }
    }

    /// A stage that reads, through its producers, its own stream could never start.
    func refuseLoops() throws(PipelineError) {
        var done: Set<Int> = []
        func visit(_ stage: Int, _ path: Set<Int>) throws(PipelineError) {
            guard !done.contains(stage) else { return }
            for input in pipeline.stages[stage].inputs {
                let producer = pipeline.streams[input].producer
                guard !path.contains(producer) else {
                    throw PipelineError("the pipeline loops through stream '\(pipeline.streams[input].name)'")
                }
                try visit(producer, path.union([producer]))
            }
            done.insert(stage)
        }
        for start in pipeline.stages.indices { try visit(start, [start]) }
    }

    /// Removes `KEY=NAME` (name=, or audio= on produce) from an element's words; the name of
    /// the stream it publishes.
    static func takeName(_ words: inout [String], element: String, key: String = "name") throws(PipelineError) -> String? {
        let prefix = key + "="
        let names = words.filter { $0.hasPrefix(prefix) }
        words.removeAll { $0.hasPrefix(prefix) }
        guard names.count <= 1 else { throw PipelineError("'\(element)' has two \(key)s: \(names.joined(separator: ", "))") }
        guard let name = names.first.map({ String($0.dropFirst(prefix.count)) }) else { return nil }
        guard !name.isEmpty, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" }) else {
            throw PipelineError("\(key)=\(name): a stream name is letters, digits, '-' and '_'")
        }
        return name
    }

    /// The launcher wires the streams: a stage naming its own is a mistake to say, not to guess at.
    static func refuseLauncherOptions(_ kind: Pipeline.Kind, _ words: [String]) throws(PipelineError) {
        var set: [String] = ["--wait-for"]
        if kind != .sink { set += ["--out", "-o"] }
        if kind == .produce { set += ["--audio-out", "-an", "--no-audio"] }
        if kind != .produce { set += ["--in", "-i"] }
        if let given = words.first(where: { set.contains($0) || set.contains(String($0.prefix { $0 != "=" })) }) {
            throw PipelineError("'\(kind.rawValue) ... \(given)': run sets \(set.joined(separator: ", ")) of \(kind.rawValue) itself; leave \(given) out")
        }
    }
}

/// The stages and streams while they are built (Pipeline's setters are internal).
struct PipelineStub {
    var stages: [Pipeline.Stage] = []
    var streams: [Pipeline.Stream] = []
}
