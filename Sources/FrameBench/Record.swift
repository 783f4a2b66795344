import FoundationEssentials
import FrameControl
import FrameMedia
import FrameProcess
import FrameServer
import Glibc

/// `framesrv bench record`: recording throughput (FFV1 and raw) next to ffmpeg encoding the
/// same frames, replay at --rate max, and seek latency, in the same run.
extension Bench {
    /// The recorded frames: the test pattern at 1080p yuv420p.
    static let recordPattern = ["--pattern", "--size", "1920x1080", "--pix-fmt", "yuv420p"]
    static let recordFrameBytes = 1920 * 1080 * 3 / 2
    /// The ffmpeg encoders matching `framesrv record --codec ffv1|raw` (FFV1 as TrackEncoder
    /// configures it: level 3, every frame a keyframe, 16 slices with CRCs, threads on every core).
    static let recordPeers = ["ffv1": ["-c:v", "ffv1", "-level", "3", "-g", "1", "-slices", "16", "-slicecrc", "1", "-threads", "0"],
                              "raw": ["-c:v", "rawvideo"]]

    func record(frames: Int, rounds: Int, quick: Bool) throws {
        print("framesrv bench record: 1920x1080 yuv420p, \(frames) frames of the test pattern, "
              + "\(ProcessInfo.processInfo.activeProcessorCount) cores; throughput figures: start to exit, best of \(rounds) interleaved runs")
        let scratch = ScratchDirectory(prefix: "framesrv-bench-record")
        let dump = scratch.path + "/pattern.yuv"
        try dumpPattern(frames: frames, to: dump)
        let files = try recordingThroughput(frames: frames, rounds: rounds, dump: dump, in: scratch)
        try replayThroughput(files: files, frames: frames, rounds: rounds)
        try seekLatency(recording: files[0], quick: quick, in: scratch)
    }

    /// The pattern's frames written once by `sink --raw` to `path`: what ffmpeg reads.
    func dumpPattern(frames: Int, to path: String) throws {
        let scratch = ScratchDirectory(prefix: "framesrv-bench")
        let env = ["FRAMESRV_DIR": scratch.path]
        let stages = [try Child(["sink", "--in", "bench", "--raw", path, "--quiet", "--wait", "60"], label: "sink --raw",
                                environment: env, captureErrors: true),
                      try Child(["produce"] + Self.recordPattern + ["--rate", "max", "--frames", String(frames), "--out", "bench",
                                 "--wait-for", "1", "--quiet"], label: "produce", environment: env, captureErrors: true)]
        try awaitStages(stages, until: stages[0], bench: "record")
        let bytes = fileSize(path)
        guard bytes == frames * Self.recordFrameBytes else {
            throw BenchError.incompleteRun(bench: "record", what: "sink --raw wrote \(bytes) bytes, not \(frames) frames", said: "")
        }
    }

    func fileSize(_ path: String) -> Int {
        // FoundationEssentials gives the size as a UInt (Foundation's was an NSNumber): stat says it plainly.
        var st = stat()
        return stat(path, &st) == 0 ? Int(st.st_size) : 0
    }

    /// Waits for `last` to exit (checked every millisecond); when a stage fails first, stops
    /// them all and throws its error. Every stage is reaped before returning.
    func awaitStages(_ stages: [Child], until last: Child, bench: String) throws {
        while last.isRunning, stages.failedStage == nil { usleep(1000) }
        if let failed = stages.failedStage {
            stages.stopAll()
            let (status, _, err) = failed.finishWithErrors()
            throw BenchError.stageFailed(bench: bench, stage: failed.label, status: status, said: err)
        }
    }

    /// Section 1: each round records with framesrv (ffv1, raw) and encodes with ffmpeg
    /// (ffv1, rawvideo); prints the best of each and the ratios. Returns framesrv's files
    /// (ffv1, raw) for the replay and seek sections.
    func recordingThroughput(frames: Int, rounds: Int, dump: String, in scratch: ScratchDirectory) throws -> [String] {
        var best: [String: Double] = [:], bytes: [String: Int] = [:]
        let files = ["ffv1", "raw"].map { scratch.path + "/framesrv-\($0).nut" }
        for _ in 0..<rounds {
            for (codec, file) in zip(["ffv1", "raw"], files) {
                best["framesrv " + codec] = min(best["framesrv " + codec] ?? .infinity, try recordRun(codec: codec, frames: frames, output: file))
                bytes["framesrv " + codec] = fileSize(file)
                let (seconds, size) = try ffmpegEncodeRun(codec: codec, frames: frames, dump: dump, in: scratch)
                (best["ffmpeg " + codec], bytes["ffmpeg " + codec]) = (min(best["ffmpeg " + codec] ?? .infinity, seconds), size)
            }
        }
        print("1. recording throughput (framesrv: produce --pattern --rate max -> record --in bench -o FILE.nut, 2 processes; "
              + "ffmpeg: -f rawvideo -i FILE, the same frames from a file in /dev/shm, -f nut)")
        func row(_ label: String, _ key: String) {
            print("  \(label): \(frames) frames in \(formatDouble(best[key]!, 3)) s, \(bytes[key]! / frames) bytes/frame, "
                  + "\(formatDouble(Double(frames) / best[key]!, 1)) frames/s")
        }
        for codec in ["ffv1", "raw"] {
            row("framesrv record --codec \(codec)", "framesrv " + codec)
            row("ffmpeg \(Self.recordPeers[codec]!.joined(separator: " "))", "ffmpeg " + codec)
        }
        // The ratio of frames/s is the inverse ratio of the times.
        let ratio = { (codec: String) in formatDouble(best["ffmpeg " + codec]! / best["framesrv " + codec]!, 2) }
        print("  ratio framesrv/ffmpeg frames/s: ffv1 \(ratio("ffv1")), raw \(ratio("raw"))")
        return files
    }

    /// `produce --pattern --rate max --frames N` into `record --codec C -o output`: seconds
    /// from the start to the recorder's exit; throws unless it recorded every frame.
    func recordRun(codec: String, frames: Int, output: String) throws -> Double {
        let scratch = ScratchDirectory(prefix: "framesrv-bench")
        let env = ["FRAMESRV_DIR": scratch.path]
        try? FileManager.default.removeItem(atPath: output)
        let start = monotonicNanos()
        let recorder = try Child(["record", "--in", "bench", "-o", output, "--codec", codec, "--wait", "60"], label: "record",
                                 environment: env, captureErrors: true)
        let producer = try Child(["produce"] + Self.recordPattern + ["--rate", "max", "--frames", String(frames), "--out", "bench",
                                  "--wait-for", "1", "--quiet"], label: "produce", environment: env, captureErrors: true)
        try awaitStages([recorder, producer], until: recorder, bench: "record")
        let seconds = Double(monotonicNanos() - start) / 1e9
        _ = producer.finishWithErrors()
        let (_, out, err) = recorder.finishWithErrors()
        // "record: PATH: N frames (bench N), B bytes"
        let recorded = out.split(separator: "\n").last { $0.hasPrefix("record: ") }
            .flatMap { $0.components(separatedBy: ": ").last?.split(separator: " ").first }.flatMap { Int($0) }
        guard recorded == frames else {
            throw BenchError.incompleteRun(bench: "record", what: "record --codec \(codec) recorded \(recorded ?? 0) of \(frames) frames", said: out + err)
        }
        return seconds
    }

    /// `ffmpeg -f rawvideo ... -i DUMP -c:v C -f nut OUT`: seconds from start to exit, and the
    /// output's size; the output is removed afterwards (only framesrv's files are kept).
    func ffmpegEncodeRun(codec: String, frames: Int, dump: String, in scratch: ScratchDirectory) throws -> (Double, Int) {
        let output = scratch.path + "/ffmpeg-\(codec).nut"
        defer { try? FileManager.default.removeItem(atPath: output) }
        let start = monotonicNanos()
        let (status, out) = try runFFmpeg(["-v", "error", "-nostats", "-progress", "pipe:1", "-f", "rawvideo", "-pix_fmt", "yuv420p",
                                           "-s", "1920x1080", "-r", "30", "-i", dump] + Self.recordPeers[codec]! + ["-f", "nut", "-y", output])
        let seconds = Double(monotonicNanos() - start) / 1e9
        let encoded = Self.progressFrames(out)
        guard status == 0, encoded == frames else {
            throw BenchError.ffmpegFailed(bench: "record", doing: "encoding -c:v \(codec) (\(encoded ?? 0) of \(frames) frames)", status: status, said: out)
        }
        return (seconds, fileSize(output))
    }

    /// Section 2: `replay FILE --rate max` into one lossless null sink process, for each of
    /// framesrv's recordings, next to ffmpeg decoding the same file (-f null, threads as it decides).
    func replayThroughput(files: [String], frames: Int, rounds: Int) throws {
        var replays = [DecodeRun?](repeating: nil, count: files.count), decodes = replays
        let best = DecodeRun.best
        for _ in 0..<rounds {
            for i in files.indices {
                replays[i] = best(replays[i], try replayRun(file: files[i], frames: frames))
                decodes[i] = best(decodes[i], try ffmpegRun(file: files[i], threads: nil))
            }
        }
        print("2. replay --rate max into 1 lossless 'sink --null' process (start to exit), and ffmpeg decoding the same file")
        let fps = { (r: DecodeRun?) in Double(r!.frames) / r!.seconds }
        for (i, codec) in ["ffv1", "raw"].enumerated() {
            print("  framesrv replay \(codec).nut --rate max: \(replays[i]!.frames) frames in \(formatDouble(replays[i]!.seconds, 3)) s, "
                  + "\(formatDouble(fps(replays[i]), 1)) frames/s")
            print("  ffmpeg -i \(codec).nut -f null -: \(decodes[i]!.frames) frames in \(formatDouble(decodes[i]!.seconds, 3)) s, "
                  + "\(formatDouble(fps(decodes[i]), 1)) frames/s")
        }
        print("  ratio framesrv replay/ffmpeg decode frames/s: ffv1 \(formatDouble(fps(replays[0]) / fps(decodes[0]), 2)), "
              + "raw \(formatDouble(fps(replays[1]) / fps(decodes[1]), 2))")
    }

    /// One `replay FILE --rate max` with a lossless null sink (started first: the replay
    /// waits for it); throws unless the sink received every frame.
    func replayRun(file: String, frames: Int) throws -> DecodeRun {
        let scratch = ScratchDirectory(prefix: "framesrv-bench")
        let env = ["FRAMESRV_DIR": scratch.path]
        let start = monotonicNanos()
        let sink = try Child(["sink", "--in", "bench", "--null", "--lossless", "--stats-json", "--quiet", "--wait", "60"],
                             label: "sink", environment: env, captureErrors: true)
        let replay = try Child(["replay", file, "--rate", "max", "--quiet"], label: "replay", environment: env, captureErrors: true)
        try awaitStages([sink, replay], until: sink, bench: "record")
        let seconds = Double(monotonicNanos() - start) / 1e9
        _ = replay.finishWithErrors()
        let (_, out, err) = sink.finishWithErrors()
        let received = out.split(separator: "\n").last.flatMap { StatsLine($0) }?.received
        guard received == frames else {
            throw BenchError.incompleteRun(bench: "record", what: "the replay's sink received \(received ?? 0) of \(frames) frames", said: err)
        }
        return DecodeRun(frames: frames, seconds: seconds)
    }
}

/// Section 3 of `bench record`: seek latency, from the request sent on the control socket
/// (what `framesrv ctl NAME seek T` sends) to the first frame after the seek (the one
/// flagged as a discontinuity at T) received by a lossless consumer in this process.
extension Bench {
    /// Where the seeks go, as fractions of the input's duration: back and forth, at 0.2 to
    /// 1.6 s after a keyframe of the 10 s H.264 clip (a keyframe every 2 s).
    static let seekFractions = [0.55, 0.3, 0.7, 0.45, 0.62, 0.36, 0.5]

    func seekLatency(recording: String, quick: Bool, in scratch: ScratchDirectory) throws {
        let clipSeconds = quick ? 4 : 10
        let clip = scratch.path + "/h264-gop2s.mp4"
        let (status, err) = try runFFmpeg(["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=25",
                                           "-t", String(clipSeconds), "-c:v", "libx264", "-preset", "veryfast", "-g", "50",
                                           "-keyint_min", "50", "-sc_threshold", "0", "-pix_fmt", "yuv420p", clip])
        guard status == 0 else { throw BenchError.ffmpegFailed(bench: "record", doing: "generating the clip", status: status, said: err) }
        print("3. seek latency: the seek request sent on the control socket (as framesrv ctl NAME seek T) -> the first frame "
              + "after the seek (flagged discontinuity) received by a consumer in this process; \(Self.seekFractions.count) seeks each")
        let rows: [(String, [String], Bool)] = [
            ("replay ffv1.nut, paused (seek T, then step 1)", ["replay", recording, "--paused", "--quiet"], true),
            ("replay ffv1.nut, playing at rate 1 (--loop)", ["replay", recording, "--loop", "--quiet"], false),
            ("produce -i H.264 1080p25 (keyframe every 2 s, \(clipSeconds) s), playing (-re)",
             ["produce", "-i", clip, "--out", "bench", "-re", "--wait-for", "1", "--quiet"], false),
        ]
        for (label, arguments, paused) in rows {
            let latencies = try seekRun(arguments, paused: paused).sorted()
            print("  \(label): p50 \(formatDouble(latencies[latencies.count / 2] * 1000, 1)) ms, "
                  + "max \(formatDouble(latencies.last! * 1000, 1)) ms")
        }
    }

    /// Starts the producer (`arguments`, publishing stream "bench") and runs `seekSeries`
    /// on it; a failure says what the producer said.
    func seekRun(_ arguments: [String], paused: Bool) throws -> [Double] {
        let scratch = ScratchDirectory(prefix: "framesrv-bench")
        let producer = try Child(arguments, label: arguments[0], environment: ["FRAMESRV_DIR": scratch.path], captureErrors: true)
        do {
            let latencies = try seekSeries(directory: try RuntimeDirectory(path: scratch.path), paused: paused,
                                           loops: arguments.contains("--loop"), label: arguments[0])
            [producer].stopAll()
            _ = producer.finishWithErrors()
            return latencies
        } catch {
            [producer].stopAll()
            let (status, _, err) = producer.finishWithErrors()
            throw BenchError.seekRunFailed(reason: "\(error)", producer: arguments[0], status: status,
                                           said: err.trimmed)
        }
    }

    /// Attaches a consumer and seeks to each of `seekFractions` of the duration the producer
    /// states; the latencies in seconds. `loops`: the input restarts at its end (a
    /// discontinuity at the first frame's pts, not a seek's).
    func seekSeries(directory: RuntimeDirectory, paused: Bool, loops: Bool, label: String) throws -> [Double] {
        var options = ConsumerOptions(mode: .lossless)
        options.waitSeconds = 60
        let consumer = try Consumer(stream: "bench", options: options, directory: directory)
        // next() gives up (nil) 10 s after the last deadline set: nothing here waits for ever.
        var deadline = monotonicNanos() + 60_000_000_000
        consumer.shouldStop = { monotonicNanos() > deadline }
        try consumer.attach()
        var first: Int64?
        if !paused { first = try drain(consumer, seconds: 0.2) }
        let duration = try statedDuration(of: label, directory: directory)
        var latencies: [Double] = []
        for fraction in Self.seekFractions {
            let target = (duration * fraction * 100).rounded() / 100
            if !paused { _ = try drain(consumer, seconds: 0.2) }
            deadline = monotonicNanos() + 10_000_000_000
            let sent = monotonicNanos()
            try control(.seek(.absolute(target)), directory: directory)
            if paused { try control(.step(1), directory: directory) }
            try awaitSeekFrame(consumer, target: target, notPTS: loops ? first : nil)
            latencies.append(Double(monotonicNanos() - sent) / 1e9)
        }
        return latencies
    }

    /// The duration in the stream's status; its control socket may appear just after the stream.
    func statedDuration(of producer: String, directory: RuntimeDirectory) throws -> Double {
        let end = monotonicNanos() + 10_000_000_000
        while monotonicNanos() < end {
            if let status = ControlClient.playbackStatus(of: "bench", directory: directory, timeout: 2) {
                guard let duration = status.duration, duration > 0 else { break }
                return duration
            }
            usleep(10_000)
        }
        throw BenchError.seekFailed("\(producer) states no duration")
    }

    func control(_ request: ControlRequest, directory: RuntimeDirectory) throws {
        let reply = try ControlClient.send(request, to: "bench", directory: directory)
        if case .error(let message) = reply {
            throw BenchError.seekFailed("'\(request.text)' refused: \(message)")
        }
    }

    /// Takes frames for `seconds` (the producer plays on between seeks); the first one's pts.
    func drain(_ consumer: Consumer, seconds: Double) throws -> Int64? {
        let end = monotonicNanos() + UInt64(seconds * 1e9)
        var first: Int64??
        while monotonicNanos() < end || first == nil {
            guard let frame = try consumer.next() else { throw BenchError.seekFailed("the stream ended before the seeks") }
            if first == nil { first = .some(frame.header.description.pts) }
            frame.release()
        }
        return first ?? nil
    }

    /// Takes frames until the one the seek to `target` published: the next one flagged
    /// discontinuity, unless its pts is `notPTS`, the first frame's (a loop's restart; produce
    /// -i restarts its pts at 0 after a seek, as ffmpeg -ss does, so it is not asked for there).
    func awaitSeekFrame(_ consumer: Consumer, target: Double, notPTS: Int64?) throws {
        while let frame = try consumer.next() {
            let d = frame.header.description
            if d.flags.contains(.discontinuity), notPTS == nil || d.pts != notPTS { return }
        }
        throw BenchError.seekFailed("no frame within 10 s of the seek to \(target) s")
    }
}
