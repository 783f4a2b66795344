import Foundation
import FrameMedia
import FrameProcess
import FrameServer

/// `framesrv bench record`: recording throughput (FFV1, raw) next to ffmpeg's FFV1 encoder on
/// the same frames, replay at --rate max, and seek latency, in the same run.
extension BenchCommand {
    /// Where a bench record run keeps its files: a folder under the temporary directory (the
    /// recordings are large: raw 1080p is 3 MB a frame), removed at the end.
    final class RecordFolder {
        let path: String
        init() {
            var template = Array((NSTemporaryDirectory() + "/framesrv-bench-record-XXXXXX").utf8CString)
            path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    static func record(frames: Int) throws {
        let scratch = ScratchDirectory(prefix: "framesrv-bench"), folder = RecordFolder()
        let env = ["FRAMESRV_DIR": scratch.path]
        let produce = ["produce", "--pattern", "--out", "cam", "--size", "1920x1080", "--frames", String(frames), "--rate", "max",
                       "--wait-for", "1", "--quiet"]
        print("framesrv bench record: \(frames) frames of the 1920x1080 yuv420p test pattern (--rate max), "
              + "\(ProcessInfo.processInfo.activeProcessorCount) cores; each figure: start to exit")
        var fps: [String: Double] = [:]
        for codec in ["ffv1", "raw"] {
            let file = folder.path + "/\(codec).nut"
            let seconds = try timed {
                let recorder = try Child(["record", "--in", "cam", "-o", file, "--codec", codec, "--quiet"], label: "record", environment: env)
                let producer = try Child(produce, label: "produce", environment: env)
                try expectSuccess(producer, "produce"); try expectSuccess(recorder, "record")
            }
            fps[codec] = Double(frames) / seconds
            print("  framesrv record --codec \(codec): \(formatDouble(fps[codec]!, 1)) frames/s, \(fileSize(file) / frames) bytes/frame")
        }
        let ffmpegFile = folder.path + "/ffmpeg.nut"
        let ffmpegSeconds = try timed {
            // The sink's parent is the shell, not this process: it must not take the parent-death check.
            let pipeline = "env -u \(parentEnvironmentKey) '\(selfExecutable)' sink --in cam --raw - --quiet --wait 30 | ffmpeg -v error -y -f rawvideo -pix_fmt yuv420p "
                + "-s 1920x1080 -r 30 -i - -c:v ffv1 -f nut '\(ffmpegFile)'"
            let ffmpeg = try Child(["sh", "-c", pipeline], label: "ffmpeg", executable: "/usr/bin/env", environment: env)
            let producer = try Child(produce, label: "produce", environment: env)
            try expectSuccess(producer, "produce"); try expectSuccess(ffmpeg, "sink --raw - | ffmpeg")
        }
        let ffmpegFPS = Double(frames) / ffmpegSeconds
        print("  framesrv sink --raw - | ffmpeg -f rawvideo -i - -c:v ffv1: \(formatDouble(ffmpegFPS, 1)) frames/s, "
              + "\(fileSize(ffmpegFile) / frames) bytes/frame; ratio record/ffmpeg (FFV1) \(formatDouble(fps["ffv1"]! / ffmpegFPS, 2))")
        for codec in ["ffv1", "raw"] {
            let seconds = try timed {
                let sink = try Child(["sink", "--in", "cam", "--null", "--quiet", "--wait", "30"], label: "sink", environment: env)
                let replay = try Child(["replay", folder.path + "/\(codec).nut", "--rate", "max", "--quiet"], label: "replay", environment: env)
                try expectSuccess(replay, "replay"); try expectSuccess(sink, "sink")
            }
            print("  framesrv replay --rate max (\(codec)) into sink --null: \(formatDouble(Double(frames) / seconds, 1)) frames/s")
        }
        try seekLatency(folder.path + "/ffv1.nut", frames: frames, env: env, directory: try RuntimeDirectory(path: scratch.path))
    }

    /// `ctl seek T` + `ctl step 1` on a paused replay, until a consumer in this process has the
    /// frame: the median of 5 seeks to different places.
    static func seekLatency(_ file: String, frames: Int, env: [String: String], directory: RuntimeDirectory) throws {
        let replay = try Child(["replay", file, "--paused", "--quiet"], label: "replay", environment: env)
        defer { replay.interrupt(); _ = replay.finish() }
        var options = ConsumerOptions(mode: .lossless)
        options.waitSeconds = 30
        let consumer = try Consumer(stream: "cam", options: options, directory: directory)
        try consumer.attach()
        var latencies: [Double] = []
        for i in 0..<5 {
            let target = Double(frames) / 30 * Double(4 - i) / 5   // back and forth through the file
            let start = monotonicNanos()
            _ = try ControlClient.send(.seek(.absolute(target)), to: "cam", directory: directory)
            _ = try ControlClient.send(.step(1), to: "cam", directory: directory)
            guard let frame = try consumer.next() else { break }
            frame.release()
            latencies.append(Double(monotonicNanos() - start) / 1e6)
        }
        let median = latencies.sorted()[latencies.count / 2]
        print("  seek latency (ctl seek T + step 1 until the frame is in a consumer, FFV1 1080p): median \(formatDouble(median, 1)) ms of \(latencies.count)")
    }

    static func timed(_ body: () throws -> Void) throws -> Double {
        let start = monotonicNanos()
        try body()
        return Double(monotonicNanos() - start) / 1e9
    }

    static func expectSuccess(_ child: Child, _ what: String) throws {
        let (status, out) = child.finish()
        guard status == 0 else { throw FrameServerError.invalidArgument("bench record: \(what) failed (status \(status)): \(out)") }
    }

    static func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }
}
