import Foundation
import FrameServer
import Glibc
import Testing

/// `framesrv produce -i INPUT`: decoded media through real processes, with FFmpeg's own
/// `-f framemd5` output as the oracle for every frame's pixels, size and timestamps.
@Suite(.serialized) struct MediaTests {
    typealias Input = MediaInput

    /// With `exactRateInputs`: rates that do not fit 1/1000 fps, whose `#tb` line must be ffmpeg's.
    static let inputs: [Input] = ([
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
    ] + exactRateInputs).filter { input in
        // An encoder this ffmpeg lacks (libx265, libvpx-vp9 are optional in FFmpeg builds) leaves its input out.
        guard let i = input.ffmpegArgs.firstIndex(of: "-c:v") else { return true }
        return ffmpegEncoders.contains(input.ffmpegArgs[i + 1])
    }

    @Test(arguments: inputs) func framemd5MatchesFFmpeg(_ input: Input) throws {
        let scratch = try Scratch()
        let path = try generateClip(input, scratch)
        let expected = try ffmpegFramemd5(path, scratch)
        #expect(expected.split(separator: "\n").filter { !$0.hasPrefix("#") }.count == input.frames)
        let (md5, producer, _) = try framemd5Pipeline(["-i", path, "--threads", "2"], stream: "media", scratch)
        #expect(md5 == expected, "framesrv's framemd5 of \(input.file) differs from ffmpeg's")
        #expect(producer.stdout.contains("published \(input.frames) frames"), "\(producer.stdout)")
        #expect(producer.stdout.contains("decode errors 0"), "\(producer.stdout)")
        // Every frame took one of the two paths; decoders that take user buffers (all but
        // rawvideo, whose frames point into the demuxer's packets) decoded into slots.
        let counts = try #require(pathCounts(producer.stdout), "\(producer.stdout)")
        #expect(counts.zeroCopy + counts.copied == input.frames, "\(producer.stdout)")
        if !input.file.hasPrefix("raw") { #expect(counts.zeroCopy > 0, "\(producer.stdout)") }
    }

    /// `-i -`: a y4m stream from a pipe on standard input, frame for frame what ffmpeg decodes.
    @Test func standardInputFromAPipe() throws {
        let scratch = try Scratch()
        let path = try generateClip(Input(file: "src.mkv", rate: "25", frames: 12, ffmpegArgs: ["-c:v", "ffv1", "-pix_fmt", "yuv422p"]), scratch)
        let expected = try ffmpegFramemd5(path, scratch)
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
        // Sound only is an audio stream (AudioTests); without its audio (-an) nothing is left.
        let audio = try scratch.run(["produce", "-i", wav, "-an", "--out", "a"])
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
        let full = try generateClip(Input(file: "full.h264", rate: "25", frames: 20, ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p"]), scratch)
        let data = try Data(contentsOf: URL(fileURLWithPath: full))
        let truncated = scratch.file("truncated.h264")
        try data.prefix(data.count * 6 / 10).write(to: URL(fileURLWithPath: truncated))
        let expected = try ffmpegFramemd5(truncated, scratch)
        let frames = expected.split(separator: "\n").filter { !$0.hasPrefix("#") }.count
        #expect(frames > 0 && frames < 20)
        // One decoder thread: with frame threads, libavcodec's H.264 decoder flags the
        // concealed last frame only sometimes (the pixels are the same either way).
        let (md5, producer, _) = try framemd5Pipeline(["-i", truncated, "--threads", "1"], stream: "cut", scratch)
        #expect(md5 == expected)
        #expect(producer.stdout.contains("published \(frames) frames"), "\(producer.stdout)")
        #expect(!producer.stdout.contains("decode errors 0"), "\(producer.stdout)")
        #expect(producer.stderr.contains("decode error"), "\(producer.stderr)")
    }

    /// A packet the demuxer skips (16 MB of side data in a NUT file: libavformat 5.1 finds the
    /// frame too large and resyncs past it) does not vanish without a word: the producer
    /// publishes the 59 frames that decode, as ffmpeg does, counts the skip, and says it in
    /// one line (issue 26 item 9).
    @Test func aPacketTheDemuxerSkipsIsCountedAndSaid() throws {
        let scratch = try Scratch()
        let clip = try generateClip(Input(file: "clip.nut", rate: "30", frames: 60, ffmpegArgs: ["-c:v", "ffv1", "-g", "1", "-pix_fmt", "yuv420p"]), scratch)
        let damaged = try nutWithLargeSideData(clip, packet: 30, bytes: 16 << 20, scratch)   // every frame a keyframe: the rest decode alike
        let expected = try ffmpegFramemd5(damaged, scratch)
        #expect(frameLines(expected).count == 59, "ffmpeg decodes 59 of the 60 frames")
        let (md5, producer, _) = try framemd5Pipeline(["-i", damaged], stream: "side", scratch)
        #expect(md5 == expected)
        #expect(producer.stdout.contains("published 59 frames") && producer.stdout.contains("skipped 1 damaged packet"), "\(producer.stdout)")
        let lines = producer.stderr.split(separator: "\n").filter { $0.contains("skipped") }
        #expect(lines.count == 1 && lines[0].contains("frame size"), "one line with the demuxer's words: \(producer.stderr)")
    }

    /// `--frames N` stops after N decoded frames and ends the stream.
    @Test func framesLimitEndsTheStream() throws {
        let scratch = try Scratch()
        let path = try generateClip(Input(file: "ten.y4m", rate: "25", frames: 10, ffmpegArgs: []), scratch)
        let expected = try ffmpegFramemd5(path, scratch).split(separator: "\n", omittingEmptySubsequences: false)
        let (md5, producer, _) = try framemd5Pipeline(["-i", path, "--frames", "4", "--slots", "2"], stream: "four", scratch)
        let header = expected.prefix { $0.hasPrefix("#") }
        let firstFour = expected.dropFirst(header.count).prefix(4)
        #expect(md5 == (header + firstFour).joined(separator: "\n") + "\n")
        #expect(producer.stdout.contains("published 4 frames"))
    }

    /// A movie's second sound track is not carried (one video and one audio stream are): produce
    /// says so in one line naming the stream, and the video is still every frame ffmpeg decodes.
    @Test func uncarriedAudioIsSaid() throws {
        let scratch = try Scratch()
        let movie = scratch.file("movie.mkv")
        let (g, _, gerr) = try shell("ffmpeg -v error -y -f lavfi -i testsrc2=size=160x120:rate=25 -f lavfi -i sine -f lavfi -i sine=frequency=880 "
                                     + "-t 1 -map 0 -map 1 -map 2 -c:v libx264 -pix_fmt yuv420p -c:a aac '\(movie)'", scratch)
        try #require(g == 0, "\(gerr)")
        let (md5, producer, _) = try framemd5Pipeline(["-i", movie], stream: "movie", scratch)
        #expect(md5 == (try ffmpegFramemd5(movie, scratch)))
        let notes = producer.stderr.split(separator: "\n").filter { $0.contains("not carried") }
        #expect(notes.count == 1 && notes[0].contains("stream #2 audio (aac)") && notes[0].contains("one audio stream"), "\(producer.stderr)")
    }
}
