import FrameProcess
import FrameServer
import Glibc

/// A pipeline's stages running as processes, and the policy that supervises them:
///
/// - stages start in `Pipeline.startOrder` (sinks first), so no lossless consumer misses a frame;
/// - every line a stage writes on standard error goes to run's as it comes, after the
///   stage's prefix (`Pipeline.prefixes`, padded: `edges | text`), as docker compose does;
/// - the first stage found failed (in pipeline order) ends the run: the others are stopped,
///   and its status (128 + N for a stage killed by signal N, as a shell says) and its error
///   are the run's: its one line, or the headline and last lines of what it wrote
///   (a Python traceback from its start);
/// - a lossless stage that exits before its stream published a frame fails the run too:
///   its producer would wait for it forever (see `StreamReads`);
/// - a stage whose consumers have all exited is stopped as a stop request would stop it;
/// - the first interrupt (Ctrl-C) stops the sources only, and the rest drain into the sinks,
///   for `drainSeconds` at most; the consumers of a source stopped before it published are
///   stopped too (they would wait for it forever);
/// - a second interrupt forces: every stage's process group is killed at once, the streams
///   are removed, and the run exits 130.
///
/// Use it from one thread: `init` starts the stages, `poll` until it returns false, then `finish`.
public final class PipelineRun {
    public let pipeline: Pipeline
    let directory: RuntimeDirectory
    let children: [Child]
    private var stopped: Set<Int> = []
    private var failed: (stage: Int, line: String?)?
    private var drainDeadline: UInt64?
    private var forced = false
    private var reads: StreamReads

    /// Told once, at the first interrupt, what happens next.
    public var notice: (String) -> Void = { _ in }

    /// How long stages may drain after the first interrupt before they are stopped too.
    public static let drainSeconds: UInt64 = 30

    /// How a run ended: the status to exit with and, when a stage failed, the line that says
    /// which and why ("stage 2 'filter ...' failed: cannot use '/x.png'").
    public struct Outcome: Sendable {
        public let status: Int32
        public let error: String?
    }

    /// Starts every stage of `pipeline`; `framesrv` is the executable for its framesrv stages.
    public init(_ pipeline: Pipeline, directory: RuntimeDirectory, framesrv: String = selfExecutable) throws(PipelineError) {
        self.pipeline = pipeline
        self.directory = directory
        children = try Self.start(pipeline, in: directory, framesrv: framesrv)
        reads = StreamReads(pipeline, directory)
    }

    /// The stages in `pipeline`'s order, started in its start order (sinks first) with
    /// FRAMESRV_DIR set to `directory`. If one cannot start, those already started are stopped.
    static func start(_ pipeline: Pipeline, in directory: RuntimeDirectory, framesrv: String) throws(PipelineError) -> [Child] {
        var started: [Int: Child] = [:]
        let environment = ["FRAMESRV_DIR": directory.path]
        let prefixes = pipeline.prefixes, width = prefixes.map(\.count).max() ?? 0
        for i in pipeline.startOrder {
            let (isFramesrv, arguments) = pipeline.commandLine(i)
            let label = pipeline.stages[i].label
            let prefix = prefixes[i] + String(repeating: " ", count: width - prefixes[i].count) + " | "
            let lines: @Sendable (String) -> Void = { line in writeLine(prefix + line) }
            do {
                started[i] = isFramesrv
                    ? try Child(arguments, label: label, executable: framesrv, environment: environment,
                                captureOutput: false, captureErrors: true, errorLines: lines)
                    // Not marked as run's stage: a framesrv it starts would take its parent for run's and stop.
                    : try Child(["-u", parentEnvironmentKey] + arguments, label: label, executable: "/usr/bin/env",
                                environment: environment, captureOutput: false, captureErrors: true, errorLines: lines)
            } catch {
                Array(started.values).stopAll()
                throw PipelineError("cannot start stage \(i + 1) '\(label)': \(error)")
            }
        }
        return pipeline.stages.indices.map { started[$0]! }
    }

    /// One look at the stages, applying the policy above, after `interrupts` Ctrl-Cs
    /// (`Interrupts.count`); false once the run is over (every stage exited, one failed, the
    /// drain took too long, or a second interrupt forced the end).
    public func poll(interrupts: Int) -> Bool {
        if interrupts >= 2 {
            forced = true
            for child in children { child.kill() }
            return false
        }
        if failed == nil { failed = children.indices.first(where: isFailure).map { ($0, nil) } }
        if failed == nil { failed = reads.unread(children, stopped: stopped) }
        if interrupts == 1, drainDeadline == nil {
            notice("stopping sources; Ctrl-C again to force")
            drainDeadline = monotonicNanos() + Self.drainSeconds * 1_000_000_000
            for i in pipeline.sources { stop(i) }
        }
        stopWhatNothingReads()
        if let drainDeadline, monotonicNanos() > drainDeadline { return false }
        return failed == nil && children.contains { $0.isRunning }
    }

    /// Producers whose consumers have all exited, and consumers of a stage run stopped
    /// before its first frame (exit 130: it will never publish).
    private func stopWhatNothingReads() {
        for (s, stream) in pipeline.streams.enumerated() {
            if !stream.consumers.contains(where: { children[$0].isRunning }) && !reads.awaited(s) {
                stop(stream.producer)
            }
            if stopped.contains(stream.producer), children[stream.producer].exitStatus == 130 {
                for i in stream.consumers { stop(i) }
            }
        }
    }

    private func stop(_ i: Int) { if stopped.insert(i).inserted { children[i].interrupt() } }

    /// A stage run stopped before its first frame exits 130: not a failure.
    private func isFailure(_ i: Int) -> Bool {
        let status = children[i].exitStatus ?? 0
        return status != 0 && !(stopped.contains(i) && status == 130)
    }

    /// Stops every stage still running (SIGINT, then SIGKILL 5 s later), removes what is
    /// left of the streams, and says how the run ended (forced: 130, as a shell reports Ctrl-C).
    public func finish() -> Outcome {
        children.stopAll()
        defer { removeLeftovers() }
        // Every stage's standard error passed through before run's own last line.
        for child in children { _ = child.finishWithErrors() }
        if forced { return Outcome(status: 130, error: nil) }
        guard let failed else { return Outcome(status: 0, error: nil) }
        let child = children[failed.stage]
        let (_, _, err) = child.finishWithErrors()
        let code = child.exitStatus ?? 1
        let text = failed.line ?? Self.failureText(err, killedBy: child.killedBy, status: code)
        return Outcome(status: code == 0 ? 1 : code, error: "stage \(failed.stage + 1) '\(pipeline.stages[failed.stage].label)' failed: \(text)")
    }

    /// What a failed stage's error says: `killed by SIGSEGV`, its one line, or (several
    /// lines) a headline and then its last lines, indented: a Python traceback from its
    /// start, or the last `lastLines`. The headline is the traceback's exception line, else the last line.
    static func failureText(_ err: String, killedBy signal: Int32?, status: Int32) -> String {
        let lines = err.split(separator: "\n").map(String.init).filter { !$0.allSatisfy(\.isWhitespace) }
        var tail = lines.suffix(lastLines)
        var exception: String?
        if let start = lines.lastIndex(where: { $0.hasPrefix("Traceback (most recent call last)") }), lines.count - start <= 60 {
            tail = lines[start...]
            exception = tail.dropFirst().first { !$0.hasPrefix(" ") && !$0.hasPrefix(">") }
        }
        let headline: String
        if let signal { headline = "killed by \(signalName(signal))" }
        else if tail.count > 1, let exception { headline = exception }
        else if let last = tail.last { headline = errorLine(last) }
        else { headline = "exit status \(status)" }
        guard tail.count > 1 || (signal != nil && !tail.isEmpty) else { return headline }
        return headline + "; its last lines:\n" + tail.map { "    " + $0 }.joined(separator: "\n")
    }

    /// The most lines of a failed stage's standard error its error repeats (but a traceback's).
    public static let lastLines = 10

    /// One line on standard error, written at once (lines of stages' threads never mix).
    static func writeLine(_ line: String) {
        var text = line + "\n"
        text.withUTF8 { _ = try? writeAll(2, UnsafeRawBufferPointer($0)) }
    }

    /// A stage's last line without the "framesrv: error: " the run's own line starts with.
    static func errorLine(_ line: String) -> String {
        var line = Substring(line)
        for prefix in ["framesrv: ", "error: "] where line.hasPrefix(prefix) { line = line.dropFirst(prefix.count) }
        return String(line)
    }

    /// Streams whose producer died without removing its files (a stage killed), and the
    /// `NAME.ended` marks of the run's streams: no late consumer of this run will look for them.
    private func removeLeftovers() {
        let names = pipeline.streams.map(\.name)
        let files = names.flatMap { name in [".ctl", ".sock", ".lock"].map { directory.path + "/" + name + $0 } }
        if files.contains(where: { access($0, F_OK) == 0 }) {
            _ = directory.removeOrphans()
        }
        for name in names { unlink(directory.path + "/" + name + ".ended") }
    }
}
