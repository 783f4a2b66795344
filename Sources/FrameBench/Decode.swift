import FoundationEssentials
import FrameProcess
import FrameServer
import Glibc

/// `framesrv bench decode`: `produce -i FILE` into the pool with one lossless consumer
/// process, next to `ffmpeg -i FILE -f null -` on the same file in the same run.
extension Bench {
    struct DecodeRun {
        var frames: Int
        var seconds: Double
        /// What the producer's summary says of the path: "N zero-copy, M copied".
        var path = ""
        /// The decode loop alone, where the run says it (produce's summary, ffmpeg's -benchmark).
        var loopSeconds: Double?
        /// From the start to the last consumer's end of stream (its own exit not counted).
        var deliveredSeconds: Double?

        /// The quicker of the best run so far (nil before the first) and `b`.
        static func best(_ a: DecodeRun?, _ b: DecodeRun) -> DecodeRun { a.map { $0.seconds <= b.seconds ? $0 : b } ?? b }
    }

    /// The frame count of ffmpeg's `-progress pipe:1` output (its last `frame=` line), nil without one.
    static func progressFrames(_ out: String) -> Int? {
        out.split(separator: "\n").last { $0.hasPrefix("frame=") }.flatMap { Int($0.dropFirst("frame=".count).trimmed) }
    }

    func decode(input: String?, threads: Int?) throws {
        let inputScratch = ScratchDirectory(prefix: "framesrv-bench-input")
        let file = try benchInput(input, seconds: 10, in: inputScratch, bench: "decode")
        let threadText = threads.map(String.init) ?? "0 (FFmpeg decides)"
        print("framesrv bench decode: \(file), \(threadText) decoder threads, \(ProcessInfo.processInfo.activeProcessorCount) cores;"
              + " each figure: start to exit, best of 3 runs, interleaved")
        var direct: DecodeRun?, copied: DecodeRun?, ffmpeg: DecodeRun?
        let best = DecodeRun.best
        for _ in 0..<3 {
            direct = best(direct, try framesrvRun(file: file, threads: threads, copy: false))
            copied = best(copied, try framesrvRun(file: file, threads: threads, copy: true))
            ffmpeg = best(ffmpeg, try ffmpegRun(file: file, threads: threads))
        }
        guard let direct, let copied, let ffmpeg else { return }
        let fps = { (r: DecodeRun) in Double(r.frames) / r.seconds }
        for (label, run) in [("framesrv produce -i FILE", direct), ("framesrv produce -i FILE --copy", copied)] {
            print("  \(label) + 1 lossless null sink process: \(run.frames) frames in "
                  + "\(formatDouble(run.seconds, 3)) s, \(formatDouble(fps(run), 1)) frames/s (\(run.path))")
        }
        print("  ffmpeg \(threads.map { "-threads \($0) " } ?? "")-i FILE -f null -: \(ffmpeg.frames) frames in "
              + "\(formatDouble(ffmpeg.seconds, 3)) s, \(formatDouble(fps(ffmpeg), 1)) frames/s")
        print("  ratio framesrv/ffmpeg \(formatDouble(fps(direct) / max(fps(ffmpeg), 1e-9), 2)) (zero-copy path), "
              + "\(formatDouble(fps(copied) / max(fps(ffmpeg), 1e-9), 2)) (copy path)")
    }

    /// `framesrv produce -i FILE --wait-for 1` (-an unless `audio`: the pictures alone, as ffmpeg
    /// -map 0:v:0 decodes them) and a lossless null sink, both child processes;
    /// the sink starts first, so the producer's wait is only the sink's attachment.
    func framesrvRun(file: String, threads: Int?, copy: Bool, audio: Bool = false) throws -> DecodeRun {
        let scratch = ScratchDirectory(prefix: "framesrv-bench")
        let env = ["FRAMESRV_DIR": scratch.path]
        let sink = try Child(["sink", "--in", "bench", "--null", "--lossless", "--stats-json", "--quiet", "--wait", "60"],
                             label: "sink", environment: env)
        let start = monotonicNanos()
        let statsFile = scratch.path + "/produce-stats.json"
        let producer = try Child(["produce", "-i", file, "--out", "bench", "--wait-for", "1", "--quiet", "--stats-json", statsFile]
                                 + (audio ? [] : ["-an"])
                                 + (threads.map { ["--threads", String($0)] } ?? []) + (copy ? ["--copy"] : []),
                                 label: "producer", environment: env)
        let (pStatus, _) = producer.finish()
        let (sStatus, out) = sink.finish()
        let seconds = Double(monotonicNanos() - start) / 1e9
        guard pStatus == 0 else { throw BenchError.stageFailed(bench: "decode", stage: "framesrv produce", status: pStatus, said: "") }
        guard sStatus == 0, let line = out.split(separator: "\n").last,
              let received = StatsLine(line)?.received, received > 0 else {
            throw BenchError.stageFailed(bench: "decode", stage: "the sink", status: sStatus, said: out)
        }
        // The producer's figures from its --stats-json file, not from its summary line.
        let stats = (try? Data(contentsOf: URL(fileURLWithPath: statsFile))).flatMap { StatsLine(String(decoding: $0, as: UTF8.self)) }
        let path = stats.map { "\($0.zeroCopy.map(String.init) ?? "?") zero-copy, \($0.copied.map(String.init) ?? "?") copied" } ?? "?"
        return DecodeRun(frames: received, seconds: seconds, path: path)
    }

    /// `ffmpeg -threads T -i FILE -map 0:v:0 -f null -`, timed from start to exit; its frame
    /// count from `-progress`.
    func ffmpegRun(file: String, threads: Int?) throws -> DecodeRun {
        let start = monotonicNanos()
        let (status, out) = try runFFmpeg(["-v", "error", "-nostats", "-progress", "pipe:1"]
                                          + (threads.map { ["-threads", String($0)] } ?? [])
                                          + ["-i", file, "-map", "0:v:0", "-f", "null", "-"])
        let seconds = Double(monotonicNanos() - start) / 1e9
        guard status == 0 else { throw BenchError.ffmpegFailed(bench: "decode", doing: "decoding", status: status, said: out) }
        let frames = Self.progressFrames(out) ?? 0
        guard frames > 0 else { throw BenchError.incompleteRun(bench: "decode", what: "ffmpeg decoded no frames", said: "") }
        return DecodeRun(frames: frames, seconds: seconds)
    }

    /// `input` if it is readable, else a generated 1080p25 H.264 clip of `seconds` seconds
    /// (testsrc2, libx264 -preset veryfast) in `scratch`.
    func benchInput(_ input: String?, seconds: Int, in scratch: ScratchDirectory, bench: String) throws -> String {
        if let input {
            guard FileManager.default.isReadableFile(atPath: input) else {
                throw BenchError.unreadableInput(bench: bench, path: input)
            }
            return input
        }
        let file = scratch.path + "/testsrc2-1080p25-\(seconds)s.mp4"
        print("bench \(bench): generating \(file) (1920x1080, 25 fps, \(seconds) s, testsrc2, libx264 -preset veryfast)")
        let (status, err) = try runFFmpeg(["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=25",
                                           "-t", String(seconds), "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", file])
        guard status == 0 else { throw BenchError.ffmpegFailed(bench: bench, doing: "generating the clip", status: status, said: err) }
        return file
    }

    /// Runs the ffmpeg CLI (from PATH) with `arguments`; its status and standard output,
    /// or its standard error when it fails.
    func runFFmpeg(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let ffmpeg: Child
        do {
            ffmpeg = try Child(["ffmpeg", "-hide_banner", "-nostdin"] + arguments, label: "ffmpeg",
                               executable: "/usr/bin/env", captureErrors: true)
        } catch {
            throw BenchError.missingProgram("ffmpeg (\(error))", remedy: "install it (scripts/setup) or put it on PATH")
        }
        let (status, out, err) = ffmpeg.finishWithErrors()
        return (status, status == 0 ? out : err)
    }
}
