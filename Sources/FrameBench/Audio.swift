import FoundationEssentials
import FrameProcess
import FrameServer
import Glibc

/// `framesrv bench audio`: a file's sound decoded into slots against `ffmpeg -i F -map 0:a
/// -f null -`, and a 48 kHz stereo stream's publish -> acquire latency at its natural rate
/// (1024-sample AAC frames, 46.9 a second) against a pipe carrying the same bytes at the same
/// pace between two processes of a small C program (the fastest honest pipe: no interpreter).
extension Bench {
    func audio(input: String?, seconds: Int) throws {
        let scratch = ScratchDirectory(prefix: "framesrv-bench-audio")
        let file = try audioInput(input, seconds: seconds >= 10 ? 600 : 60, in: scratch)
        print("framesrv bench audio: \(file), \(ProcessInfo.processInfo.activeProcessorCount) cores; decode: start to exit, best of 3, interleaved")
        var framesrv: DecodeRun?, ffmpeg: Double?
        for _ in 0..<3 {
            let run = try framesrvRun(file: file, threads: nil, copy: false, audio: true)
            framesrv = framesrv.map { $0.seconds <= run.seconds ? $0 : run } ?? run
            let f = try ffmpegAudioSeconds(file)
            ffmpeg = min(ffmpeg ?? f, f)
        }
        guard let framesrv, let ffmpeg else { return }
        print("  framesrv produce -i FILE + 1 lossless null sink process: \(framesrv.frames) audio frames in \(formatDouble(framesrv.seconds, 3)) s")
        print("  ffmpeg -i FILE -map 0:a:0 -f null -: \(formatDouble(ffmpeg, 3)) s")
        print("  ratio framesrv/ffmpeg (speed) \(formatDouble(ffmpeg / max(framesrv.seconds, 1e-9), 2)) (goal: at least 0.95)")
        let latency = try paced(file: file, seconds: seconds)
        let pipe = try pipePeerLatency(bytes: 8192, fps: 48000.0 / 1024, frames: Int(48000.0 / 1024 * Double(seconds)), in: scratch)
        print("  publish -> acquire at 46.9 frames/s (\(seconds) s, 1024 fltp stereo samples = 8192 bytes a frame): "
              + "p50 \(formatDouble(latency.p50, 1)) us, p99 \(formatDouble(latency.p99, 1)) us (goal: p50 under 50 us)")
        if let pipe {
            print("  a pipe, same bytes and pace, C writer and reader: p50 \(formatDouble(pipe.p50, 1)) us, p99 \(formatDouble(pipe.p99, 1)) us;"
                  + " ratio framesrv/pipe p50 \(formatDouble(latency.p50 / max(pipe.p50, 1e-9), 2))")
        } else {
            print("  a pipe: absent (no C compiler 'cc' on PATH: scripts/setup --test installs gcc)")
        }
    }

    /// The sound to decode: `input`, or AAC 48 kHz stereo made by ffmpeg (lavfi's sine).
    func audioInput(_ input: String?, seconds: Int, in scratch: ScratchDirectory) throws -> String {
        if let input {
            guard FileManager.default.isReadableFile(atPath: input) else { throw BenchError.unreadableInput(bench: "audio", path: input) }
            return input
        }
        let file = scratch.path + "/sine-aac-48k-stereo-\(seconds)s.m4a"
        print("bench audio: generating \(file) (AAC, 48 kHz stereo, \(seconds) s, lavfi sine)")
        let (status, err) = try runFFmpeg(["-v", "error", "-y", "-f", "lavfi", "-i", "sine=frequency=440:sample_rate=48000",
                                           "-t", String(seconds), "-ac", "2", "-c:a", "aac", file])
        guard status == 0 else { throw BenchError.ffmpegFailed(bench: "audio", doing: "generating the clip", status: status, said: err) }
        return file
    }

    /// `ffmpeg -i FILE -map 0:a:0 -f null -`, start to exit.
    func ffmpegAudioSeconds(_ file: String) throws -> Double {
        let start = monotonicNanos()
        let (status, out) = try runFFmpeg(["-v", "error", "-nostats", "-i", file, "-map", "0:a:0", "-f", "null", "-"])
        guard status == 0 else { throw BenchError.ffmpegFailed(bench: "audio", doing: "decoding", status: status, said: out) }
        return Double(monotonicNanos() - start) / 1e9
    }

    /// `produce -i FILE -re -t S` and a lossless null sink: the sink's latency percentiles.
    func paced(file: String, seconds: Int) throws -> (p50: Double, p99: Double) {
        let scratch = ScratchDirectory(prefix: "framesrv-bench")
        let env = ["FRAMESRV_DIR": scratch.path]
        let sink = try Child(["sink", "--in", "bench", "--null", "--lossless", "--stats-json", "--quiet", "--wait", "60"],
                             label: "sink", environment: env)
        let producer = try Child(["produce", "-i", file, "--out", "bench", "-re", "-t", String(seconds), "--wait-for", "1", "--quiet"],
                                 label: "producer", environment: env)
        let (pStatus, _) = producer.finish()
        let (sStatus, out) = sink.finish()
        guard pStatus == 0 else { throw BenchError.stageFailed(bench: "audio", stage: "framesrv produce -re", status: pStatus, said: "") }
        guard sStatus == 0, let line = out.split(separator: "\n").last, let stats = StatsLine(line),
              let p50 = stats.latencyP50, let p99 = stats.latencyP99 else {
            throw BenchError.stageFailed(bench: "audio", stage: "the sink", status: sStatus, said: out)
        }
        return (p50, p99)
    }

    /// The pipe peer (CPeers.pipeSource): `frames` frames of `bytes` at `fps` from one process
    /// to another, each timed from its write to the end of its read. nil without `cc`.
    func pipePeerLatency(bytes: Int, fps: Double, frames: Int, in scratch: ScratchDirectory) throws -> (p50: Double, p99: Double)? {
        try CPeers.latency("pipe_peer", source: CPeers.pipeSource, arguments: [String(bytes), String(fps), String(frames)],
                           in: scratch, bench: "audio", within: Double(frames) / fps + 60)
    }
}
