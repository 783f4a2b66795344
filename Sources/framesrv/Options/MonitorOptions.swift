import FrameBench

/// `framesrv ls`'s options.
struct ListOptions: CommandOptions {
    var json = false
    var width: Int?
    init(parsing arguments: [String]) throws(UsageError) {
        var args = Arguments(arguments, command: "ls")
        json = args.flag("--json")
        width = try args.int("-w", "--width", range: 20...10_000)
        try args.finish()
    }
}

/// `framesrv inspect`'s options. A stream whose name starts with '-' is named after `--`
/// (`framesrv inspect -- -x`).
struct InspectOptions: CommandOptions {
    var stream: String
    var json = false
    var snapshot: String?
    var wait = 5.0

    init(parsing arguments: [String]) throws(UsageError) {
        var args = Arguments(arguments, command: "inspect")
        json = args.flag("--json")
        snapshot = try args.value("--snapshot")
        wait = try args.double("--wait", range: 0...86400) ?? 5
        let names = args.positionals()
        try args.finish()
        guard names.count == 1, let name = names.first else { throw UsageError("name one stream: framesrv inspect STREAM") }
        guard !(json && snapshot != nil) else { throw UsageError("choose one of --json and --snapshot") }
        stream = name
    }
}

/// `framesrv clean`'s options: none.
struct CleanOptions: CommandOptions {
    init(parsing arguments: [String]) throws(UsageError) {
        try Arguments(arguments, command: "clean").finish()
    }
}

/// `framesrv top`'s options.
struct TopOptions: CommandOptions {
    var interval = 1.0
    var count: Int?
    var batch = false
    var json = false
    var width: Int?

    init(parsing arguments: [String]) throws(UsageError) {
        var args = Arguments(arguments, command: "top")
        width = try args.int("-w", "--width", range: 20...10_000)
        interval = try args.double("-d", range: 0.01...86_400) ?? 1
        count = try args.int("-n", range: 1...Int.max)
        batch = args.flag("-b", "--batch")
        json = args.flag("--json")
        try args.finish()
        guard !(batch && json) else { throw UsageError("choose one of -b and --json") }
    }
}

/// `framesrv bench`'s options.
struct BenchOptions: CommandOptions {
    var benchmark: Benchmark
    /// -i and --threads (decode, chain), --python (transport, clients, gpu), --c-tools (clients).
    var settings = BenchSettings()

    init(parsing arguments: [String]) throws(UsageError) {
        var args = Arguments(arguments, command: "bench")
        let quick = args.flag("--quick")
        let frames = try args.int("--frames", range: 100...10_000_000)
        let input = try args.value("--input", "-i")
        let threads = try args.int("--threads", range: 0...256)
        let seconds = try args.double("--seconds", range: 0.5...600)
        let python = try args.value("--python")
        let cTools = try args.value("--c-tools")
        let sectionText = try args.value("--section")
        settings = BenchSettings(input: input, threads: threads, python: python, cTools: cTools)
        let what = args.positionals()
        try args.finish()
        guard ["clients", "transport", "record", "audio", "gpu"].contains(what.first ?? "") || (seconds == nil && python == nil && cTools == nil) else {
            throw UsageError("--seconds goes with 'bench transport', 'clients', 'record', 'audio' and 'gpu', --python with 'transport', "
                             + "'clients' and 'gpu', --c-tools with 'clients'")
        }
        guard sectionText == nil || what == ["transport"] || what == ["gpu"] else {
            throw UsageError("--section goes with 'bench transport' and 'bench gpu'")
        }
        let sections = try sectionText.map { text throws(UsageError) in try Self.sections(text, of: what == ["gpu"] ? 3 : 6) }
        switch what {
        case ["decode"], ["chain"]:
            guard !quick, frames == nil else { throw UsageError("--frames and --quick go with 'bench transport'") }
            benchmark = what == ["decode"] ? .decode : .chain
        case ["transport"]:
            guard input == nil, threads == nil, cTools == nil else {
                throw UsageError("-i and --threads go with 'bench decode' and 'bench chain', --c-tools with 'bench clients'")
            }
            guard frames == nil || seconds == nil else { throw UsageError("choose one of --frames and --seconds") }
            benchmark = .transport(TransportBudget(frames: frames, seconds: seconds ?? (quick ? 0.25 : 2), rounds: quick ? 1 : 3,
                                                   sections: sections ?? []))
        case ["clients"]:
            guard input == nil, threads == nil, frames == nil else {
                throw UsageError("-i, --threads and --frames do not go with 'bench clients' (it runs for --seconds)")
            }
            benchmark = .clients(seconds: seconds ?? (quick ? 1 : 3))
        case ["record"]:
            guard input == nil, threads == nil, python == nil, cTools == nil else {
                throw UsageError("-i, --threads, --python and --c-tools do not go with 'bench record'")
            }
            guard frames == nil || seconds == nil else { throw UsageError("choose one of --frames and --seconds") }
            benchmark = .record(frames: frames ?? Int((seconds ?? (quick ? 1 : 10)) * 30), quick: quick)
        case ["audio"]:
            guard threads == nil, python == nil, cTools == nil, frames == nil else {
                throw UsageError("--threads, --frames, --python and --c-tools do not go with 'bench audio'")
            }
            benchmark = .audio(seconds: Int(seconds ?? (quick ? 3 : 10)))
        case ["bridge"]:
            guard input == nil, threads == nil, python == nil, cTools == nil, seconds == nil else {
                throw UsageError("-i, --threads, --seconds, --python and --c-tools do not go with 'bench bridge'")
            }
            benchmark = .bridge(frames: frames ?? (quick ? 100 : 600), quick: quick)
        case ["gpu"]:
            guard threads == nil, frames == nil, cTools == nil else {
                throw UsageError("--threads, --frames and --c-tools do not go with 'bench gpu' (it runs for --seconds)")
            }
            benchmark = .gpu(seconds: seconds ?? (quick ? 0.5 : 2), sections: sections ?? [])
        default:
            throw UsageError("say what to measure: framesrv bench transport, bench decode, bench chain, bench clients, bench record, bench bridge, bench audio or bench gpu")
        }
    }

    /// `--section 5` or `--section 1,5`: the benchmark's sections, 1 to `last` (bench
    /// transport's 1 and 2 run together).
    private static func sections(_ text: String, of last: Int) throws(UsageError) -> Set<Int> {
        var sections = Set<Int>()
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let n = Int(part), (1...last).contains(n) else {
                throw UsageError("--section takes the benchmark's section numbers, 1 to \(last), comma-separated (got '\(text)')")
            }
            sections.insert(n)
        }
        return sections
    }
}

/// `framesrv demo`'s options (whether the input is readable is checked when it runs).
struct DemoOptions: CommandOptions {
    var input: String?
    var output = "framesrv-demo.mp4"
    var frames: Int?
    var sigma = 4.0

    init(parsing arguments: [String]) throws(UsageError) {
        var args = Arguments(arguments, command: "demo")
        input = try args.value("-i", "--input")
        output = try args.value("-o", "--output") ?? "framesrv-demo.mp4"
        frames = try args.int("--frames", range: 1...10_000_000) ?? (input == nil ? 300 : nil)
        sigma = try args.double("--sigma", range: 0.1...100) ?? 4
        try args.finish()
    }
}
