import Foundation
import FramePipeline
import FrameServer
import Glibc

/// `framesrv run`: a pipeline of stages, each its own process, wired and supervised.
enum RunCommand: Command {
    static let name = "run"
    static let summary = "run a pipeline described as gst-launch does: \"produce -i in.mp4 ! filter ... ! sink ...\""
    static let help = """
    usage: framesrv run [--quiet] "PIPELINE"
           framesrv run [--quiet] -f FILE

    Starts every stage of PIPELINE as its own process, creates the streams between them,
    and supervises them. The description is gst-launch-1.0's: '!' links a stage to the
    next, name=NAME names the stream a stage publishes, and NAME. starts another chain
    reading that stream (fan-out). Words are split and quoted as a shell does; in a FILE,
    newlines are blanks and '#' starts a comment.

      produce ARGS        framesrv produce (run adds --out and --wait-for)
      filter ARGS         framesrv filter (run adds --in, --out and --wait-for)
      sink ARGS           framesrv sink (run adds --in)
      tee name=NAME       no process: names the stream through it, to branch from with NAME.
      exec PROGRAM ARGS   any program (found on PATH); in ARGS, {in} is the stream it reads,
                          {out} the stream it creates, {wait-for} its lossless consumers

      framesrv run "produce -i in.mp4 ! filter --preset blur=4 ! filter --preset rgb ! sink --record out.mp4"
      framesrv run "produce -i in.mp4 ! tee name=t  t. ! sink --null  t. ! filter --preset gray ! sink --record g.mp4"
      framesrv run "produce -i in.mp4 ! exec python3 my_filter.py --in {in} --out {out} ! sink --null"

    Unnamed streams are called runPID-1, runPID-2, ...; named ones keep their name. Each
    producer waits for all of its lossless consumers (stages without --live; every exec
    stage counts as one), and stages start sinks first, so every lossless consumer gets every
    frame from the first. While the stages run, run shows their streams as 'framesrv top'
    does (every 2 s when standard output is not a terminal; not with --quiet).

    When every stage has exited 0, run exits 0. When a stage fails, run stops the others
    (SIGINT, then SIGKILL 5 s later), removes what is left of its streams and exits with
    that stage's status and its error line. A stage whose consumers have all exited (a sink
    with --frames N) is stopped as Ctrl-C would stop it. Ctrl-C (SIGINT or SIGTERM to run) stops the
    sources only: the chain drains into the sinks, so recordings are complete (stages still
    running 30 s later are stopped).

      -f FILE      read the description from FILE
      --quiet      no live view
    """

    static func run(_ o: RunOptions) throws -> Int32 {
        let pipeline = try parse(o.description)
        let dir = try RuntimeDirectory()
        installStopHandlers()
        let children = try start(pipeline)
        let view = o.quiet ? nil : LiveView(directory: dir, streams: pipeline.streamOrder.map { pipeline.streams[$0].name })
        let failed = supervise(children, pipeline, view: view)
        children.stopAll()
        defer { removeLeftovers(pipeline, dir) }
        if let failed {
            let stage = children.firstIndex { $0 === failed }!
            let (code, _, err) = failed.finishWithErrors()
            let line = err.split(separator: "\n").last.map { errorLine(String($0)) } ?? "exit status \(code)"
            warn("error: stage \(stage + 1) '\(pipeline.stages[stage].label)' failed: \(line)")
            return code == 0 ? 1 : code
        }
        for child in children { _ = child.finish() }
        return 0
    }

    /// A stage's last line without the "framesrv: error: " run's own line starts with.
    static func errorLine(_ line: String) -> String {
        var line = Substring(line)
        for prefix in ["framesrv: ", "error: "] where line.hasPrefix(prefix) { line = line.dropFirst(prefix.count) }
        return String(line)
    }

    static func parse(_ description: RunOptions.Description) throws(UsageError) -> Pipeline {
        let base = "run\(getpid())"
        do {
            switch description {
            case .text(let text): return try Pipeline(parsing: text, base: base)
            case .words(let words): return try Pipeline(words: words, base: base)
            }
        } catch { throw UsageError(error.description) }
    }

    /// The stages in `pipeline`'s order, started in its start order (sinks first).
    static func start(_ pipeline: Pipeline) throws -> [Child] {
        var started: [Int: Child] = [:]
        do {
            for i in pipeline.startOrder {
                let (framesrv, arguments) = pipeline.commandLine(i)
                let label = pipeline.stages[i].label
                started[i] = framesrv
                    ? try Child(arguments, label: label, captureOutput: false, captureErrors: true)
                    // Not marked as run's stage: a framesrv it starts would take its parent for run's and stop.
                    : try Child(["-u", parentEnvironmentKey] + arguments, label: label, executable: "/usr/bin/env",
                                captureOutput: false, captureErrors: true)
            }
        } catch {
            Array(started.values).stopAll()
            throw FrameServerError.invalidArgument("cannot start a stage: \(error)")
        }
        return pipeline.stages.indices.map { started[$0]! }
    }

    /// Waits until every stage has exited or one has failed (the first in pipeline order of
    /// those found failed). A stop signal stops the sources, and the rest drain; a stage whose
    /// every consumer has exited is stopped too (nothing would read what it publishes).
    static func supervise(_ children: [Child], _ pipeline: Pipeline, view: LiveView?) -> Child? {
        var failed: Child?
        var drainDeadline: UInt64?
        var stopped: Set<Int> = []
        func stop(_ i: Int) { if stopped.insert(i).inserted { children[i].interrupt() } }
        // A stage run stopped before its first frame exits 130: not a failure.
        func failure(_ i: Int) -> Bool {
            let status = children[i].exitStatus ?? 0
            return status != 0 && !(stopped.contains(i) && status == 130)
        }
        func going() -> Bool {
            if failed == nil { failed = children.indices.first(where: failure).map { children[$0] } }
            if StopSignal.requested, drainDeadline == nil {
                drainDeadline = monotonicNanos() + 30_000_000_000
                for i in pipeline.sources { stop(i) }
            }
            for stream in pipeline.streams where !stream.consumers.contains(where: { children[$0].process.isRunning }) {
                stop(stream.producer)
            }
            if let drainDeadline, monotonicNanos() > drainDeadline { return false }
            return failed == nil && children.contains { $0.process.isRunning }
        }
        if let view { view.run(while: going) } else { while going() { usleep(100_000) } }
        return failed
    }

    /// Streams whose producer died without removing its files (a stage killed).
    static func removeLeftovers(_ pipeline: Pipeline, _ dir: RuntimeDirectory) {
        let names = pipeline.streams.map(\.name)
        if names.contains(where: { FileManager.default.fileExists(atPath: dir.path + "/" + $0) }) {
            _ = dir.removeOrphans()
        }
    }
}
