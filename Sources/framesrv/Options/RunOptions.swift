import FoundationEssentials

/// `framesrv run`'s options: run's own options first, then the description (one argument
/// to split as a shell would, several taken as its words), or -f FILE.
struct RunOptions: CommandOptions {
    enum Description { case text(String), words([String]) }
    var description: Description
    var quiet = false
    /// `--guard TOKEN`: not a run but the guard of the run named TOKEN (PipelineRun starts it).
    var guardToken: String?

    init(parsing arguments: [String]) throws(UsageError) {
        var rest = arguments[...]
        var file: String?
        while let first = rest.first, first.hasPrefix("-") {
            rest = rest.dropFirst()
            switch first {
            case "-q", "--quiet": quiet = true
            case "--guard":
                guard let token = rest.popFirst(), rest.isEmpty else { throw UsageError("--guard takes one token and nothing after it") }
                guardToken = token
                description = .words([])
                return
            case "-f", "--file":
                guard let path = rest.popFirst() else { throw UsageError("-f needs a file: framesrv run -f FILE") }
                file = path
            case "--": break
            default: throw UsageError("unknown option '\(first)' for run (put the pipeline after run's options)")
            }
            if first == "--" { break }
        }
        if let file {
            guard rest.isEmpty else { throw UsageError("-f FILE or a pipeline, not both ('\(rest.first!)' after -f \(file))") }
            guard let text = try? String(contentsOfFile: file, encoding: .utf8) else { throw UsageError("cannot read '\(file)'") }
            description = .text(text)
        } else if rest.count == 1 {
            description = .text(rest.first!)
        } else if rest.isEmpty {
            throw UsageError("missing the pipeline: framesrv run \"produce -i in.mp4 ! sink --null\" (or -f FILE)")
        } else {
            description = .words(Array(rest))
        }
    }
}
