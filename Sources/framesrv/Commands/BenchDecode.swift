import Foundation
import FrameServer

/// `framesrv bench decode`: `produce -i FILE` into the pool with one lossless consumer
/// process, next to `ffmpeg -i FILE -f null -` on the same file in the same run.
extension BenchCommand {
    struct DecodeRun { var frames: Int; var seconds: Double }

    static func decode(input: String?, threads: Int?) throws {
        let inputScratch = ScratchDirectory(prefix: "framesrv-bench-input")
        let file: String
        if let input {
            guard FileManager.default.isReadableFile(atPath: input) else {
                throw FrameServerError.invalidArgument("bench decode: cannot read '\(input)'")
            }
            file = input
        } else {
            file = inputScratch.path + "/testsrc2-1080p25-10s.mp4"
            print("bench decode: generating \(file) (1920x1080, 25 fps, 10 s, testsrc2, libx264 -preset veryfast)")
            let (status, err) = try runFFmpeg(["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=1920x1080:rate=25",
                                               "-t", "10", "-c:v", "libx264", "-preset", "veryfast", "-pix_fmt", "yuv420p", file])
            guard status == 0 else { throw FrameServerError.invalidArgument("bench decode: ffmpeg could not generate the clip: \(err)") }
        }
        let threadText = threads.map(String.init) ?? "0 (FFmpeg decides)"
        print("framesrv bench decode: \(file), \(threadText) decoder threads, \(ProcessInfo.processInfo.activeProcessorCount) cores;"
              + " each figure: start to exit, best of 2 runs")
        var framesrv: DecodeRun?, ffmpeg: DecodeRun?
        for _ in 0..<2 {
            let a = try framesrvRun(file: file, threads: threads)
            if framesrv.map({ a.seconds < $0.seconds }) ?? true { framesrv = a }
            let b = try ffmpegRun(file: file, threads: threads)
            if ffmpeg.map({ b.seconds < $0.seconds }) ?? true { ffmpeg = b }
        }
        guard let framesrv, let ffmpeg else { return }
        let fpsA = Double(framesrv.frames) / framesrv.seconds, fpsB = Double(ffmpeg.frames) / ffmpeg.seconds
        print("  framesrv produce -i FILE + 1 lossless null sink process: \(framesrv.frames) frames in "
              + "\(formatDouble(framesrv.seconds, 3)) s, \(formatDouble(fpsA, 1)) frames/s")
        print("  ffmpeg \(threads.map { "-threads \($0) " } ?? "")-i FILE -f null -: \(ffmpeg.frames) frames in "
              + "\(formatDouble(ffmpeg.seconds, 3)) s, \(formatDouble(fpsB, 1)) frames/s")
        print("  ratio framesrv/ffmpeg \(formatDouble(fpsA / max(fpsB, 1e-9), 2))")
    }

    /// `framesrv produce -i FILE --wait-for 1` and a lossless null sink, both child processes;
    /// the sink starts first, so the producer's wait is only the sink's attachment.
    static func framesrvRun(file: String, threads: Int?) throws -> DecodeRun {
        let scratch = ScratchDirectory(prefix: "framesrv-bench")
        let env = ["FRAMESRV_DIR": scratch.path]
        let sink = try Child(["sink", "--in", "bench", "--null", "--lossless", "--stats-json", "--quiet", "--wait", "60"],
                             label: "sink", environment: env)
        let start = monotonicNanos()
        let producer = try Child(["produce", "-i", file, "--out", "bench", "--wait-for", "1", "--quiet"]
                                 + (threads.map { ["--threads", String($0)] } ?? []),
                                 label: "producer", environment: env)
        let (pStatus, _) = producer.finish()
        let (sStatus, out) = sink.finish()
        let seconds = Double(monotonicNanos() - start) / 1e9
        guard pStatus == 0 else { throw FrameServerError.invalidArgument("bench decode: framesrv produce failed (status \(pStatus))") }
        guard sStatus == 0, let line = out.split(separator: "\n").last,
              let json = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
              let received = json["received"] as? Int, received > 0 else {
            throw FrameServerError.invalidArgument("bench decode: the sink failed (status \(sStatus)): \(out)")
        }
        return DecodeRun(frames: received, seconds: seconds)
    }

    /// `ffmpeg -threads T -i FILE -map 0:v:0 -f null -`, timed from start to exit; its frame
    /// count from `-progress`.
    static func ffmpegRun(file: String, threads: Int?) throws -> DecodeRun {
        let start = monotonicNanos()
        let (status, out) = try runFFmpeg(["-v", "error", "-nostats", "-progress", "pipe:1"]
                                          + (threads.map { ["-threads", String($0)] } ?? [])
                                          + ["-i", file, "-map", "0:v:0", "-f", "null", "-"])
        let seconds = Double(monotonicNanos() - start) / 1e9
        guard status == 0 else { throw FrameServerError.invalidArgument("bench decode: ffmpeg failed (status \(status)): \(out)") }
        let frames = out.split(separator: "\n").last { $0.hasPrefix("frame=") }
            .flatMap { Int($0.dropFirst("frame=".count).trimmingCharacters(in: .whitespaces)) } ?? 0
        guard frames > 0 else { throw FrameServerError.invalidArgument("bench decode: ffmpeg decoded no frames") }
        return DecodeRun(frames: frames, seconds: seconds)
    }

    /// Runs the ffmpeg CLI (from PATH) with `arguments`; its status and standard output,
    /// or its standard error when it fails.
    static func runFFmpeg(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-hide_banner", "-nostdin"] + arguments
        let out = Pipe(), err = Pipe()
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = out
        p.standardError = err
        do { try p.run() } catch {
            throw FrameServerError.invalidArgument("bench decode: cannot run ffmpeg: \(error)")
        }
        // Read both pipes to the end (stderr on another thread) so neither can fill and block ffmpeg.
        let errBox = ErrorText()
        let reader = Thread { errBox.text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self); errBox.done.signal() }
        reader.start()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        errBox.done.wait()
        return (p.terminationStatus, p.terminationStatus == 0 ? String(decoding: data, as: UTF8.self) : errBox.text)
    }

    final class ErrorText: @unchecked Sendable {
        var text = ""
        let done = DispatchSemaphore(value: 0)
    }
}
