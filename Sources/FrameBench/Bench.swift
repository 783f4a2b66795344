/// What `framesrv bench` measures: one case per benchmark, with the settings only it takes.
public enum Benchmark: Equatable, Sendable {
    case transport(TransportBudget), decode, chain, clients(seconds: Double), record(frames: Int, quick: Bool),
         bridge(frames: Int, quick: Bool), audio(seconds: Int), gpu(seconds: Double, sections: Set<Int>)
}

/// bench transport: each measurement runs `seconds`, or `frames` frames when given;
/// `rounds` alternated rounds (the median is printed).
public struct TransportBudget: Equatable, Sendable {
    public var frames: Int?
    public var seconds: Double
    public var rounds: Int
    /// The sections of `bench transport` to run (1-6); empty: all.
    public var sections: Set<Int>

    public init(frames: Int?, seconds: Double, rounds: Int, sections: Set<Int> = []) {
        self.frames = frames; self.seconds = seconds; self.rounds = rounds; self.sections = sections
    }

    /// Whether section `n` runs.
    func runs(_ n: Int) -> Bool { sections.isEmpty || sections.contains(n) }
}

/// What a benchmark reads besides its own case: the input and decoder threads (decode,
/// chain), the Python with the framesrv package (transport, clients, gpu) and the C tools' directory (clients).
public struct BenchSettings: Equatable, Sendable {
    public var input: String?
    public var threads: Int?
    public var python: String?
    public var cTools: String?

    public init(input: String? = nil, threads: Int? = nil, python: String? = nil, cTools: String? = nil) {
        self.input = input; self.threads = threads; self.python = python; self.cTools = cTools
    }
}

/// The benchmarks: each prints its figures next to a peer's measured in the same run, one
/// line at a time to `report` as they are measured (a run takes minutes).
public struct Bench {
    let report: (String) -> Void

    /// Runs `benchmark` with `settings`, its report told line by line to `report`.
    public static func run(_ benchmark: Benchmark, settings: BenchSettings = BenchSettings(),
                           report: @escaping (String) -> Void) throws {
        let bench = Bench(report: report)
        switch benchmark {
        case .decode: try bench.decode(input: settings.input, threads: settings.threads)
        case .chain: try bench.chain(input: settings.input, threads: settings.threads)
        case .transport(let budget): try bench.transport(budget, python: settings.python)
        case .clients(let seconds): try bench.clients(seconds: seconds, python: settings.python, cTools: settings.cTools)
        case .record(let frames, let quick): try bench.record(frames: frames, rounds: quick ? 1 : 3, quick: quick)
        case .bridge(let frames, let quick): try bench.bridge(frames: frames, rounds: quick ? 1 : 3)
        case .audio(let seconds): try bench.audio(input: settings.input, seconds: seconds)
        case .gpu(let seconds, let sections): try bench.gpu(seconds: seconds, sections: sections, python: settings.python, input: settings.input)
        }
    }

    /// One line of the report (every benchmark's `print` is this one).
    func print(_ line: String) { report(line) }
}

extension String {
    /// The string right-aligned in `width` columns (as is when it is wider).
    func leftPadding(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}
