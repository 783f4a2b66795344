import FoundationEssentials
import FrameBridge
import FrameProcess
import FrameServer
import Glibc

/// `framesrv bench bridge`: 1080p raw over TCP loopback through `bridge send/recv` (plaintext
/// and CURVE) next to ffmpeg sending the same frames over tcp://, and the added latency, in
/// the same run.
extension Bench {
    func bridge(frames: Int, rounds: Int) throws {
        print("framesrv bench bridge: 1920x1080 yuv420p raw, \(frames) frames of the test pattern over TCP loopback, "
              + "\(ProcessInfo.processInfo.activeProcessorCount) cores; throughput: start to the last reader's exit, best of \(rounds) interleaved runs")
        let scratch = ScratchDirectory(prefix: "framesrv-bench-bridge")
        let dump = scratch.path + "/pattern.yuv"
        try dumpPattern(frames: frames, to: dump)
        let keys = try ThrowawayBridgeKeys(directory: scratch.path)
        var best: [String: Double] = [:]
        var latency: [String: (Double, Double)] = [:]
        for _ in 0..<rounds {
            for (label, security) in [("insecure", ["--insecure"]), ("CURVE", keys.senderArguments)] {
                let run = try bridgeRun(frames: frames, sendSecurity: security, recvSecurity: label == "CURVE" ? keys.receiverArguments : ["--insecure"], rate: nil)
                best[label] = min(best[label] ?? .infinity, run.seconds)
            }
            best["ffmpeg"] = min(best["ffmpeg"] ?? .infinity, try ffmpegTCPRun(frames: frames, dump: dump))
        }
        let bytes = Double(frames * Self.recordFrameBytes)
        print("1. throughput (framesrv: produce --pattern --rate max -> bridge send --to tcp://127.0.0.1:P -> bridge recv --listen"
              + " -> sink --null, 4 processes, lossless, window 4; ffmpeg: -f rawvideo -i FILE -c copy -f rawvideo tcp://127.0.0.1:P?listen"
              + " -> ffmpeg -f rawvideo -i tcp://127.0.0.1:P -f null -)")
        for (label, key) in [("framesrv bridge --insecure", "insecure"), ("framesrv bridge CURVE", "CURVE"), ("ffmpeg tcp://", "ffmpeg")] {
            print("  \(label): \(frames) frames in \(formatDouble(best[key]!, 3)) s, \(formatDouble(Double(frames) / best[key]!, 1)) frames/s, "
                  + "\(formatDouble(bytes / best[key]! / 1e9, 2)) GB/s")
        }
        print("  ratio frames/s: bridge --insecure / ffmpeg \(formatDouble(best["ffmpeg"]! / best["insecure"]!, 2)), "
              + "CURVE / --insecure \(formatDouble(best["insecure"]! / best["CURVE"]!, 2))")
        for (label, security) in [("insecure", ["--insecure"]), ("CURVE", keys.senderArguments)] {
            let run = try bridgeRun(frames: min(frames, 150), sendSecurity: security,
                                    recvSecurity: label == "CURVE" ? keys.receiverArguments : ["--insecure"], rate: "30")
            latency[label] = (run.p50 ?? 0, run.p99 ?? 0)
        }
        print("2. added latency at 30 fps (A's publish to B's publish, one clock: loopback), \(min(frames, 150)) frames:")
        for (label, key) in [("--insecure", "insecure"), ("CURVE", "CURVE")] {
            print("  \(label): p50 \(formatDouble(latency[key]!.0 / 1000, 2)) ms, p99 \(formatDouble(latency[key]!.1 / 1000, 2)) ms")
        }
    }

    struct BridgeRun { var seconds: Double; var p50: Double?; var p99: Double? }

    /// produce -> bridge send -> bridge recv -> sink --null: seconds from the start to the
    /// sink's exit, and the receiver's same-host latency; throws unless every frame arrived.
    func bridgeRun(frames: Int, sendSecurity: [String], recvSecurity: [String], rate: String?) throws -> BridgeRun {
        let scratch = ScratchDirectory(prefix: "framesrv-bench")
        let env = ["FRAMESRV_DIR": scratch.path]
        let url = "tcp://127.0.0.1:\(BridgeEndpoint.freeLoopbackPort())"
        let start = monotonicNanos()
        let recv = try Child(["bridge", "recv", "--listen", url, "--out", "B", "--stats-json", "--quiet"] + recvSecurity,
                             label: "bridge recv", environment: env, captureErrors: true)
        let sink = try Child(["sink", "--in", "B", "--null", "--quiet", "--stats-json", "--wait", "60"], label: "sink", environment: env, captureErrors: true)
        let send = try Child(["bridge", "send", "--in", "A", "--to", url, "--quiet"] + sendSecurity, label: "bridge send", environment: env, captureErrors: true)
        let producer = try Child(["produce"] + Self.recordPattern + ["--rate", rate ?? "max", "--frames", String(frames), "--out", "A",
                                  "--wait-for", "1", "--quiet"], label: "produce", environment: env, captureErrors: true)
        let stages = [recv, sink, send, producer]
        try awaitStages(stages, until: sink, bench: "bridge")
        let seconds = Double(monotonicNanos() - start) / 1e9
        for s in [producer, send] { _ = s.finishWithErrors() }
        let (_, sinkOut, _) = sink.finishWithErrors()
        let (_, recvOut, recvErr) = recv.finishWithErrors()
        guard sinkOut.contains("\"received\":\(frames),") else {
            throw BenchError.incompleteRun(bench: "bridge", what: "B's sink did not get \(frames) frames", said: sinkOut + " " + recvErr)
        }
        func field(_ key: String) -> Double? {
            guard let r = recvOut.firstRange(of: "\"\(key)\":") else { return nil }
            return Double(recvOut[r.upperBound...].prefix { $0.isNumber || $0 == "." })
        }
        return BridgeRun(seconds: seconds, p50: field("same_host_latency_p50_us"), p99: field("same_host_latency_p99_us"))
    }

    /// ffmpeg sending the dump's frames raw over tcp:// (listening) to a second ffmpeg that
    /// reads them into -f null: seconds from the start to the reader's exit.
    func ffmpegTCPRun(frames: Int, dump: String) throws -> Double {
        let port = BridgeEndpoint.freeLoopbackPort()
        let raw = ["-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", "1920x1080", "-r", "30"]
        let start = monotonicNanos()
        let writer = try Child(["ffmpeg", "-hide_banner", "-nostdin", "-v", "error"] + raw + ["-i", dump, "-c", "copy", "-f", "rawvideo",
                                "tcp://127.0.0.1:\(port)?listen=1"], label: "ffmpeg (send)", executable: "/usr/bin/env", captureErrors: true)
        var reader: Child?
        // The reader dials once the writer listens (retried: ffmpeg's tcp:// has no wait option).
        for _ in 0..<200 {
            usleep(10_000)
            let r = try Child(["ffmpeg", "-hide_banner", "-nostdin", "-v", "error", "-nostats", "-progress", "pipe:1"] + raw
                              + ["-i", "tcp://127.0.0.1:\(port)", "-f", "null", "-"], label: "ffmpeg (receive)", executable: "/usr/bin/env", captureErrors: true)
            let (status, out, _) = r.finishWithErrors()
            if status == 0 { reader = r; _ = out; break }
        }
        let seconds = Double(monotonicNanos() - start) / 1e9
        let (wstatus, _, werr) = writer.finishWithErrors()
        guard reader != nil, wstatus == 0 else { throw BenchError.ffmpegFailed(bench: "bridge", doing: "over tcp://", status: wstatus, said: werr) }
        return seconds
    }
}
