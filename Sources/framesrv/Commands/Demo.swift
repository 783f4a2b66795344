import FoundationEssentials
import FrameMonitor
import FrameProcess
import FrameServer
import Glibc

/// `framesrv demo`: the pipeline framesrv exists for, as four processes.
enum DemoCommand: Command {
    static let name = "demo"
    static let summary = "run a decode -> blur -> YUV-to-RGB -> record chain of processes with a live view"
    static let help = """
    usage: framesrv demo [-i INPUT] [-o OUTPUT] [--frames N] [--sigma S]

    Runs a real chain of four processes on three streams, each stage reading the previous
    one's frames in place from shared memory:

      framesrv produce -i INPUT --out demoPID-src                 decode
      framesrv filter --in demoPID-src --out demoPID-blur --preset blur=S    Gaussian blur
      framesrv filter --in demoPID-blur --out demoPID-rgb --preset rgb       YUV to RGB (the source's matrix)
      framesrv sink --in demoPID-rgb --record OUTPUT               encode (libx264) and mux

    While it runs it shows each stream's fps, slots in use, and each consumer's lag and
    publish-to-acquire latency (what 'framesrv top' shows; run that in another terminal to
    watch the streams too). At the end it prints where the recording is.

      -i INPUT        a video file (default: FFmpeg's testsrc2 test source, 1280x720, 30 fps)
      -o OUTPUT       the recording (default: framesrv-demo.mp4 in the current directory)
      --frames N      frames to decode (default 300: 10 s of the test source; all of INPUT)
      --sigma S       blur strength (default 4)
    """

    static func run(_ o: DemoOptions) throws -> ExitStatus {
        if let input = o.input, !FileManager.default.isReadableFile(atPath: input) {
            throw UsageError("cannot read '\(input)'")
        }
        let dir = try RuntimeDirectory()
        let base = "demo\(getpid())"
        let (src, blur, rgb) = (base + "-src", base + "-blur", base + "-rgb")
        print("demo: \(o.input ?? "testsrc2 1280x720 30 fps") -> blur (sigma \(formatDouble(o.sigma, 1))) -> rgb24 -> \(o.output)")
        print("demo: streams \(src), \(blur), \(rgb) in \(dir.path)")
        installStopHandlers()
        let stages = try startStages(o, src: src, blur: blur, rgb: rgb)
        defer { for s in stages { s.stop() } }
        let start = monotonicNanos()
        LiveView(directory: dir, streams: [src, blur, rgb]).run {
            !StopSignal.requested && stages.contains { $0.isRunning } && stages.failedStage == nil
        }
        if let failed = stages.failedStage {
            // One stage failed: the others are stopped (a stage that does not stop is killed),
            // and the failure is the one line reported.
            stages.stopAll()
            let (code, _, err) = failed.finishWithErrors()
            let why = err.split(separator: "\n").last.map(String.init) ?? "exit status \(code)"
            throw CommandError.demoStageFailed(stage: failed.label, why: why)
        }
        if StopSignal.requested {
            // Stop the decoder only: its end of stream drains the chain, and the recorder
            // finishes the file with every frame decoded. Whatever still runs after 10 s is stopped too.
            stages.last?.interrupt()
            stages.stopAll(waitSeconds: 10)
        }
        return try report(stages, output: o.output, seconds: Double(monotonicNanos() - start) / 1e9)
    }

    /// Downstream first, each producer waiting for its consumer, so no frame is published
    /// before the next stage is there to take it.
    static func startStages(_ o: DemoOptions, src: String, blur: String, rgb: String) throws -> [Child] {
        let source = o.input.map { ["-i", $0] } ?? ["-f", "lavfi", "-i", "testsrc2=size=1280x720:rate=30"]
        var stages: [Child] = []
        do {
            stages.append(try Child(["sink", "--in", rgb, "--record", o.output, "--name", "recorder"],
                                    label: "record", captureErrors: true))
            stages.append(try Child(["filter", "--in", blur, "--out", rgb, "--preset", "rgb", "--wait-for", "1"],
                                    label: "rgb", captureErrors: true))
            stages.append(try Child(["filter", "--in", src, "--out", blur, "--preset", "blur=\(formatDouble(o.sigma, 2))", "--wait-for", "1"],
                                    label: "blur", captureErrors: true))
            stages.append(try Child(["produce"] + source + ["--out", src, "--wait-for", "1"]
                                    + (o.frames.map { ["--frames", String($0)] } ?? []),
                                    label: "decode", captureErrors: true))
        } catch {
            stages.stopAll()
            throw error
        }
        return stages
    }

    /// Each stage's summary line, and where the recording is.
    static func report(_ stages: [Child], output: String, seconds: Double) throws(CommandError) -> ExitStatus {
        var failed = false
        for child in stages.reversed() {
            let (code, out, err) = child.finishWithErrors()
            let line = out.split(separator: "\n").last.map(String.init) ?? ""
            print("demo: \(child.label): \(line.isEmpty ? "exit \(code)" : line)")
            if code != 0 {
                failed = true
                if !err.isEmpty { print(err.trimmed) }
            }
        }
        guard !failed else { throw .demoStagesFailed }
        let path = output.hasPrefix("/") ? output : FileManager.default.currentDirectoryPath + "/" + output
        print("demo: done in \(formatDouble(seconds, 1)) s; the recording is \(path)")
        print("demo: play it with: ffplay '\(path)'")
        return .success
    }
}

/// A few lines that show the demo's streams as `framesrv top` would, redrawn in place on a
/// terminal; otherwise one timestamped line every 2 s (`TopReport.logLine`).
struct LiveView {
    let directory: RuntimeDirectory
    let streams: [String]

    func run(while running: () -> Bool) {
        let tty = isatty(STDOUT_FILENO) == 1
        var previous: TopSample?
        var drawn = 0
        var lastPrint: UInt64 = 0
        while running() {
            usleep(500_000)
            let sample = TopSample.take(directory)
            let ours = TopSample(unixTime: sample.unixTime, nanos: sample.nanos,
                                 streams: streams.compactMap { name in sample.streams.first { $0.name == name } }, warnings: [])
            let report = TopReport(ours, previous: previous)
            let lines = report.table(width: tty ? max(20, TopCommand.terminalSize().columns - 1) : nil)
            defer { previous = ours }
            // fps needs two samples; once the streams are gone, the last view stays.
            guard previous != nil, !ours.streams.isEmpty else { continue }
            if tty {
                // Rows cut to the terminal's width, so each is one line to move back over.
                let width = TopCommand.terminalSize().columns
                var text = drawn > 0 ? "\u{1B}[\(drawn)A" : ""
                for line in lines { text += "\u{1B}[2K" + String(line.prefix(max(1, width - 1))) + "\n" }
                text += "\u{1B}[J"   // a shorter table than the last: clear what is left below
                _ = TopCommand.writeOut(text)
                drawn = lines.count
            } else if sample.nanos - lastPrint >= 2_000_000_000 {
                lastPrint = sample.nanos
                // One whole line, written at once: it appears as it happens, never cut by a stage's output.
                _ = TopCommand.writeOut(report.logLine + "\n")
            }
        }
    }
}
