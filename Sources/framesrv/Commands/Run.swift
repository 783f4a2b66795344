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
    that stage's status and its error line. A lossless stage that exits before reading a
    frame fails the run too (its producer would wait for it forever). A stage whose consumers have all exited (a sink
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
        let failed = supervise(children, pipeline, dir, view: view)
        children.stopAll()
        defer { removeLeftovers(pipeline, dir) }
        if let failed {
            let (code, _, err) = children[failed.stage].finishWithErrors()
            let line = failed.line ?? err.split(separator: "\n").last.map { errorLine(String($0)) } ?? "exit status \(code)"
            warn("error: stage \(failed.stage + 1) '\(pipeline.stages[failed.stage].label)' failed: \(line)")
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
    /// every consumer has exited is stopped too (nothing would read what it publishes). A
    /// lossless consumer that exits before its stream published a frame fails the run: its
    /// producer would wait for it (--wait-for) forever.
    static func supervise(_ children: [Child], _ pipeline: Pipeline, _ dir: RuntimeDirectory,
                          view: LiveView?) -> (stage: Int, line: String?)? {
        var failed: (stage: Int, line: String?)?
        var drainDeadline: UInt64?
        var stopped: Set<Int> = []
        var reads = StreamReads(pipeline, dir)
        func stop(_ i: Int) { if stopped.insert(i).inserted { children[i].interrupt() } }
        // A stage run stopped before its first frame exits 130: not a failure.
        func failure(_ i: Int) -> Bool {
            let status = children[i].exitStatus ?? 0
            return status != 0 && !(stopped.contains(i) && status == 130)
        }
        func going() -> Bool {
            if failed == nil { failed = children.indices.first(where: failure).map { ($0, nil) } }
            if failed == nil { failed = reads.unread(children, stopped: stopped) }
            if StopSignal.requested, drainDeadline == nil {
                drainDeadline = monotonicNanos() + 30_000_000_000
                for i in pipeline.sources { stop(i) }
            }
            for (s, stream) in pipeline.streams.enumerated()
            where !stream.consumers.contains(where: { children[$0].process.isRunning }) && !reads.awaited(s) {
                stop(stream.producer)
            }
            if let drainDeadline, monotonicNanos() > drainDeadline { return false }
            return failed == nil && children.contains { $0.process.isRunning }
        }
        if let view { view.run(while: going) } else { while going() { usleep(100_000) } }
        return failed
    }

    /// Streams whose producer died without removing its files (a stage killed), and the
    /// `NAME.ended` marks of run's streams: no late consumer of this run will look for them.
    static func removeLeftovers(_ pipeline: Pipeline, _ dir: RuntimeDirectory) {
        let names = pipeline.streams.map(\.name)
        if names.contains(where: { FileManager.default.fileExists(atPath: dir.path + "/" + $0) }) {
            _ = dir.removeOrphans()
        }
        for name in names { unlink(dir.path + "/" + name + ".ended") }
    }
}

/// Which streams have published a frame, as run last looked: a lossless consumer that
/// exits 0 before its stream published anything leaves the producer waiting for it forever
/// (its --wait-for counts it), so run fails instead of hanging.
struct StreamReads {
    let pipeline: Pipeline
    let dir: RuntimeDirectory
    private var published: Set<Int> = []
    /// Streams with an exited lossless consumer whose producer has not created them yet.
    private var pending: Set<Int> = []

    init(_ pipeline: Pipeline, _ dir: RuntimeDirectory) { self.pipeline = pipeline; self.dir = dir }

    /// The first lossless stage that exited 0 (not stopped by run) before its running
    /// producer published a frame, with the line that says so.
    mutating func unread(_ children: [Child], stopped: Set<Int>) -> (stage: Int, line: String?)? {
        pending = []
        for (i, stage) in pipeline.stages.enumerated() {
            guard let s = stage.input, stage.lossless, !stopped.contains(i), children[i].exitStatus == 0,
                  !published.contains(s) else { continue }
            let stream = pipeline.streams[s]
            guard children[stream.producer].process.isRunning else { continue }
            guard let snapshot = try? StreamSnapshot.read(stream.name, in: dir) else { pending.insert(s); continue }
            if snapshot.published > 0 || snapshot.streamState != .running { published.insert(s); continue }
            let n = stream.waitFor
            return (i, "it exited before reading a frame of stream '\(stream.name)', whose producer (stage "
                       + "\(stream.producer + 1)) would wait for its \(n) lossless consumer\(n == 1 ? "" : "s") forever")
        }
        return nil
    }

    /// Whether stream `s` is not created yet while a consumer that exited waits for it to be judged.
    func awaited(_ s: Int) -> Bool { pending.contains(s) }
}
