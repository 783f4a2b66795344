import CFrameServer
import Foundation
@testable import FrameServer
import Testing

/// Audio streams (issue 25, PROTOCOL.md 4.6): a file's sound decoded into slots by `produce`
/// and written by `sink --framemd5` exactly as `ffmpeg -i F -map 0:a:0 -f framemd5 -` writes it.
@Suite struct AudioTests {
    /// ffmpeg's own framemd5 of the input's first audio stream (`before`: ffmpeg's input
    /// options, `-ss 4`, `-stream_loop 1`).
    func ffmpegAudioMD5(_ path: String, before: String = "", _ scratch: Scratch) throws -> String {
        let (status, out, err) = try shell("ffmpeg -v error \(before) -i '\(path)' -map 0:a:0 -f framemd5 -", scratch)
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
        // Every one of these decoders allows decoding into the slots (DR1): only the first
        // frame, which starts the pool, is copied.
        #expect(producer.stdout.contains(" zero-copy, 1 copied)") && !producer.stdout.contains(" 0 zero-copy"), "\(producer.stdout)")
    }

    /// `produce -i MOVIE --out film --wait-for 2 ARGS` with a `sink --framemd5 -` on film and
    /// one on film-audio, all three waited for (each expected to exit 0).
    func playMovie(_ path: String, _ args: [String], _ scratch: Scratch) throws -> (producer: Spawned, video: Spawned, audio: Spawned) {
        let producer = try scratch.start(["produce", "-i", path, "--out", "film", "--wait-for", "2"] + args)
        let video = try scratch.start(["sink", "--in", "film", "--framemd5", "-"])
        let audio = try scratch.start(["sink", "--in", "film-audio", "--framemd5", "-"])
        #expect(video.wait(timeout: 60) == 0, "\(video.stderr)")
        #expect(audio.wait(timeout: 60) == 0, "\(audio.stderr)")
        #expect(producer.wait(timeout: 60) == 0, "\(producer.stderr)")
        return (producer, video, audio)
    }

    /// A movie: pictures to NAME, sound to NAME-audio, each equal to ffmpeg's; --wait-for 2
    /// counts a consumer of either.
    @Test func movieCarriesItsSoundBesideItsPictures() throws {
        let scratch = try Scratch()
        let path = try clip("movie.mp4", "-c:a aac", scratch, video: true)
        let (producer, video, audio) = try playMovie(path, [], scratch)
        #expect(audio.stdout == (try ffmpegAudioMD5(path, scratch)))
        #expect(video.stdout == (try ffmpegFramemd5(path, scratch)))
        #expect(!producer.stderr.contains("not carried"), "\(producer.stderr)")
    }

    /// --loop carries the sound: a movie played three times (--loop 2) gives both streams'
    /// frames as `ffmpeg -stream_loop 2 -i F -map 0:v -map 0:a -f framemd5 -` does (with sound,
    /// ffmpeg makes each play last as long as the sound's, for both streams); a file of sound
    /// only loops too (`-stream_loop 1 -map 0:a`).
    @Test func loopCarriesTheSoundAsFFmpegDoes() throws {
        let scratch = try Scratch()
        let path = try clip("movie.mp4", "-c:a aac", scratch, video: true)
        let (producer, video, audio) = try playMovie(path, ["--loop", "2"], scratch)
        let (status, out, err) = try shell("ffmpeg -v error -stream_loop 2 -i '\(path)' -map 0:v -map 0:a -f framemd5 -", scratch)
        try #require(status == 0, "ffmpeg: \(err)")
        let both = frameLines(String(decoding: out, as: UTF8.self))
        let ffmpegVideo = both.filter { $0.hasPrefix("0,") }
        let ffmpegAudio = both.filter { $0.hasPrefix("1,") }.map { "0," + $0.dropFirst(2) }
        #expect(ffmpegVideo.count == 75 && ffmpegAudio.count > 130)
        #expect(frameLines(video.stdout) == ffmpegVideo, "the looped pictures differ from ffmpeg's")
        #expect(frameLines(audio.stdout).map(String.init) == ffmpegAudio, "the looped sound differs from ffmpeg's")
        #expect(!producer.stderr.contains("--loop"), "\(producer.stderr)")
        let sound = try clip("sound.m4a", "-ac 2 -c:a aac", scratch)
        let (md5, _, _) = try framemd5Pipeline(["-i", sound, "--loop", "1"], stream: "snd", scratch)
        #expect(frameLines(md5) == frameLines(try ffmpegAudioMD5(sound, before: "-stream_loop 1", scratch)),
                "a sound-only file's loop differs from ffmpeg's")
    }

    /// -ss and -t cut the sound to the sample, as ffmpeg's accurate seek and trim do (first
    /// and last frames partial), planar AAC and packed PCM alike; and `ctl NAME seek T` on a
    /// file of sound only lands where `ffmpeg -ss T` starts: every frame after the seek,
    /// timestamps and samples, is ffmpeg's (a new decoder: a flushed AAC decoder keeps state).
    @Test func startDurationAndSeekCutTheSoundAsFFmpeg() throws {
        let scratch = try Scratch()
        let aac = scratch.file("long.m4a"), wav = scratch.file("long.wav")
        let (g, _, gerr) = try shell("ffmpeg -v error -f lavfi -i sine=frequency=440:d=6 -ac 2 -c:a aac '\(aac)' "
                                     + "&& ffmpeg -v error -f lavfi -i sine=frequency=440:d=3 -ac 2 -c:a pcm_s16le '\(wav)'", scratch)
        try #require(g == 0, "\(gerr)")
        for (i, (path, args)) in [(aac, "-ss 2.3 -t 0.77"), (wav, "-ss 1.01"), (wav, "-t 0.5")].enumerated() {
            let (md5, _, _) = try framemd5Pipeline(["-i", path] + args.split(separator: " ").map(String.init), stream: "cut\(i)", scratch)
            #expect(frameLines(md5) == frameLines(try ffmpegAudioMD5(path, before: args, scratch)), "\(args) on \(path) differs from ffmpeg's")
        }
        let producer = try scratch.start(["produce", "-i", aac, "--out", "snd", "-re", "--wait-for", "1"])
        let sink = try scratch.start(["sink", "--in", "snd", "--framemd5", "-"])
        #expect(eventually { (try? scratch.run(["ctl", "snd", "status"]).stdout)?.contains("playing") == true })
        let seek = try scratch.run(["ctl", "snd", "seek", "4"])
        #expect(seek.status == 0, "\(seek.stderr)")
        #expect(sink.wait(timeout: 60) == 0, "\(sink.stderr)")
        #expect(producer.wait(timeout: 60) == 0, "\(producer.stderr)")
        let expected = frameLines(try ffmpegAudioMD5(aac, before: "-ss 4", scratch))
        let after = frameLines(sink.stdout).suffix(expected.count)
        #expect(expected.count > 80 && Array(after) == expected, "the frames after seek 4 differ from ffmpeg -ss 4's")
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
        bad = h; bad.pix_fmt = FS_PIX_NV12; _ = withUnsafeMutableBytes(of: &bad.pix_fmt_name) { $0.initializeMemory(as: UInt8.self, repeating: 0) }
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

    /// produce -> filter gblur -> sink --record out.mkv --audio: the recording's decoded sound
    /// (FLAC, lossless) is the input's, and its first audio and video timestamps line up.
    @Test func recordingThroughAChainKeepsTheSound() throws {
        let scratch = try Scratch()
        let path = try clip("movie.mp4", "-c:a aac", scratch, video: true)
        let out = scratch.file("out.mkv")
        let producer = try scratch.start(["produce", "-i", path, "--out", "film", "--wait-for", "2", "--quiet"])
        let filter = try scratch.start(["filter", "--in", "film", "--vf", "gblur", "--out", "soft", "--wait-for", "1", "--quiet"])
        let sink = try scratch.start(["sink", "--in", "soft", "--record", out, "--audio", "film-audio"])
        #expect(sink.wait(timeout: 60) == 0, "\(sink.stderr)")
        #expect(filter.wait(timeout: 30) == 0, "\(filter.stderr)")
        #expect(producer.wait(timeout: 30) == 0, "\(producer.stderr)")
        #expect(sink.stdout.contains("audio flac 44100 Hz"), "\(sink.stdout)")
        let pcm = { (file: String) throws -> String in
            let (status, md5, err) = try shell("ffmpeg -v error -i '\(file)' -map 0:a -c:a pcm_s16le -f md5 -", scratch)
            try #require(status == 0, "\(err)")
            return String(decoding: md5, as: UTF8.self)
        }
        #expect(try pcm(out) == (try pcm(path)), "the recording's sound differs from the input's")
        let (status, starts, err) = try shell("ffprobe -v error -show_entries stream=codec_type,start_time -of csv=p=0 '\(out)'", scratch)
        try #require(status == 0, "\(err)")
        let times = String(decoding: starts, as: UTF8.self).split(separator: "\n").compactMap { line -> Double? in
            line.split(separator: ",").last.flatMap { Double($0) }
        }
        try #require(times.count == 2, "\(String(decoding: starts, as: UTF8.self))")
        #expect(abs(times[0] - times[1]) <= 1024.0 / 44100, "first video and audio timestamps \(times)")
    }

    /// --record with --audio into MP4: FFmpeg's AAC by default, the file decodes whole.
    @Test func mp4RecordingHasAACSound() throws {
        let scratch = try Scratch()
        let path = try clip("movie.mp4", "-c:a aac", scratch, video: true)
        let out = scratch.file("out.mp4")
        let producer = try scratch.start(["produce", "-i", path, "--out", "film", "--wait-for", "2", "--quiet"])
        let sink = try scratch.start(["sink", "--in", "film", "--record", out, "--audio", "film-audio", "-b:a", "96k"])
        #expect(sink.wait(timeout: 60) == 0, "\(sink.stderr)")
        #expect(producer.wait(timeout: 30) == 0, "\(producer.stderr)")
        let (status, streams, err) = try shell("ffprobe -v error -show_entries stream=codec_name -of csv=p=0 '\(out)'", scratch)
        try #require(status == 0, "\(err)")
        #expect(String(decoding: streams, as: UTF8.self).split(separator: "\n") == ["h264", "aac"])
        let (decoded, _, derr) = try shell("ffmpeg -v error -xerror -i '\(out)' -f null -", scratch)
        #expect(decoded == 0, "\(derr)")
    }

    /// -c:a and -b:a without --audio, and --audio without --record: one usage line each.
    @Test func audioRecordingOptionsAreChecked() throws {
        let scratch = try Scratch()
        let a = try scratch.run(["sink", "--in", "x", "--record", scratch.file("o.mp4"), "-c:a", "aac"])
        #expect(a.status == 2 && a.stderr.contains("-c:a and -b:a go with --audio NAME"), "\(a.stderr)")
        let b = try scratch.run(["sink", "--in", "x", "--null", "--audio", "y"])
        #expect(b.status == 2 && b.stderr.contains("--audio goes with --record FILE"), "\(b.stderr)")
    }

    /// filter --af GRAPH: equal to `ffmpeg -i F -af GRAPH -f framemd5 -`. (A stage's output
    /// keeps the graph's own sample format, so resampling compares with ffmpeg's graph pinned
    /// to it: in one process ffmpeg folds the s16 conversion into the resampler.)
    @Test(arguments: [("volume=0.5", "volume=0.5"), ("pan=mono|c0=c0", "pan=mono|c0=c0"), ("atempo=1.25", "atempo=1.25"),
                      ("aresample=48000", "aresample=48000,aformat=sample_fmts=s32")])
    func audioFilterEqualsFFmpeg(_ graph: String, _ ffmpegGraph: String) throws {
        let scratch = try Scratch()
        let path = try clip("flac24.flac", "-ac 2 -c:a flac -sample_fmt s32", scratch)
        let producer = try scratch.start(["produce", "-i", path, "--out", "snd", "--quiet"])
        let filter = try scratch.start(["filter", "--in", "snd", "--af", graph, "--out", "loud", "--wait-for", "1"])
        let sink = try scratch.start(["sink", "--in", "loud", "--framemd5", "-"])
        #expect(sink.wait(timeout: 60) == 0, "\(sink.stderr)")
        #expect(filter.wait(timeout: 30) == 0, "\(filter.stderr)")
        #expect(producer.wait(timeout: 30) == 0, "\(producer.stderr)")
        let (status, expected, err) = try shell("ffmpeg -v error -i '\(path)' -af '\(ffmpegGraph)' -f framemd5 -", scratch)
        try #require(status == 0, "\(err)")
        #expect(sink.stdout == String(decoding: expected, as: UTF8.self), "filter --af \(graph) differs from ffmpeg's")
        #expect(filter.stdout.contains("audio frames in"), "\(filter.stdout)")
    }

    /// A graph libavfilter rejects, a picture graph given to --af, and --af with --vf: usage
    /// errors before anything attaches; --af on a video stream: one line at attach.
    @Test func badAudioGraphsAreOneLine() throws {
        let scratch = try Scratch()
        let bad = try scratch.run(["filter", "--in", "a", "--af", "nosuchfilter", "--out", "b"])
        #expect(bad.status == 2 && bad.stderr.contains("bad filter graph 'nosuchfilter'"), "\(bad.stderr)")
        let video = try scratch.run(["filter", "--in", "a", "--af", "gblur", "--out", "b"])
        #expect(video.status == 2 && video.stderr.contains("one audio input"), "\(video.stderr)")
        let both = try scratch.run(["filter", "--in", "a", "--af", "volume=2", "--vf", "gblur", "--out", "b"])
        #expect(both.status == 2, "\(both.stderr)")
        let producer = try scratch.start(["produce", "--pattern", "--frames", "5", "--out", "pic", "--wait-for", "1"])
        let wrong = try scratch.run(["filter", "--in", "pic", "--af", "volume=2", "--out", "b"])
        #expect(wrong.status == 1 && wrong.stderr.contains("stream 'pic' carries video, not audio"), "\(wrong.stderr)")
        producer.kill()
    }

    /// A SIGKILLed audio consumer's slots come back, as a video consumer's do, and the
    /// surviving consumer still gets every frame (its framemd5 is ffmpeg's).
    @Test func killedAudioConsumerIsReclaimed() throws {
        let scratch = try Scratch()
        let path = scratch.file("tone.wav")
        let (g, _, err) = try shell("ffmpeg -v error -f lavfi -i sine=d=20 -ac 1 -c:a pcm_s16le '\(path)'", scratch)
        try #require(g == 0, "\(err)")
        let producer = try scratch.start(["produce", "-i", path, "--out", "snd", "--wait-for", "2", "--quiet"])
        let survivor = try scratch.start(["sink", "--in", "snd", "--framemd5", "-"])
        let holder = try scratch.start(["sink", "--in", "snd", "--null", "--lossless", "--hold-us", "10000000"])
        #expect(eventually(timeout: 30) { scratch.snapshot("snd")?.slotTable.contains { !$0.holders.isEmpty } ?? false })
        let pid = holder.pid
        holder.kill()
        #expect(eventually(timeout: 10) { isReclaimed(pid, of: "snd", in: scratch) || scratch.snapshot("snd") == nil })
        #expect(survivor.wait(timeout: 60) == 0, "\(survivor.stderr)")
        #expect(producer.wait(timeout: 30) == 0, "\(producer.stderr)")
        #expect(survivor.stdout == (try ffmpegAudioMD5(path, scratch)), "the survivor lost or changed frames")
    }

    /// sink --wav and --raw: the stream's samples, packed, as ffmpeg writes them (-f f32le for
    /// AAC's fltp; a WAV of pcm_f32le whose decoded samples are the same).
    @Test func wavAndRawHoldTheSamples() throws {
        let scratch = try Scratch()
        let path = try clip("aac.mp4", "-ac 2 -c:a aac", scratch)
        let wav = scratch.file("out.wav"), raw = scratch.file("out.raw")
        let producer = try scratch.start(["produce", "-i", path, "--out", "snd", "--wait-for", "2", "--quiet"])
        let w = try scratch.start(["sink", "--in", "snd", "--wav", wav, "--quiet"])
        let r = try scratch.start(["sink", "--in", "snd", "--raw", raw, "--quiet"])
        for p in [w, r, producer] { #expect(p.wait(timeout: 60) == 0, "\(p.stderr)") }
        let (s1, expected, e1) = try shell("ffmpeg -v error -i '\(path)' -f f32le -", scratch)
        try #require(s1 == 0, "\(e1)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: raw)) == expected, "--raw differs from ffmpeg -f f32le")
        let (s2, fromWav, e2) = try shell("ffmpeg -v error -i '\(wav)' -f f32le -", scratch)
        try #require(s2 == 0, "\(e2)")
        #expect(fromWav == expected, "the WAV's samples differ from ffmpeg's")
        let (s3, probe, _) = try shell("ffprobe -v error -show_entries stream=codec_name,channel_layout -of csv=p=0 '\(wav)'", scratch)
        #expect(s3 == 0 && String(decoding: probe, as: UTF8.self).hasPrefix("pcm_f32le,stereo"))
        let both = try scratch.run(["sink", "--in", "snd", "--wav", wav, "--y4m", scratch.file("o.y4m")])
        #expect(both.status == 2 && both.stderr.contains("--wav takes an audio stream"), "\(both.stderr)")
    }

    /// -map 0:a:N picks the Nth audio stream, as ffmpeg's -map does; other maps are one usage line.
    /// `--copy` copies the sound too (the decoder keeps its own memory), still ffmpeg's
    /// frames; `--frames` on a file of sound only is refused in one line (it counts pictures).
    @Test func copyAndFramesOnSound() throws {
        let scratch = try Scratch()
        let path = try clip("aac.m4a", "-ac 2 -c:a aac", scratch)
        let (md5, producer, _) = try framemd5Pipeline(["-i", path, "--copy"], stream: "snd", scratch)
        #expect(md5 == (try ffmpegAudioMD5(path, scratch)))
        #expect(producer.stdout.contains("(aac, 0 zero-copy, ") && !producer.stdout.contains(" 0 copied)"), "\(producer.stdout)")
        let frames = try scratch.run(["produce", "-i", path, "--out", "f", "--frames", "10"])
        #expect(frames.status == 2 && frames.stderr.split(separator: "\n").count == 1 && frames.stderr.contains("--frames counts pictures"),
                "\(frames.status) \(frames.stderr)")
    }

    @Test func mapPicksTheAudioStream() throws {
        let scratch = try Scratch()
        let path = scratch.file("two.mkv")
        let (g, _, err) = try shell("ffmpeg -v error -f lavfi -i testsrc=d=1:size=160x120 -f lavfi -i sine=f=440:d=1 -f lavfi -i sine=f=880:d=1 "
                                    + "-map 0 -map 1 -map 2 -c:v libx264 -c:a aac '\(path)'", scratch)
        try #require(g == 0, "\(err)")
        let producer = try scratch.start(["produce", "-i", path, "--out", "m", "-map", "0:a:1", "--wait-for", "1", "--quiet"])
        let sink = try scratch.start(["sink", "--in", "m-audio", "--framemd5", "-"])
        #expect(sink.wait(timeout: 60) == 0, "\(sink.stderr)")
        #expect(producer.wait(timeout: 30) == 0, "\(producer.stderr)")
        let (f, expected, ferr) = try shell("ffmpeg -v error -i '\(path)' -map 0:a:1 -f framemd5 -", scratch)
        try #require(f == 0, "\(ferr)")
        #expect(sink.stdout == String(decoding: expected, as: UTF8.self), "-map 0:a:1 is not the second audio stream")
        #expect(producer.stderr.contains("not carried: stream #1 audio"), "\(producer.stderr)")
        let bad = try scratch.run(["produce", "-i", path, "--out", "x", "-map", "1:v"])
        #expect(bad.status == 2 && bad.stderr.contains("-map takes 0:a:N"), "\(bad.stderr)")
        // A stream the input lacks is an error, as ffmpeg's "matches no streams", with a movie
        // (two audio streams) and with a file of sound only.
        let missing = try scratch.run(["produce", "-i", path, "--out", "y", "-map", "0:a:5", "--no-wait", "--quiet"])
        #expect(missing.status != 0 && missing.stderr.split(separator: "\n").count == 1
                && missing.stderr.contains("-map 0:a:5: '\(path)' has no audio stream 5 (it has 2"), "\(missing.stderr)")
        let sound = try clip("sound.m4a", "-c:a aac", scratch)
        let soundOnly = try scratch.run(["produce", "-i", sound, "--out", "z", "-map", "0:a:1", "--no-wait", "--quiet"])
        #expect(soundOnly.status != 0 && soundOnly.stderr.split(separator: "\n").count == 1
                && soundOnly.stderr.contains("has no audio stream 1 (it has 1"), "\(soundOnly.stderr)")
    }
}
