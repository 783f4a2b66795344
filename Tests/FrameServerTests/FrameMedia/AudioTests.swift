import CFrameServer
import Foundation
@testable import FrameServer
import Testing

/// Audio streams (issue 25, PROTOCOL.md 4.6): a file's sound decoded into slots by `produce`
/// and written by `sink --framemd5` exactly as `ffmpeg -i F -map 0:a:0 -f framemd5 -` writes it.
@Suite struct AudioTests {
    /// ffmpeg's own framemd5 of the input's first audio stream.
    func ffmpegAudioMD5(_ path: String, _ scratch: Scratch) throws -> String {
        let (status, out, err) = try shell("ffmpeg -v error -i '\(path)' -map 0:a:0 -f framemd5 -", scratch)
        try #require(status == 0, "ffmpeg: \(err)")
        return String(decoding: out, as: UTF8.self)
    }

    /// A clip made by ffmpeg from lavfi's sine: `encode` is ffmpeg's output options.
    func clip(_ name: String, _ encode: String, _ scratch: Scratch, video: Bool = false) throws -> String {
        let path = scratch.file(name)
        let picture = video ? "-f lavfi -i testsrc=size=160x120:rate=25:d=1 " : ""
        let pictureCodec = video ? "-c:v libx264 " : ""
        let (status, _, err) = try shell("ffmpeg -v error \(picture)-f lavfi -i sine=frequency=440:d=1 \(pictureCodec)\(encode) -shortest '\(path)'", scratch)
        try #require(status == 0, "ffmpeg: \(err)")
        return path
    }

    /// AAC in MP4, Opus in Matroska, 5.1 AC-3, 16-bit mono WAV and 24-bit FLAC: every line,
    /// header and timestamps included, is ffmpeg's.
    @Test(arguments: [("aac.mp4", "-ac 2 -c:a aac"), ("opus.mkv", "-ac 2 -c:a libopus"), ("ac3.ac3", "-ac 6 -c:a ac3"),
                      ("mono.wav", "-ac 1 -c:a pcm_s16le"), ("flac24.flac", "-ac 2 -c:a flac -sample_fmt s32")])
    func soundOnlyFileEqualsFFmpeg(_ name: String, _ encode: String) throws {
        let scratch = try Scratch()
        let path = try clip(name, encode, scratch)
        let expected = try ffmpegAudioMD5(path, scratch)
        let (md5, producer, _) = try framemd5Pipeline(["-i", path], stream: "snd", scratch)
        #expect(frameLines(expected).count >= 10)
        #expect(md5 == expected, "framesrv's framemd5 of \(name) differs from ffmpeg's")
        #expect(producer.stdout.contains("audio frames"), "\(producer.stdout)")
    }

    /// A movie: pictures to NAME, sound to NAME-audio, each equal to ffmpeg's; --wait-for 2
    /// counts a consumer of either.
    @Test func movieCarriesItsSoundBesideItsPictures() throws {
        let scratch = try Scratch()
        let path = try clip("movie.mp4", "-c:a aac", scratch, video: true)
        let producer = try scratch.start(["produce", "-i", path, "--out", "film", "--wait-for", "2"])
        let video = try scratch.start(["sink", "--in", "film", "--framemd5", "-"])
        let audio = try scratch.start(["sink", "--in", "film-audio", "--framemd5", "-"])
        #expect(video.wait(timeout: 60) == 0, "\(video.stderr)")
        #expect(audio.wait(timeout: 60) == 0, "\(audio.stderr)")
        #expect(producer.wait(timeout: 60) == 0, "\(producer.stderr)")
        #expect(audio.stdout == (try ffmpegAudioMD5(path, scratch)))
        #expect(video.stdout == (try ffmpegFramemd5(path, scratch)))
        #expect(!producer.stderr.contains("not carried"), "\(producer.stderr)")
    }

    /// -an publishes no audio stream; the input's audio is then named as not carried.
    @Test func noAudioLeavesTheSoundOut() throws {
        let scratch = try Scratch()
        let path = try clip("movie.mp4", "-c:a aac", scratch, video: true)
        let (md5, producer, _) = try framemd5Pipeline(["-i", path, "-an"], stream: "mute", scratch)
        #expect(md5 == (try ffmpegFramemd5(path, scratch)))
        #expect(producer.stderr.contains("not carried: stream #1 audio (aac)"), "\(producer.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.directory.controlPath("mute-audio")))
    }

    /// A consumer of pictures meeting a sound stream says so in one line, taking no entry.
    @Test func pictureSinkRefusesAnAudioStreamInOneLine() throws {
        let scratch = try Scratch()
        let path = try clip("tone.wav", "-ac 1 -c:a pcm_s16le", scratch)
        let producer = try scratch.start(["produce", "-i", path, "--out", "tone"])
        let y4m = try scratch.start(["sink", "--in", "tone", "--y4m", scratch.file("out.y4m")])
        #expect(y4m.wait(timeout: 30) == 1)
        let lines = y4m.stderr.split(separator: "\n").filter { $0.contains("error") }
        #expect(lines.count == 1 && lines[0].contains("stream 'tone' carries audio"), "\(y4m.stderr)")
        let sink = try scratch.start(["sink", "--in", "tone", "--null"])
        #expect(sink.wait(timeout: 30) == 0, "\(sink.stderr)")
        #expect(producer.wait(timeout: 30) == 0, "\(producer.stderr)")
    }

    /// The checks of 4.6 on an audio header: sizes that overflow, 0 or 255 channels, a
    /// pixel-format code, a mask that disagrees with the count, a plane too small for its rows.
    @Test func badAudioHeadersAreRefused() {
        let format = AudioFormat(.fltp, sampleRate: 48000, layout: .stereo, samples: 1024)
        var h = fs_frame(audio: format, description: FrameDescription())
        h.seq = 3
        func problem(_ h: fs_frame) -> String? { Attachment.headerProblem(h, seq: 3, slotBytes: format.slotBytes, media: .audio) }
        #expect(problem(h) == nil)
        #expect(FrameHeader(h).audioFormat == format)
        #expect(Attachment.headerProblem(h, seq: 3, slotBytes: format.slotBytes) != nil, "an audio frame on a video stream")
        var bad = h; bad.channels = 0; bad.channel_mask = 0
        #expect(problem(bad)?.contains("channels") == true)
        bad = h; bad.channels = 255
        #expect(problem(bad) != nil)
        bad = h; bad.nb_samples = UInt32.max
        #expect(problem(bad) != nil, "nb_samples x bytes per sample overflows the plane")
        bad = h; bad.pix_fmt = FS_PIX_NV12; withUnsafeMutableBytes(of: &bad.pix_fmt_name) { $0.initializeMemory(as: UInt8.self, repeating: 0) }
        bad.pix_fmt = 99
        #expect(problem(bad)?.contains("pix_fmt") == true)
        bad = h; bad.channel_mask = 0x7
        #expect(problem(bad)?.contains("channel_mask") == true)
        bad = h; bad.plane_stride.0 = 64
        #expect(problem(bad) != nil, "rows of 4096 bytes at a 64-byte stride")
        bad = h; bad.width = 16
        #expect(problem(bad) != nil)
        bad = h; bad.sample_rate = 0
        #expect(problem(bad) != nil)
    }
}
