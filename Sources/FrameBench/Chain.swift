import FoundationEssentials
import FrameProcess
import FrameServer
import Glibc

/// `framesrv bench chain`: decode -> gblur -> rgb24 -> framemd5 as four processes, next to
/// the same work done by one ffmpeg command, in the same run on the same file.
extension Bench {
    static let chainGraph = ["gblur=sigma=4", "format=rgb24"]

    func chain(input: String?, threads: Int?) throws {
        let inputScratch = ScratchDirectory(prefix: "framesrv-bench-input")
        let file = try benchInput(input, seconds: 4, in: inputScratch, bench: "chain")
        let t = threads ?? 1
        print("framesrv bench chain: \(file), \(t) thread\(t == 1 ? "" : "s") per stage (decoder and filter graph), "
              + "\(ProcessInfo.processInfo.activeProcessorCount) cores; each figure: start to exit, best of 2 runs")
        print("  chain:  produce -i FILE | filter --vf \(Self.chainGraph[0]) | filter --vf \(Self.chainGraph[1]) | sink --framemd5 (4 processes)")
        print("  ffmpeg: ffmpeg -threads \(t) -filter_threads \(t) -i FILE -vf \(Self.chainGraph.joined(separator: ",")) -f framemd5")
        let scratch = ScratchDirectory(prefix: "framesrv-bench-chain")
        var chainBest = Double.infinity, ffmpegBest = Double.infinity
        var identical = true
        for run in 0..<2 {
            let chainMD5 = scratch.path + "/chain-\(run).md5", ffmpegMD5 = scratch.path + "/ffmpeg-\(run).md5"
            chainBest = min(chainBest, try chainRun(file: file, threads: t, md5: chainMD5))
            ffmpegBest = min(ffmpegBest, try ffmpegChainRun(file: file, threads: t, md5: ffmpegMD5))
            identical = identical && FileManager.default.contentsEqual(atPath: chainMD5, andPath: ffmpegMD5)
        }
        let frames = (try? String(contentsOfFile: scratch.path + "/chain-0.md5", encoding: .utf8))?
            .split(separator: "\n").filter { !$0.hasPrefix("#") }.count ?? 0
        print("  chain of processes: \(frames) frames in \(formatDouble(chainBest, 3)) s (\(formatDouble(Double(frames) / chainBest, 1)) frames/s)")
        print("  single ffmpeg:      \(frames) frames in \(formatDouble(ffmpegBest, 3)) s (\(formatDouble(Double(frames) / ffmpegBest, 1)) frames/s)")
        print("  ratio chain/ffmpeg wall time \(formatDouble(chainBest / ffmpegBest, 2)) (below 1.0: the chain is faster)")
        print("  framemd5 of the chain \(identical ? "identical to" : "DIFFERS from") ffmpeg's")
        if !identical { throw BenchError.framesDiffer(bench: "chain") }
    }

    /// The four processes in a private runtime directory, downstream first, each producer
    /// waiting for its consumer; timed from the first start to the last exit.
    func chainRun(file: String, threads: Int, md5: String) throws -> Double {
        let scratch = ScratchDirectory(prefix: "framesrv-bench")
        let env = ["FRAMESRV_DIR": scratch.path]
        let start = monotonicNanos()
        let stages = [
            try Child(["sink", "--in", "c", "--framemd5", md5, "--quiet"], label: "sink", environment: env, captureErrors: true),
            try Child(["filter", "--in", "b", "--out", "c", "--vf", Self.chainGraph[1], "--threads", String(threads), "--wait-for", "1", "--quiet"],
                      label: "filter \(Self.chainGraph[1])", environment: env, captureErrors: true),
            try Child(["filter", "--in", "a", "--out", "b", "--vf", Self.chainGraph[0], "--threads", String(threads), "--wait-for", "1", "--quiet"],
                      label: "filter \(Self.chainGraph[0])", environment: env, captureErrors: true),
            try Child(["produce", "-i", file, "--out", "a", "--threads", String(threads), "--wait-for", "1", "--quiet"],
                      label: "produce", environment: env, captureErrors: true),
        ]
        // A stage that fails stops the others: the stages before it would wait for it forever.
        if let failed = stages.waitForAllOrFirstFailure() {
            let (status, _, err) = failed.finishWithErrors()
            throw BenchError.stageFailed(bench: "chain", stage: failed.label, status: status, said: err)
        }
        for stage in stages { _ = stage.finishWithErrors() }
        return Double(monotonicNanos() - start) / 1e9
    }

    func ffmpegChainRun(file: String, threads: Int, md5: String) throws -> Double {
        let start = monotonicNanos()
        let (status, err) = try runFFmpeg(["-v", "error", "-threads", String(threads), "-filter_threads", String(threads),
                                           "-i", file, "-map", "0:v:0", "-vf", Self.chainGraph.joined(separator: ","),
                                           "-f", "framemd5", "-y", md5])
        guard status == 0 else { throw BenchError.ffmpegFailed(bench: "chain", doing: "the same chain", status: status, said: err) }
        return Double(monotonicNanos() - start) / 1e9
    }
}
