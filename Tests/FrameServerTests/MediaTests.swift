import Foundation
import FrameServer
import Glibc
import Testing

/// `framesrv produce -i INPUT`: decoded media through real processes, with FFmpeg's own
/// `-f framemd5` output as the oracle for every frame's pixels, size and timestamps.
@Suite(.serialized) struct MediaTests {
    /// An input the test generates with the ffmpeg CLI (testsrc2, then `ffmpegArgs`).
    struct Input: CustomTestStringConvertible, Sendable {
        let file: String
        let rate: String
        let frames: Int
        let ffmpegArgs: [String]
        var testDescription: String { file }
    }

    static let inputs: [Input] = [
        Input(file: "h264.mp4", rate: "25", frames: 30, ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p"]),
        Input(file: "ntsc-bframes-sar.mp4", rate: "30000/1001", frames: 12,
              ffmpegArgs: ["-vf", "setsar=4/3", "-c:v", "libx264", "-bf", "2", "-pix_fmt", "yuv420p"]),
        Input(file: "h264.ts", rate: "25", frames: 15, ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p"]),
        Input(file: "ffv1-yuv444p.mkv", rate: "25", frames: 10, ffmpegArgs: ["-c:v", "ffv1", "-pix_fmt", "yuv444p"]),
        Input(file: "ffv1-gray.mkv", rate: "25", frames: 10, ffmpegArgs: ["-c:v", "ffv1", "-pix_fmt", "gray"]),
        Input(file: "ffv1-odd-321x241.mkv", rate: "25", frames: 8,
              ffmpegArgs: ["-vf", "scale=321:241", "-c:v", "ffv1", "-pix_fmt", "yuv420p"]),
        Input(file: "ffv1-yuv420p10le.mkv", rate: "25", frames: 8, ffmpegArgs: ["-c:v", "ffv1", "-pix_fmt", "yuv420p10le"]),
        Input(file: "mjpeg.avi", rate: "25", frames: 10, ffmpegArgs: ["-c:v", "mjpeg"]),   // yuvj420p
        Input(file: "raw-30fps.y4m", rate: "30", frames: 10, ffmpegArgs: ["-pix_fmt", "yuv420p"]),
        Input(file: "ffv1-12.5fps.mkv", rate: "25/2", frames: 8, ffmpegArgs: ["-c:v", "ffv1", "-pix_fmt", "yuv420p"]),
        Input(file: "hevc.mkv", rate: "25", frames: 20, ffmpegArgs: ["-c:v", "libx265", "-pix_fmt", "yuv420p"]),
        Input(file: "vp9.webm", rate: "25", frames: 20, ffmpegArgs: ["-c:v", "libvpx-vp9", "-pix_fmt", "yuv420p"]),
        Input(file: "mpeg4.avi", rate: "25", frames: 15, ffmpegArgs: ["-c:v", "mpeg4"]),
        Input(file: "mpeg4-bframes.mp4", rate: "25", frames: 15, ffmpegArgs: ["-c:v", "mpeg4", "-bf", "2"]),
        // Variable frame rate: a half-second gap after frame 10, and irregular steps.
        Input(file: "vfr-gap.mkv", rate: "25", frames: 20,
              ffmpegArgs: ["-vf", "setpts=PTS+if(gte(N\\,10)\\,0.5/TB\\,0)", "-c:v", "ffv1", "-pix_fmt", "yuv420p"]),
        Input(file: "vfr-irregular.mp4", rate: "25", frames: 20,
              ffmpegArgs: ["-vf", "setpts=(N+floor(N/3)*0.37)/25/TB", "-fps_mode", "vfr", "-c:v", "libx264", "-pix_fmt", "yuv420p"]),
    ].filter { input in
        // An encoder this ffmpeg lacks (libx265, libvpx-vp9 are optional in FFmpeg builds) leaves its input out.
        guard let i = input.ffmpegArgs.firstIndex(of: "-c:v") else { return true }
        return ffmpegEncoders.contains(input.ffmpegArgs[i + 1])
    }

    /// The encoders `ffmpeg -encoders` lists.
    static let ffmpegEncoders: Set<String> = {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["ffmpeg", "-hide_banner", "-encoders"]
        let out = Pipe()
        p.standardOutput = out
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return [] }
        let data = out.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return Set(String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            return fields.count >= 2 && fields[0].count == 6 ? String(fields[1]) : nil
        })
    }()

    /// Two H.264 clips, 12 frames of size `first` then 10 of size `second`, joined into one
    /// MPEG-TS file with cat (the second's timestamps following the first's).
    func sizeChangeClip(_ first: String, _ second: String, _ scratch: Scratch) throws -> (part1: String, part2: String, joined: String) {
        let part1 = scratch.file("part1.ts"), part2 = scratch.file("part2.ts"), joined = scratch.file("joined.ts")
        for (path, size, frames, offset) in [(part1, first, 12, "0"), (part2, second, 10, "0.6")] {
            let (status, _, err) = try shell("ffmpeg -v error -y -f lavfi -i testsrc2=size=\(size):rate=25 -frames:v \(frames)"
                                             + " -c:v libx264 -pix_fmt yuv420p -output_ts_offset \(offset) '\(path)'", scratch)
            guard status == 0 else { throw TestFailure("ffmpeg could not generate \(path): \(err)") }
        }
        let (status, _, err) = try shell("cat '\(part1)' '\(part2)' > '\(joined)'", scratch)
        guard status == 0 else { throw TestFailure("cat failed: \(err)") }
        return (part1, part2, joined)
    }

    /// Each frame line's size and hash (framemd5's last two fields).
    func sizeAndHash(_ framemd5: String) -> [[String]] {
        frameLines(framemd5).map { $0.split(separator: ",").suffix(2).map { $0.trimmingCharacters(in: .whitespaces) } }
    }

    func generate(_ input: Input, _ scratch: Scratch) throws -> String {
        let path = scratch.file(input.file)
        let args = (["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=\(input.rate)",
                     "-frames:v", String(input.frames)] + input.ffmpegArgs + [path]).map { "'\($0)'" }
        let (status, _, err) = try shell("ffmpeg " + args.joined(separator: " "), scratch)
        guard status == 0 else { throw TestFailure("ffmpeg could not generate \(input.file): \(err)") }
        return path
    }

    /// What FFmpeg itself writes for the input's first video stream.
    func oracle(_ path: String, _ scratch: Scratch) throws -> String {
        let (status, out, err) = try shell("ffmpeg -v error -i '\(path)' -map 0:v:0 -f framemd5 -", scratch)
        guard status == 0 else { throw TestFailure("ffmpeg -f framemd5 failed on \(path): \(err)") }
        return String(decoding: out, as: UTF8.self)
    }

    /// Producer and sink as separate processes; returns the sink's framemd5 and the producer.
    func pipeline(_ produceArgs: [String], stream: String, _ scratch: Scratch) throws -> (md5: String, producer: Proc, sink: Proc) {
        let producer = try scratch.start(["produce"] + produceArgs + ["--out", stream, "--wait-for", "1"])
        let sink = try scratch.start(["sink", "--in", stream, "--framemd5", "-"])
        #expect(sink.wait(timeout: 60) == 0, "sink: \(sink.stderr)")
        #expect(producer.wait(timeout: 60) == 0, "producer: \(producer.stderr)")
        return (sink.stdout, producer, sink)
    }

    @Test(arguments: inputs) func framemd5MatchesFFmpeg(_ input: Input) throws {
        let scratch = try Scratch()
        let path = try generate(input, scratch)
        let expected = try oracle(path, scratch)
        #expect(expected.split(separator: "\n").filter { !$0.hasPrefix("#") }.count == input.frames)
        let (md5, producer, _) = try pipeline(["-i", path, "--threads", "2"], stream: "media", scratch)
        #expect(md5 == expected, "framesrv's framemd5 of \(input.file) differs from ffmpeg's")
        #expect(producer.stdout.contains("published \(input.frames) frames"), "\(producer.stdout)")
        #expect(producer.stdout.contains("decode errors 0"), "\(producer.stdout)")
        // Every frame took one of the two paths; decoders that take user buffers (all but
        // rawvideo, whose frames point into the demuxer's packets) decoded into slots.
        let counts = try #require(pathCounts(producer.stdout), "\(producer.stdout)")
        #expect(counts.zeroCopy + counts.copied == input.frames, "\(producer.stdout)")
        if !input.file.hasPrefix("raw") { #expect(counts.zeroCopy > 0, "\(producer.stdout)") }
    }

    /// "N zero-copy, M copied" from a producer's summary line.
    func pathCounts(_ summary: String) -> (zeroCopy: Int, copied: Int)? {
        guard let r = summary.range(of: #"(\d+) zero-copy, (\d+) copied"#, options: .regularExpression) else { return nil }
        let numbers = summary[r].split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
        return numbers.count == 2 ? (numbers[0], numbers[1]) : nil
    }

    /// `-i -`: a y4m stream from a pipe on standard input, frame for frame what ffmpeg decodes.
    @Test func standardInputFromAPipe() throws {
        let scratch = try Scratch()
        let path = try generate(Input(file: "src.mkv", rate: "25", frames: 12, ffmpegArgs: ["-c:v", "ffv1", "-pix_fmt", "yuv422p"]), scratch)
        let expected = try oracle(path, scratch)
        let sink = try scratch.start(["sink", "--in", "piped", "--framemd5", "-"])
        let (status, out, err) = try shell(
            "ffmpeg -v error -i '\(path)' -f yuv4mpegpipe - | '\(framesrvPath)' produce -i - -f yuv4mpegpipe --out piped --wait-for 1",
            scratch)
        #expect(status == 0, "\(err)")
        #expect(String(decoding: out, as: UTF8.self).contains("published 12 frames of 320x240 yuv422p"))
        #expect(sink.wait(timeout: 60) == 0, "\(sink.stderr)")
        #expect(sink.stdout == expected)
    }

    /// What cannot be decoded at all is one error line and exit status 1, and no stream.
    @Test func undecodableInputsAreOneErrorLine() throws {
        let scratch = try Scratch()
        let missing = try scratch.run(["produce", "-i", scratch.file("missing.mp4"), "--out", "m"])
        #expect(missing.status == 1)
        #expect(missing.stderr == "framesrv: error: cannot open '\(scratch.file("missing.mp4"))': No such file or directory\n")

        let wav = scratch.file("tone.wav")
        let (g, _, gerr) = try shell("ffmpeg -v error -y -f lavfi -i sine=duration=0.5 '\(wav)'", scratch)
        #expect(g == 0, "\(gerr)")
        let audio = try scratch.run(["produce", "-i", wav, "--out", "a"])
        #expect(audio.status == 1)
        #expect(audio.stderr == "framesrv: error: '\(wav)' has no video stream\n")

        let badFormat = try scratch.run(["produce", "-i", wav, "-f", "no-such-format", "--out", "b"])
        #expect(badFormat.status == 1)
        #expect(badFormat.stderr == "framesrv: error: FFmpeg knows no input format 'no-such-format'\n")
        #expect(scratch.snapshot("m") == nil && scratch.snapshot("a") == nil && scratch.snapshot("b") == nil)
    }

    /// A truncated H.264 stream: the producer publishes every frame the decoder gives
    /// (identical to ffmpeg's), reports the decode errors, and ends the stream normally.
    @Test func truncatedInputPublishesWhatDecodes() throws {
        let scratch = try Scratch()
        let full = try generate(Input(file: "full.h264", rate: "25", frames: 20, ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p"]), scratch)
        let data = try Data(contentsOf: URL(fileURLWithPath: full))
        let truncated = scratch.file("truncated.h264")
        try data.prefix(data.count * 6 / 10).write(to: URL(fileURLWithPath: truncated))
        let expected = try oracle(truncated, scratch)
        let frames = expected.split(separator: "\n").filter { !$0.hasPrefix("#") }.count
        #expect(frames > 0 && frames < 20)
        // One decoder thread: with frame threads, libavcodec's H.264 decoder flags the
        // concealed last frame only sometimes (the pixels are the same either way).
        let (md5, producer, _) = try pipeline(["-i", truncated, "--threads", "1"], stream: "cut", scratch)
        #expect(md5 == expected)
        #expect(producer.stdout.contains("published \(frames) frames"), "\(producer.stdout)")
        #expect(!producer.stdout.contains("decode errors 0"), "\(producer.stdout)")
        #expect(producer.stderr.contains("decode error"), "\(producer.stderr)")
    }

    /// `--frames N` stops after N decoded frames and ends the stream.
    @Test func framesLimitEndsTheStream() throws {
        let scratch = try Scratch()
        let path = try generate(Input(file: "ten.y4m", rate: "25", frames: 10, ffmpegArgs: []), scratch)
        let expected = try oracle(path, scratch).split(separator: "\n", omittingEmptySubsequences: false)
        let (md5, producer, _) = try pipeline(["-i", path, "--frames", "4", "--slots", "2"], stream: "four", scratch)
        let header = expected.prefix { $0.hasPrefix("#") }
        let firstFour = expected.dropFirst(header.count).prefix(4)
        #expect(md5 == (header + firstFour).joined(separator: "\n") + "\n")
        #expect(producer.stdout.contains("published 4 frames"))
    }
}
