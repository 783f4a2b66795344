import Foundation
import FrameServer
import Glibc
import Testing

/// A movie's sound recorded beside its pictures and replayed with them (issue 25):
/// `record --in film,film-audio`, `replay`, ffmpeg as the oracle.
extension RecordReplayTests {
    /// `seconds` of testsrc2 (H.264, 25 fps) and a 440 Hz sine (AAC, 44.1 kHz mono, 1024-sample frames).
    func movie(_ scratch: Scratch, seconds: Int = 2) throws -> String {
        let path = scratch.file("movie.mp4")
        _ = try text("ffmpeg -v error -f lavfi -i testsrc2=size=160x120:rate=25 -f lavfi -i sine=frequency=440 -t \(seconds) "
                     + "-c:v libx264 -c:a aac '\(path)'", scratch)
        return path
    }

    /// Records `produce -i MOVIE --out film` (film and film-audio, each also seen by a
    /// collector); returns what the collectors saw and the recording.
    func recordMovie(_ movie: String, _ scratch: Scratch) throws -> (video: [SeenFrame], audio: [SeenFrame], rec: String) {
        let rec = scratch.file("film.nut")
        // Two collectors and the recorder's two consumers.
        let producer = try scratch.start(["produce", "-i", movie, "--out", "film", "--wait-for", "4"])
        let video = try FrameCollector("film", scratch), audio = try FrameCollector("film-audio", scratch)
        let recorder = try scratch.start(["record", "--in", "film,film-audio", "-o", rec, "--wait", "30"])
        #expect(recorder.wait(timeout: 60) == 0, "record: \(recorder.stderr)")
        #expect(producer.wait(timeout: 60) == 0, "produce: \(producer.stderr)")
        return (try video.wait(), try audio.wait(), rec)
    }

    /// ffmpeg's framemd5 of the movie's sound.
    func audioMD5(_ path: String, _ scratch: Scratch) throws -> String {
        try text("ffmpeg -v error -i '\(path)' -map 0:a:0 -f framemd5 -", scratch)
    }

    /// A frame's pts in seconds.
    func seconds(_ f: SeenFrame) -> Double {
        Double(f.description.pts ?? 0) * Double(f.description.timeBase.num) / Double(f.description.timeBase.den)
    }

    /// Pictures and sound replay bit-identical with every header field (capture offsets across
    /// the two streams included), and `sink --framemd5` of each replayed stream is ffmpeg's of the movie.
    @Test func movieSoundReplaysBesideItsPictures() throws {
        let scratch = try Scratch()
        let path = try movie(scratch)
        let (video, audio, rec) = try recordMovie(path, scratch)
        try #require(video.count == 50 && audio.count == frameLines(try audioMD5(path, scratch)).count)
        #expect(try text("ffprobe -v error -show_entries stream=codec_name,codec_type -of csv=p=0 '\(rec)'", scratch)
                == "ffv1,video\npcm_f32le,audio\n")
        #expect(try text("ffprobe -v error -show_entries format_tags=framesrv_recording -of csv=p=0 '\(rec)'", scratch) == "2\n")

        let seen = try replay(rec, streams: ["film", "film-audio"], scratch)
        let base = min(video[0].description.captureNanos, audio[0].description.captureNanos)
        let replayBase = min(seen[0].first?.description.captureNanos ?? 0, seen[1].first?.description.captureNanos ?? 0)
        #expect(rebased(seen[0], base: replayBase) == rebased(video, base: base))
        #expect(rebased(seen[1], base: replayBase) == rebased(audio, base: base), "audio headers or samples differ")
        #expect(seen[1].allSatisfy { $0.audio?.sampleFormat == .fltp && $0.format == nil })

        let replay = try scratch.start(["replay", rec, "--rate", "max", "--quiet"])
        let v = try scratch.start(["sink", "--in", "film", "--framemd5", "-", "--quiet", "--wait", "30"])
        let a = try scratch.start(["sink", "--in", "film-audio", "--framemd5", "-", "--quiet", "--wait", "30"])
        #expect(v.wait(timeout: 60) == 0 && a.wait(timeout: 60) == 0, "\(v.stderr)\(a.stderr)")
        #expect(replay.wait(timeout: 60) == 0, "\(replay.stderr)")
        #expect(a.stdout == (try audioMD5(path, scratch)))
        #expect(v.stdout == (try ffmpegFramemd5(path, scratch)))
    }

    /// A seek acts on both streams: after `ctl film seek 1` the first picture and the first
    /// sound are the originals' first at or after 1 s, their pts within one audio frame of each
    /// other, each marked as a discontinuity, and every later frame follows without a loss.
    @Test func seekKeepsSoundWithItsPictures() throws {
        let scratch = try Scratch()
        let path = try movie(scratch)
        let (video, audio, rec) = try recordMovie(path, scratch)
        let replay = try scratch.start(["replay", rec, "--out", "s_", "--paused"])
        let cv = try FrameCollector("s_film", scratch), ca = try FrameCollector("s_film-audio", scratch)
        #expect(try scratch.run(["ctl", "s_film-audio", "seek", "1"]).status == 0)
        #expect(try scratch.run(["ctl", "s_film", "rate", "max"]).status == 0)
        #expect(try scratch.run(["ctl", "s_film", "resume"]).status == 0)
        let (sv, sa) = (try cv.wait(), try ca.wait())
        #expect(replay.wait(timeout: 30) == 0, "\(replay.stderr)")
        let v0 = try #require(sv.first), a0 = try #require(sa.first)
        let audioFrame = Double(a0.audio?.samples ?? 0) / Double(a0.audio?.sampleRate ?? 1)
        #expect(abs(seconds(v0) - 1) < 0.001, "the first picture after the seek is at \(seconds(v0)) s")
        #expect(seconds(a0) >= 1 - audioFrame && abs(seconds(a0) - seconds(v0)) <= audioFrame,
                "sound at \(seconds(a0)) s, pictures at \(seconds(v0)) s")
        #expect(v0.description.flags.contains(.discontinuity) && a0.description.flags.contains(.discontinuity))
        let firstVideo = try #require(video.firstIndex { $0.digest == v0.digest && $0.description.pts == v0.description.pts })
        let firstAudio = try #require(audio.firstIndex { $0.digest == a0.digest && $0.description.pts == a0.description.pts })
        #expect(sv.map(\.digest) == video[firstVideo...].map(\.digest))
        #expect(sa.map(\.digest) == audio[firstAudio...].map(\.digest))
        // As in the original: no sound that starts at or after the picture's time was passed over.
        #expect(audio[..<firstAudio].allSatisfy { seconds($0) < seconds(v0) })
    }

    /// Pause, step and rate act on both streams: paused, nothing is published; `step 10`
    /// publishes the file's next 10 frames, pictures and sound counted alike, each the
    /// original's; at `rate 4` every audio frame comes whole, none dropped or inserted, its
    /// samples and pts as recorded (no resampling).
    @Test func pauseStepAndRateActOnSoundAndPictures() throws {
        let scratch = try Scratch()
        let (video, audio, rec) = try recordMovie(try movie(scratch), scratch)
        let replay = try scratch.start(["replay", rec, "--out", "p_", "--paused"])
        let cv = try FrameCollector("p_film", scratch), ca = try FrameCollector("p_film-audio", scratch)
        #expect(try scratch.run(["ctl", "p_film", "step", "10"]).status == 0)
        #expect(eventually { cv.count + ca.count == 10 })
        usleep(300_000)   // an observation window: paused, nothing more comes
        #expect(cv.count + ca.count == 10)
        #expect(try scratch.run(["ctl", "p_film-audio", "rate", "4"]).status == 0)
        #expect(try scratch.run(["ctl", "p_film-audio", "resume"]).status == 0)
        let (sv, sa) = (try cv.wait(), try ca.wait())
        #expect(replay.wait(timeout: 30) == 0, "\(replay.stderr)")
        #expect(sv.map(\.digest) == video.map(\.digest))
        #expect(sa.map(\.digest) == audio.map(\.digest))
        #expect(sa.map(\.description.pts) == audio.map(\.description.pts) && sa.map(\.audio) == audio.map(\.audio))
    }

    /// Damaged audio frame records (0 channels, 2^32-1 samples: out of range; 512 samples
    /// where the packet holds 1024) are skipped and counted, in one line; the rest replays.
    @Test func damagedAudioRecordIsSkippedAndCounted() throws {
        let scratch = try Scratch()
        let path = try movie(scratch)
        let (_, audio, rec) = try recordMovie(path, scratch)
        var file = try Data(contentsOf: URL(fileURLWithPath: rec))
        let marker = Data([0x46, 0x53, 0x52, 0x46, 0x02, 0x00])   // "FSRF", version 2: an audio frame record
        var records: [Int] = []
        var from = file.startIndex
        while let r = file.range(of: marker, in: from..<file.endIndex) { records.append(r.lowerBound); from = r.upperBound }
        try #require(records.count == audio.count)
        func put(_ value: UInt32, at offset: Int) { withUnsafeBytes(of: value.littleEndian) { file.replaceSubrange(offset..<offset + 4, with: $0) } }
        put(0, at: records[5] + 116)              // channels
        put(UInt32.max, at: records[10] + 124)    // nb_samples
        put(512, at: records[15] + 124)           // a valid record that does not describe its packet
        try file.write(to: URL(fileURLWithPath: rec))

        let replay = try scratch.start(["replay", rec, "--rate", "max", "--out", "d_"])
        let ca = try FrameCollector("d_film-audio", scratch), cv = try FrameCollector("d_film", scratch)
        let (sa, sv) = (try ca.wait(), try cv.wait())
        #expect(replay.wait(timeout: 60) == 0, "\(replay.stderr)")
        #expect(sv.count == 50)
        let kept = audio.indices.filter { ![5, 10, 15].contains($0) }.map { audio[$0].digest }
        #expect(sa.map(\.digest) == kept)
        let lines = replay.stderr.split(separator: "\n").filter { !$0.contains("waiting for its first") }
        #expect(lines.count == 1 && lines[0].contains("skipped 2 packets") && lines[0].contains("1 frames that did not decode"),
                "\(replay.stderr)")
    }

    /// A recorder of pictures and sound killed with SIGKILL leaves a file that replays both up
    /// to the cut: the sound's framemd5 lines are the first of ffmpeg's, the pictures' too.
    @Test func killedMovieRecordingReplaysBoth() throws {
        let scratch = try Scratch()
        let path = try movie(scratch, seconds: 8), rec = scratch.file("killed.nut")
        try killRecording(["-i", path, "--out", "film", "--wait-for", "2", "-re"], streams: "film,film-audio", rec, above: 300_000, scratch)
        let replay = try scratch.start(["replay", rec, "--rate", "max", "--quiet"])
        let v = try scratch.start(["sink", "--in", "film", "--framemd5", "-", "--quiet", "--wait", "30"])
        let a = try scratch.start(["sink", "--in", "film-audio", "--framemd5", "-", "--quiet", "--wait", "30"])
        #expect(v.wait(timeout: 60) == 0 && a.wait(timeout: 60) == 0, "\(v.stderr)\(a.stderr)")
        #expect(replay.wait(timeout: 60) == 0, "\(replay.stderr)")
        #expect(replay.stderr.contains("ends without its index"), "\(replay.stderr)")
        let (sound, pictures) = (frameLines(a.stdout), frameLines(v.stdout))
        #expect(sound.count > 10 && pictures.count > 5, "\(sound.count) audio and \(pictures.count) video frames replayed")
        #expect(sound[...] == frameLines(try audioMD5(path, scratch)).prefix(sound.count))
        #expect(pictures[...] == frameLines(try ffmpegFramemd5(path, scratch)).prefix(pictures.count))
    }

    /// A sound-only stream (which record refused in one line before it took audio: "stream
    /// 'tone' carries audio, which this consumer (video frames) cannot read") records alone,
    /// 16-bit stereo as pcm_s16le, and replays as ffmpeg decodes the file.
    @Test func soundOnlyStreamRecordsAndReplays() throws {
        let scratch = try Scratch()
        let wav = scratch.file("tone.wav")
        _ = try text("ffmpeg -v error -f lavfi -i sine=frequency=440:d=1 -ac 2 -c:a pcm_s16le '\(wav)'", scratch)
        let rec = scratch.file("tone.nut")
        let producer = try scratch.start(["produce", "-i", wav, "--out", "tone"])
        let recorder = try scratch.run(["record", "--in", "tone", "-o", rec, "--wait", "30"])
        #expect(recorder.status == 0, "\(recorder.stderr)")
        #expect(producer.wait(timeout: 30) == 0)
        let replay = try scratch.start(["replay", rec, "--rate", "max", "--quiet"])
        let sink = try scratch.run(["sink", "--in", "tone", "--framemd5", "-", "--quiet", "--wait", "30"])
        #expect(replay.wait(timeout: 60) == 0)
        #expect(sink.stdout == (try audioMD5(wav, scratch)))
    }
}
