import FoundationEssentials
import FrameProcess
import FrameServer
import Glibc

/// `framesrv bench gpu`'s section 3: NVDEC into CUDA slots against ffmpeg decoding with NVDEC,
/// for one consumer and for four. framesrv: `produce -i FILE --hwaccel cuda --wait-for N` with
/// N lossless Python CUDA consumers (each takes both planes with torch.from_dlpack and releases
/// on its stream); ffmpeg: N processes of `ffmpeg -hwaccel cuda -hwaccel_output_format cuda -i
/// FILE -f null -` at once. Each figure: frames delivered (to every consumer, or by every ffmpeg)
/// over the time from the producer's (the ffmpegs') start to the last exit, best of 3 runs,
/// interleaved. The consumers are started and have imported torch before the clock starts.
extension Bench {
    func gpuDecode(_ runner: GpuRunner, input: String?) throws {
        if let why = Self.ffmpegCUDAAbsent(self) {
            print("3. NVDEC against ffmpeg: skipped: \(why)")
            return
        }
        let inputScratch = ScratchDirectory(prefix: "framesrv-bench-input")
        let file = try benchInput(input, seconds: 60, in: inputScratch, bench: "gpu")
        print("3. NVDEC: \(file) decoded on the GPU; frames delivered per second (every consumer's frames, or every ffmpeg's), "
              + "from the producer's (the ffmpegs') start to the last exit; best of 3 runs, interleaved")
        var alone: DecodeRun?
        for _ in 0..<3 { alone = DecodeRun.best(alone, try nvdecFramesrv(runner, file: file, consumers: 0)) }
        if let alone, let loop = alone.loopSeconds {
            print("  framesrv produce --hwaccel cuda alone (--no-wait, no consumer): \(alone.frames) frames, start to exit "
                  + "\(formatDouble(alone.seconds, 3)) s, its decode loop \(formatDouble(loop, 3)) s: start-up and exit "
                  + "\(formatDouble(alone.seconds - loop, 3)) s")
        }
        for n in [1, 4] {
            var framesrv: DecodeRun?, ffmpeg: DecodeRun?
            for _ in 0..<3 {
                framesrv = DecodeRun.best(framesrv, try nvdecFramesrv(runner, file: file, consumers: n))
                ffmpeg = DecodeRun.best(ffmpeg, try nvdecFFmpeg(file: file, processes: n))
            }
            if let framesrv, let ffmpeg { printNvdec(consumers: n, framesrv, ffmpeg) }
        }
    }

    /// Section 3's lines for `n` consumers: each side's run, where the time went, the ratio.
    private func printNvdec(consumers n: Int, _ framesrv: DecodeRun, _ ffmpeg: DecodeRun) {
        let fps = { (r: DecodeRun) in Double(r.frames) / r.seconds }
        let who = n == 1 ? "1 CUDA consumer" : "\(n) CUDA consumers of the one stream"
        print("  framesrv produce --hwaccel cuda + \(who): \(framesrv.frames) frames in \(formatDouble(framesrv.seconds, 3)) s, "
              + "\(formatDouble(fps(framesrv), 0)) frames/s (\(framesrv.path))")
        let deliveredFps = framesrv.deliveredSeconds.map { Double(framesrv.frames) / $0 }
        if let delivered = framesrv.deliveredSeconds, let deliveredFps {
            print("    to the last consumer's end of stream: \(formatDouble(delivered, 3)) s "
                  + "(\(formatDouble(deliveredFps, 0)) frames/s); the consumers' exits (torch's teardown) after it: "
                  + "\(formatDouble(framesrv.seconds - delivered, 3)) s")
        }
        print("  \(n) x ffmpeg -hwaccel cuda -hwaccel_output_format cuda -i FILE -f null -: \(ffmpeg.frames) frames in "
              + "\(formatDouble(ffmpeg.seconds, 3)) s, \(formatDouble(fps(ffmpeg), 0)) frames/s")
        let loop = { (r: DecodeRun) in r.loopSeconds.map { formatDouble($0, 3) + " s" } ?? "not said" }
        print("  of those runs, the decode loops alone: framesrv produce's \(loop(framesrv)) (its summary line), "
              + "ffmpeg's \(loop(ffmpeg)) (-benchmark rtime\(n == 1 ? "" : ", the slowest")); the rest is start-up and exit")
        let delivered = deliveredFps.map { "; frames delivered by the last consumer's end of stream against "
            + "ffmpeg's start to exit: " + formatDouble($0 / max(fps(ffmpeg), 1e-9), 2) } ?? ""
        print("  ratio framesrv/ffmpeg (\(n == 1 ? "goal: at least 0.95" : "one decode shared against \(n) decodes")), start to the last exit: "
              + formatDouble(fps(framesrv) / max(fps(ffmpeg), 1e-9), 2) + delivered)
    }

    /// Why ffmpeg cannot be the NVDEC peer here (not on PATH, or without the cuda hwaccel), nil when it can.
    static func ffmpegCUDAAbsent(_ bench: Bench) -> String? {
        guard let (status, out) = try? bench.runFFmpeg(["-hwaccels"]) else { return "no ffmpeg on PATH" }
        if status == 127 { return "no ffmpeg on PATH (scripts/gpu-unpack puts the carried one there)" }
        guard status == 0, out.split(separator: "\n").contains(where: { $0.trimmed == "cuda" }) else {
            return "this ffmpeg lists no cuda hwaccel (ffmpeg -hwaccels)"
        }
        return nil
    }

    /// `consumers` count-consume processes, each ready (torch imported, its stream made), then
    /// `framesrv produce -i FILE --hwaccel cuda --wait-for N`, timed from its start to the last exit
    /// (and to the last consumer's end of stream). No consumer: the producer alone, --no-wait,
    /// its frames those it published.
    func nvdecFramesrv(_ runner: GpuRunner, file: String, consumers n: Int) throws -> DecodeRun {
        let run = ScratchDirectory(prefix: "framesrv-bench-gpu")
        return try withExtendedLifetime(run) {
            let ready = (0..<n).map { run.path + "/ready-\($0)" }
            let children = try ready.enumerated().map { i, path in
                try runner.start(["count-consume", "nvdec", path], label: "CUDA consumer \(i + 1)", directory: run.path)
            }
            defer { for c in children { c.kill() } }
            let deadline = monotonicNanos() + 300_000_000_000
            while !ready.allSatisfy({ FileManager.default.fileExists(atPath: $0) }) {
                if let dead = children.first(where: { !$0.isRunning }) ?? (monotonicNanos() > deadline ? children.first : nil) {
                    let (status, out, err, _) = finish(dead, within: 0)
                    throw BenchError.stageFailed(bench: "gpu", stage: dead.label, status: status, said: GpuRunner.tail(out + err))
                }
                usleep(10_000)
            }
            let start = monotonicNanos()
            let producer = try Child(["produce", "-i", file, "--out", "nvdec", "--hwaccel", "cuda"] + (n == 0 ? ["--no-wait"] : ["--wait-for", String(n)]),
                                     label: "framesrv produce --hwaccel cuda", environment: ["FRAMESRV_DIR": run.path], captureErrors: true)
            let (pStatus, pOut, pErr, pKilled) = finish(producer, within: runner.seconds + 600)
            guard pStatus == 0, !pKilled else {
                throw BenchError.stageFailed(bench: "gpu", stage: producer.label, status: pStatus, said: GpuRunner.tail(pOut + pErr))
            }
            let counters = try children.map { child in
                guard let counter = try runner.lines(of: child).first(where: { $0.role == "counter" }), counter.frames != nil else {
                    throw BenchError.incompleteRun(bench: "gpu", what: "\(child.label) printed no count", said: "")
                }
                return counter
            }
            let seconds = Double(monotonicNanos() - start) / 1e9
            // The producer's summary: "produce: nvdec: published N frames of ... (h264, N copied on the device (NVDEC),
            // M uploaded from host memory) in X s (N fps) ...", X its own loop, from its first decode to its last publish.
            let words = pOut.split(separator: "\n").last { $0.hasPrefix("produce: ") }?.split(separator: " ") ?? []
            let before = { (word: String) in words.firstIndex { $0 == word }.map { String(words[$0 - 1]) } ?? "?" }
            let published = words.firstIndex { $0 == "published" }.flatMap { $0 + 1 < words.count ? Int(words[$0 + 1]) : nil }
            let path = "\(before("copied")) copied on the device, \(before("uploaded")) uploaded"
            let frames = n == 0 ? published ?? 0 : counters.compactMap(\.frames).reduce(0, +)
            let ended = counters.compactMap(\.endedNanos).max().map { Double(UInt64($0) &- start) / 1e9 }
            return DecodeRun(frames: frames, seconds: seconds, path: path, loopSeconds: Double(before("s")), deliveredSeconds: ended)
        }
    }

    /// `processes` ffmpegs decoding `file` with NVDEC at once (frames left on the GPU, -f null),
    /// timed from their start to the last exit; frames counted by each one's -progress.
    func nvdecFFmpeg(file: String, processes n: Int) throws -> DecodeRun {
        let start = monotonicNanos()
        let children = try (0..<n).map { i in
            try Child(["ffmpeg", "-hide_banner", "-nostdin", "-v", "info", "-nostats", "-benchmark", "-progress", "pipe:1", "-hwaccel", "cuda",
                       "-hwaccel_output_format", "cuda", "-i", file, "-map", "0:v:0", "-f", "null", "-"],
                      label: "ffmpeg \(i + 1)", executable: "/usr/bin/env", captureErrors: true)
        }
        var frames = 0, loops: [Double] = []
        for child in children {
            let (status, out, err) = child.finishWithErrors()
            guard status == 0 else { throw BenchError.ffmpegFailed(bench: "gpu", doing: "decoding with NVDEC", status: status, said: err) }
            frames += Self.progressFrames(out) ?? 0
            loops += Self.benchmarkRealSeconds(err).map { [$0] } ?? []
        }
        let seconds = Double(monotonicNanos() - start) / 1e9
        guard frames > 0 else { throw BenchError.incompleteRun(bench: "gpu", what: "ffmpeg decoded no frames with NVDEC", said: "") }
        return DecodeRun(frames: frames, seconds: seconds, loopSeconds: loops.max())
    }

    /// The rtime of ffmpeg's `-benchmark` line ("bench: utime=0.004s stime=0.000s rtime=1.234s"; a
    /// "bench: maxrss=..." line follows it): its transcode loop, decoder opening included, without
    /// the process's start, probing and exit.
    static func benchmarkRealSeconds(_ err: String) -> Double? {
        guard let line = err.split(separator: "\n").last(where: { $0.hasPrefix("bench: ") && $0.contains(" rtime=") }),
              let field = line.split(separator: " ").first(where: { $0.hasPrefix("rtime=") }) else { return nil }
        return Double(field.dropFirst("rtime=".count).dropLast())
    }
}
