import Foundation
import FrameServer
import Glibc
import Testing

/// What a test consumer saw of one frame: its format, a digest of its pixels and its
/// description (capture time as is; compare offsets).
struct SeenFrame: Equatable {
    /// A video frame's format (nil for sound).
    var format: FrameFormat?
    /// An audio frame's format (nil for pictures).
    var audio: AudioFormat? = nil
    var digest: UInt64
    var description: FrameDescription
}

/// Reads every frame of `stream` on its own thread (a lossless consumer in this process).
final class FrameCollector: @unchecked Sendable {
    private let frames = Locked<[SeenFrame]>([])
    private let done = DispatchSemaphore(value: 0)
    private let failure = Locked<String?>(nil)
    /// Used by the collector's thread only, once init has handed it over.
    private let consumer: Consumer

    init(_ stream: String, _ scratch: Scratch) throws {
        var options = ConsumerOptions(mode: .lossless)
        options.waitSeconds = 30
        options.media = nil   // pictures or sound
        consumer = try Consumer(stream: stream, options: options, directory: scratch.directory)
        try consumer.attach()
        Thread.detachNewThread { [self] in
            do {
                while let frame = try consumer.next() {
                    let seen = SeenFrame(format: frame.header.format, audio: frame.header.audioFormat, digest: Self.digest(frame),
                                         description: frame.header.description)
                    frame.release()
                    frames.withLock { $0.append(seen) }
                }
            } catch { failure.withLock { $0 = "\(error)" } }
            done.signal()
        }
    }

    /// How many frames it has seen so far (while the stream runs).
    var count: Int { frames.withLock { $0.count } }

    /// The frames, once the stream has ended (empty after `timeout`).
    func wait(timeout: Double = 60) throws -> [SeenFrame] {
        guard done.wait(timeout: .now() + timeout) == .success else { throw TestFailure("collector: stream did not end") }
        if let f = failure.withLock({ $0 }) { throw TestFailure("collector: \(f)") }
        return frames.withLock { $0 }
    }

    /// FNV-1a over every plane's pixel bytes (no padding), or an audio frame's sample rows.
    static func digest(_ frame: borrowing Frame) -> UInt64 {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        if let audio = frame.header.audioFormat {
            for row in 0..<audio.rows { for b in frame.audioRow(row) { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 } }
            return h
        }
        let format = frame.header.format!
        for p in format.pixelFormat.planes.indices {
            let plane = frame.plane(p), stride = frame.header.stride(plane: p)
            for y in 0..<format.rows(plane: p) {
                for x in 0..<format.rowBytes(plane: p) { h = (h ^ UInt64(plane[y * stride + x])) &* 0x100_0000_01b3 }
            }
        }
        return h
    }
}

/// `framesrv record` and `framesrv replay`: real producer, recorder and replay processes;
/// frames and headers compared as consumers see them, ffmpeg as the oracle for the file.
@Suite(.serialized) struct RecordReplayTests {
    func text(_ command: String, _ scratch: Scratch) throws -> String {
        let (status, out, err) = try shell(command, scratch)
        guard status == 0 else { throw TestFailure("'\(command)' failed: \(err)") }
        return String(decoding: out, as: UTF8.self)
    }

    /// `frames` with capture times made offsets from `base` (what replay must keep).
    func rebased(_ frames: [SeenFrame], base: UInt64) -> [SeenFrame] {
        frames.map { var f = $0; f.description.captureNanos = $0.description.captureNanos &- base; return f }
    }

    /// Records `produce ARGS --out cam` (seen by a collector and a framemd5 sink); returns
    /// what the collector saw, the framemd5 text and the recording's path.
    func record(_ produce: [String], _ scratch: Scratch, codec: [String] = []) throws -> ([SeenFrame], String, String) {
        let rec = scratch.file("rec.nut"), md5 = scratch.file("orig.md5")
        let producer = try scratch.start(["produce"] + produce + ["--out", "cam", "--wait-for", "3"])
        let collector = try FrameCollector("cam", scratch)
        let sink = try scratch.start(["sink", "--in", "cam", "--framemd5", md5, "--quiet", "--wait", "30"])
        let recorder = try scratch.start(["record", "--in", "cam", "-o", rec, "--wait", "30"] + codec)
        #expect(recorder.wait(timeout: 60) == 0, "record: \(recorder.stderr)")
        #expect(producer.wait(timeout: 60) == 0, "produce: \(producer.stderr)")
        #expect(sink.wait(timeout: 60) == 0, "sink: \(sink.stderr)")
        return (try collector.wait(), try String(contentsOfFile: md5, encoding: .utf8), rec)
    }

    /// Each frame's media time in ns from the first frame's (its pts in its time base): replay's
    /// default timeline.
    func mediaOffsets(_ frames: [SeenFrame]) -> [Int64] {
        func nanos(_ d: FrameDescription) -> Int64 { (d.pts ?? 0) * Int64(d.timeBase.num) * 1_000_000_000 / Int64(d.timeBase.den) }
        return frames.map { nanos($0.description) - nanos(frames[0].description) }
    }

    /// Replays `rec` at `rate` (default max) as `r_` + name; returns what a collector saw of each stream.
    func replay(_ rec: String, streams: [String], _ scratch: Scratch, rate: String = "max", extra: [String] = []) throws -> [[SeenFrame]] {
        let replay = try scratch.start(["replay", rec, "--out", "r_", "--rate", rate] + extra)
        let collectors = try streams.map { try FrameCollector("r_" + $0, scratch) }
        let seen = try collectors.map { try $0.wait() }
        #expect(replay.wait(timeout: 60) == 0, "replay: \(replay.stderr)")
        return seen
    }

    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let produce: [String]
        /// Whether ffmpeg decodes the file to the same frames (not across a mid-stream size change).
        let ffmpegReads: Bool
        var testDescription: String { name }
    }

    static let cases = [
        Case(name: "pattern yuv420p", produce: ["--pattern", "--frames", "20", "--size", "320x240", "--rate", "max"], ffmpegReads: true),
        Case(name: "pattern yuv420p10le", produce: ["--pattern", "--frames", "12", "--size", "320x240", "--pix-fmt", "yuv420p10le", "--rate", "max"], ffmpegReads: true),
        Case(name: "pattern rgb24 (stored raw)", produce: ["--pattern", "--frames", "12", "--size", "320x240", "--pix-fmt", "rgb24", "--rate", "max"], ffmpegReads: true),
        Case(name: "size change", produce: ["--pattern", "--frames", "16", "--size", "320x240", "--size-change-at", "8:160x120", "--rate", "max"], ffmpegReads: false),
    ]

    /// Every frame replays bit-identical with every header field (capture offsets included),
    /// and ffmpeg reads the recording to the stream's frames.
    @Test(arguments: cases)
    func replayRestoresFramesAndHeaders(_ c: Case) throws {
        let scratch = try Scratch()
        let (original, md5, rec) = try record(c.produce, scratch)
        let first = try #require(original.first, "the recording's source published no frame")
        if c.ffmpegReads {
            #expect(hashes(try text("ffmpeg -v error -i '\(rec)' -fps_mode passthrough -f framemd5 -", scratch)) == hashes(md5))
        }
        let replayed = try replay(rec, streams: ["cam"], scratch)[0]
        let base = first.description.captureNanos, replayBase = replayed.first?.description.captureNanos ?? 0
        #expect(rebased(replayed, base: replayBase) == rebased(original, base: base))
    }

    /// A decoded clip (10-bit 4:2:2, bottom field first, BT.709, a 4:3 aspect ratio) replays to the same frames and headers;
    /// `sink --framemd5` of the replay equals ffmpeg's of the clip.
    @Test func decodedClipReplaysAsDecoded() throws {
        let scratch = try Scratch()
        let clip = scratch.file("clip.mkv")
        _ = try text("ffmpeg -v error -f lavfi -i testsrc2=size=320x240:rate=25 -frames:v 10 -vf setfield=bff,setsar=4/3 "
                     + "-pix_fmt yuv422p10le -color_primaries bt709 -color_trc bt709 -colorspace bt709 -c:v ffv1 '\(clip)'", scratch)
        let (original, md5, rec) = try record(["-i", clip], scratch)
        try #require(original.count == 10)
        let replayed = try replay(rec, streams: ["cam"], scratch)[0]
        #expect(rebased(replayed, base: replayed.first?.description.captureNanos ?? 0)
                == rebased(original, base: original[0].description.captureNanos))
        let replay = try scratch.start(["replay", rec, "--rate", "max", "--quiet"])
        let sink = try scratch.run(["sink", "--in", "cam", "--framemd5", "-", "--quiet", "--wait", "30"])
        #expect(replay.wait(timeout: 60) == 0)
        #expect(sink.stdout == md5)
        #expect(sink.stdout == (try text("ffmpeg -v error -i '\(clip)' -map 0:v:0 -f framemd5 -", scratch)))
    }

    /// The replayed pattern passes `sink --verify` (every byte as the pattern made it).
    @Test func replayedPatternVerifies() throws {
        let scratch = try Scratch()
        let (original, _, rec) = try record(["--pattern", "--frames", "15", "--size", "320x240", "--rate", "max"], scratch)
        let replay = try scratch.start(["replay", rec, "--rate", "max"])
        let sink = try scratch.run(["sink", "--in", "cam", "--null", "--verify", "--stats-json", "--wait", "30"])
        #expect(replay.wait(timeout: 60) == 0)
        let stats = try #require(SinkStats.parse(sink.stdout))
        #expect(stats.received == original.count && stats.corrupt == 0)
    }

    /// Two streams of different rates, recorded together, replay with every frame of B at its
    /// recorded capture offset from A's first frame (asserted on capture_ns, not wall time).
    @Test func twoStreamsStayInSync() throws {
        let scratch = try Scratch()
        let rec = scratch.file("ab.nut")
        let a = try scratch.start(["produce", "--pattern", "--out", "a", "--frames", "30", "--rate", "30", "--size", "160x120", "--wait-for", "2"])
        let b = try scratch.start(["produce", "--pattern", "--out", "b", "--frames", "10", "--rate", "10", "--size", "320x240", "--wait-for", "2"])
        let ca = try FrameCollector("a", scratch), cb = try FrameCollector("b", scratch)
        let recorder = try scratch.start(["record", "--in", "a,b", "-o", rec, "--wait", "30"])
        #expect(recorder.wait(timeout: 60) == 0, "record: \(recorder.stderr)")
        #expect(a.wait(timeout: 30) == 0 && b.wait(timeout: 30) == 0)
        let (oa, ob) = (try ca.wait(), try cb.wait())
        // Interleaved by capture time: the file's packets (one timeline for both) in order.
        let pts = try text("ffprobe -v error -show_entries packet=pts -of csv=p=0 '\(rec)'", scratch).split(separator: "\n").compactMap { Int($0.split(separator: ",").first ?? "") }
        #expect(pts.count == 40 && pts == pts.sorted())
        let seen = try replay(rec, streams: ["a", "b"], scratch)
        let base = min(oa[0].description.captureNanos, ob[0].description.captureNanos)
        let replayBase = min(seen[0].first?.description.captureNanos ?? 0, seen[1].first?.description.captureNanos ?? 0)
        #expect(seen[0].count == 30 && seen[1].count == 10)
        #expect(rebased(seen[0], base: replayBase) == rebased(oa, base: base))
        #expect(rebased(seen[1], base: replayBase) == rebased(ob, base: base))
    }

    /// FFV1 and raw tracks mark one seek point (NUT keyframe) a second of capture time, not
    /// every frame: libavformat's muxer keeps an index entry in memory per keyframe for as long
    /// as the file is open (33 MB per million frames before). Seeking past the seek point still
    /// lands on its target frame, and ffmpeg still reads every frame.
    @Test func seekPointsAreOneASecond() throws {
        let scratch = try Scratch()
        let (original, md5, rec) = try record(["--pattern", "--frames", "45", "--size", "64x48", "--rate", "30"], scratch)
        try #require(original.count == 45)
        let flags = try text("ffprobe -v error -show_entries packet=flags -of csv=p=0 '\(rec)'", scratch).split(separator: "\n")
        #expect(flags.count == 45 && flags.filter { $0.hasPrefix("K") }.count == 2, "keyframe flags: \(flags)")
        #expect(hashes(try text("ffmpeg -v error -i '\(rec)' -fps_mode passthrough -f framemd5 -", scratch)) == hashes(md5))
        let replayed = try replay(rec, streams: ["cam"], scratch, extra: ["-ss", "1.2"])[0]
        let target = mediaOffsets(original).firstIndex { $0 >= 1_200_000_000 }!
        #expect(replayed.map(\.digest) == original[target...].map(\.digest), "replay -ss 1.2 did not start at frame \(target)")
    }

    /// Records `streams` of `produce ARGS` into `rec`, SIGKILLs the recorder once the file
    /// holds more than `bytes`, then stops the producer.
    func killRecording(_ produce: [String], streams: String, _ rec: String, above bytes: Int, _ scratch: Scratch) throws {
        let producer = try scratch.start(["produce"] + produce)
        let recorder = try scratch.start(["record", "--in", streams, "-o", rec, "--wait", "30"])
        #expect(eventually { ((try? FileManager.default.attributesOfItem(atPath: rec)[.size] as? Int) ?? 0) > bytes })
        recorder.signal(SIGKILL)
        _ = recorder.wait(timeout: 10)
        producer.signal(SIGINT)
        _ = producer.wait(timeout: 30)
    }

    /// A recorder killed with SIGKILL leaves a file that replays (its frames verify).
    @Test func killedRecordingReplays() throws {
        let scratch = try Scratch()
        let rec = scratch.file("killed.nut")
        try killRecording(["--pattern", "--out", "cam", "--rate", "60", "--size", "320x240", "--wait-for", "1"],
                          streams: "cam", rec, above: 400_000, scratch)
        let replay = try scratch.start(["replay", rec, "--rate", "max"])
        let sink = try scratch.run(["sink", "--in", "cam", "--null", "--verify", "--stats-json", "--wait", "30"])
        #expect(replay.wait(timeout: 60) == 0, "replay: \(replay.stderr)")
        let stats = try #require(SinkStats.parse(sink.stdout))
        #expect(stats.received >= 5 && stats.corrupt == 0)
    }

    /// A truncated recording plays up to the cut and says what it skipped; a file that is
    /// not a recording is one error line.
    @Test func truncatedRecordingPlaysWhatItCan() throws {
        let scratch = try Scratch()
        let (original, _, rec) = try record(["--pattern", "--frames", "20", "--size", "320x240", "--rate", "max"], scratch)
        let size = try #require(FileManager.default.attributesOfItem(atPath: rec)[.size] as? Int)
        #expect(truncate(rec, off_t(size * 6 / 10)) == 0)
        let replay = try scratch.start(["replay", rec, "--rate", "max"])
        let sink = try scratch.run(["sink", "--in", "cam", "--null", "--verify", "--stats-json", "--wait", "30"])
        #expect(replay.wait(timeout: 60) == 0, "replay: \(replay.stderr)")
        let stats = try #require(SinkStats.parse(sink.stdout))
        #expect(stats.received > 0 && stats.received < original.count && stats.corrupt == 0)
        #expect(replay.stderr.contains("ends without its index"), "\(replay.stderr)")

        let junk = scratch.file("junk.nut")
        _ = FileManager.default.createFile(atPath: junk, contents: Data(repeating: 7, count: 5000))
        let bad = try scratch.run(["replay", junk])
        #expect(bad.status == 1 && bad.stderr.split(separator: "\n").count == 1, "\(bad.stderr)")
    }

    /// Snapshot mode: SIGUSR1 writes the last second (no more frames than the stated bound)
    /// to FILE-1.nut, and the recorder goes on; `framesrv ctl snap snapshot` writes FILE-2.nut.
    @Test func snapshotWritesTheLastSeconds() throws {
        let scratch = try Scratch()
        let rec = scratch.file("snap.nut"), first = scratch.file("snap-1.nut")
        let producer = try scratch.start(["produce", "--pattern", "--out", "cam", "--rate", "30", "--size", "160x120", "--wait-for", "1"])
        let recorder = try scratch.start(["record", "--in", "cam", "-o", rec, "--snapshot", "1"])
        #expect(eventually { recorder.stderr.contains("memory bound 31 frames") })
        // Two seconds of stream, counted in frames published (not wall time).
        #expect(eventually { (scratch.snapshot("cam")?.published ?? 0) >= 60 })
        recorder.signal(SIGUSR1)
        #expect(eventually { recorder.stdout.contains("snapshot \(first)") })
        #expect(recorder.isRunning)
        let count = try text("ffprobe -v error -count_packets -show_entries stream=nb_read_packets -of csv=p=0 '\(first)'", scratch)
        let frames = Int(count.trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect((25...31).contains(frames), "\(frames) frames")
        // framesrv ctl NAME snapshot (NAME: the file's base name) pulls the same trigger.
        let ctl = try scratch.run(["ctl", "snap", "snapshot"])
        #expect(ctl.status == 0, "\(ctl.stderr)")
        #expect(eventually { recorder.stdout.contains("snapshot \(scratch.file("snap-2.nut"))") })
        producer.signal(SIGINT)
        #expect(recorder.wait(timeout: 30) == 0, "\(recorder.stderr)")
        #expect(producer.wait(timeout: 30) == 0)
    }

    /// -ss and -t keep the frames recorded in [T, T + D) of capture time; --loop plays the
    /// file again, its first frame marked as a discontinuity.
    @Test func startDurationAndLoop() throws {
        let scratch = try Scratch()
        let (original, _, rec) = try record(["--pattern", "--frames", "20", "--size", "160x120", "--rate", "50"], scratch)
        let base = original[0].description.captureNanos
        let offsets = original.map { Int64($0.description.captureNanos - base) }, media = mediaOffsets(original)
        // -ss and -t on the default timeline (pts), then on --pace capture's.
        let window = try replay(rec, streams: ["cam"], scratch, extra: ["-ss", "0.1", "-t", "0.2"])[0]
        let expected = original.indices.filter { media[$0] >= 100_000_000 && media[$0] < 300_000_000 }
        #expect(!expected.isEmpty && window.map(\.digest) == expected.map { original[$0].digest })
        let captureWindow = try replay(rec, streams: ["cam"], scratch, extra: ["-ss", "0.1", "-t", "0.2", "--pace", "capture"])[0]
        let captured = original.indices.filter { offsets[$0] >= 100_000_000 && offsets[$0] < 300_000_000 }
        #expect(captureWindow.map(\.digest) == captured.map { original[$0].digest })

        let loop = try scratch.start(["replay", rec, "--out", "l_", "--rate", "max", "--loop"])
        let collector = try FrameCollector("l_cam", scratch)
        #expect(eventually { collector.count >= 2 * original.count + 1 })
        loop.signal(SIGINT)
        let seen = try collector.wait()
        #expect(loop.wait(timeout: 30) == 0, "\(loop.stderr)")
        #expect(seen[original.count].digest == original[0].digest)
        #expect(seen[original.count].description.flags.contains(.discontinuity))
        #expect(!seen[original.count - 1].description.flags.contains(.discontinuity))
    }

    /// framesrv ctl on a replay: --paused publishes nothing, step 5 publishes exactly 5
    /// frames, seek lands on the first frame at or after T (a discontinuity), resume plays the
    /// rest without a loss; bad controls are one error line and the replay goes on.
    @Test func replayTakesRunTimeControls() throws {
        let scratch = try Scratch()
        let (original, _, rec) = try record(["--pattern", "--frames", "20", "--size", "160x120", "--rate", "50"], scratch)
        let replay = try scratch.start(["replay", rec, "--out", "c_", "--paused"])
        let collector = try FrameCollector("c_cam", scratch)
        #expect(try scratch.run(["ctl", "c_cam", "step", "5"]).status == 0)
        #expect(eventually { collector.count == 5 })
        let status = try scratch.run(["ctl", "c_cam", "status", "--json"])
        #expect(status.stdout.contains("\"paused\":true") && status.stdout.contains("\"frames\":5"), "\(status.stdout)")
        #expect(collector.count == 5)
        for bad in [["seek", "99"], ["rate", "0"], ["jump"]] {
            let r = try scratch.run(["ctl", "c_cam"] + bad)
            #expect(r.status != 0 && r.stderr.split(separator: "\n").count == 1, "\(bad): \(r.stderr)")
        }
        #expect(try scratch.run(["ctl", "c_cam", "seek", "0.2"]).status == 0)
        #expect(try scratch.run(["ctl", "c_cam", "rate", "max"]).status == 0)
        #expect(try scratch.run(["ctl", "c_cam", "resume"]).status == 0)
        let seen = try collector.wait()
        #expect(replay.wait(timeout: 30) == 0, "\(replay.stderr)")
        let media = mediaOffsets(original)
        let rest = original.indices.filter { media[$0] >= 200_000_000 }.map { original[$0] }
        #expect(seen.map(\.digest) == (original.prefix(5) + rest).map(\.digest))
        #expect(seen[5].description.flags.contains(.discontinuity))
    }

    /// A recording of `produce -i` (decoded faster than real time, so its capture times span a
    /// fraction of the clip) replays every frame at rate 1 (over the clip's duration:
    /// Timing/LatencyTests), states that duration, and seeks by pts: `ctl seek 1.5` lands on
    /// the first frame at or after 1.5 s of media time.
    @Test func fastDecodedRecordingReplaysAtMediaTime() throws {
        let scratch = try Scratch()
        let clip = scratch.file("clip.mp4")
        _ = try text("ffmpeg -v error -f lavfi -i testsrc2=size=160x120:rate=25 -t 2 -pix_fmt yuv420p -c:v libx264 -g 25 '\(clip)'", scratch)
        let (original, _, rec) = try record(["-i", clip], scratch)
        try #require(original.count == 50)
        let base = original[0].description.captureNanos
        #expect(original[49].description.captureNanos - base < 1_500_000_000, "the clip did not decode faster than real time")

        let whole = try replay(rec, streams: ["cam"], scratch, rate: "1")[0]
        #expect(whole.map(\.digest) == original.map(\.digest))

        let replay = try scratch.start(["replay", rec, "--out", "s_", "--paused"])
        let collector = try FrameCollector("s_cam", scratch)
        let status = try scratch.run(["ctl", "s_cam", "status", "--json"])
        #expect(status.stdout.contains("\"duration\":2"), "\(status.stdout)")
        let seek = try scratch.run(["ctl", "s_cam", "seek", "1.5"])
        #expect(seek.status == 0, "\(seek.stderr)")
        #expect(try scratch.run(["ctl", "s_cam", "rate", "max"]).status == 0)
        #expect(try scratch.run(["ctl", "s_cam", "resume"]).status == 0)
        let seen = try collector.wait()
        #expect(replay.wait(timeout: 30) == 0, "\(replay.stderr)")
        let media = mediaOffsets(original)
        #expect(seen.map(\.digest) == original.indices.filter { media[$0] >= 1_500_000_000 }.map { original[$0].digest })
    }

    /// A seek while --loop plays its second pass goes to the target of the recording's
    /// timeline, not to the target less the passes already played.
    @Test func seekDuringALoopLandsOnItsTarget() throws {
        let scratch = try Scratch()
        let (original, _, rec) = try record(["--pattern", "--frames", "25", "--size", "160x120", "--rate", "25"], scratch)
        let replay = try scratch.start(["replay", rec, "--out", "l_", "--loop"])
        let collector = try FrameCollector("l_cam", scratch)
        #expect(eventually { collector.count >= original.count + 3 })
        let before = collector.count
        #expect(try scratch.run(["ctl", "l_cam", "seek", "0.6"]).status == 0)
        #expect(eventually { collector.count >= before + 5 })
        replay.signal(SIGINT)
        let seen = try collector.wait()
        #expect(replay.wait(timeout: 30) == 0, "\(replay.stderr)")
        let target = mediaOffsets(original).firstIndex { $0 >= 600_000_000 }!
        let landed = try #require(seen[before...].first { $0.description.flags.contains(.discontinuity) })
        #expect(landed.digest == original[target].digest, "the seek to 0.6 s during the second pass landed elsewhere")
    }

    /// --codec h264: lossy, but every header field is restored, and the replayed pixels are
    /// exactly what ffmpeg decodes from the file.
    @Test func h264RecordingReplaysWhatFFmpegDecodes() throws {
        let scratch = try Scratch()
        let (original, _, rec) = try record(["--pattern", "--frames", "30", "--size", "320x240", "--rate", "max"], scratch,
                                            codec: ["--codec", "h264", "--crf", "20"])
        #expect(try text("ffprobe -v error -show_entries stream=codec_name -of csv=p=0 '\(rec)'", scratch).hasPrefix("h264"))
        let replayed = try replay(rec, streams: ["cam"], scratch)[0]
        func headers(_ f: [SeenFrame], _ base: UInt64) -> [FrameDescription] { rebased(f, base: base).map(\.description) }
        #expect(headers(replayed, replayed.first?.description.captureNanos ?? 0) == headers(original, original[0].description.captureNanos))
        let replay = try scratch.start(["replay", rec, "--rate", "max", "--quiet"])
        let sink = try scratch.run(["sink", "--in", "cam", "--framemd5", "-", "--quiet", "--wait", "30"])
        #expect(replay.wait(timeout: 60) == 0)
        // Every frame (the pattern ran at max rate: frames microseconds apart, which ffmpeg's
        // default output timing would merge at the stream's 30 fps).
        let decoded = try text("ffmpeg -v error -i '\(rec)' -fps_mode passthrough -f framemd5 -", scratch)
        #expect(hashes(sink.stdout) == hashes(decoded))
        #expect(hashes(sink.stdout).count == original.count)

        // -ss into the middle (no keyframe there): the frames from it on, exactly as decoded from the start.
        let base = original[0].description.captureNanos
        let middle = Double((original[17].description.captureNanos - base) / 1000) / 1e6   // whole microseconds, as -ss reads them
        let late = try scratch.start(["replay", rec, "--rate", "max", "--quiet", "-ss", String(format: "%.6f", middle)])
        let tail = try scratch.run(["sink", "--in", "cam", "--framemd5", "-", "--quiet", "--wait", "30"])
        #expect(late.wait(timeout: 60) == 0)
        #expect(hashes(tail.stdout).first == hashes(sink.stdout).dropFirst(17).first)
    }

    /// SIGINT completes the file (drained, index written: replay has nothing to say about it);
    /// a file damaged in its middle replays without a crash.
    @Test func interruptedRecordingIsCompleteAndDamageIsSurvived() throws {
        let scratch = try Scratch()
        let rec = scratch.file("int.nut")
        let producer = try scratch.start(["produce", "--pattern", "--out", "cam", "--rate", "60", "--size", "160x120", "--wait-for", "1"])
        let recorder = try scratch.start(["record", "--in", "cam", "-o", rec])
        // Frames the recorder took (not merely published: under load it may lag behind).
        #expect(eventually { (scratch.snapshot("cam")?.consumers.first?.delivered ?? 0) >= 20 })
        recorder.signal(SIGINT)
        #expect(recorder.wait(timeout: 30) == 0, "\(recorder.stderr)")
        producer.signal(SIGINT)
        _ = producer.wait(timeout: 30)
        let replay = try scratch.start(["replay", rec, "--rate", "max"])
        let sink = try scratch.run(["sink", "--in", "cam", "--null", "--verify", "--stats-json", "--wait", "30"])
        #expect(replay.wait(timeout: 60) == 0)
        #expect(replay.stderr.split(separator: "\n").allSatisfy { $0.contains("waiting for its first") }, "\(replay.stderr)")
        let stats = try #require(SinkStats.parse(sink.stdout))
        #expect(stats.received >= 20 && stats.corrupt == 0)

        // Overwrite 4 kB in the middle: no crash, the stream still ends.
        let handle = try #require(FileHandle(forUpdatingAtPath: rec))
        let size = try handle.seekToEnd()
        try handle.seek(toOffset: size / 2)
        handle.write(Data(repeating: 0xA5, count: 4096))
        try handle.close()
        let damaged = try scratch.start(["replay", rec, "--rate", "max", "--out", "d_"])
        let reader = try scratch.run(["sink", "--in", "d_cam", "--null", "--stats-json", "--wait", "30"])
        #expect(damaged.wait(timeout: 60) == 0, "\(damaged.stderr)")
        #expect(reader.status == 0)
    }

    /// Bad invocations: one error line each, before waiting for any stream.
    @Test func badInvocationsAreOneLine() throws {
        let scratch = try Scratch()
        for (args, status) in [(["record", "--in", "cam", "-o", "/nonexistent/dir/x.nut"], Int32(1)),
                               (["record", "-o", scratch.file("x.nut")], 2), (["record", "--in", "a,a", "-o", scratch.file("x.nut")], 2),
                               (["record", "--in", "a", "-o", scratch.file("x.nut"), "--codec", "vp9"], 2),
                               (["record", "--in", "a", "-o", scratch.file("x.nut"), "--crf", "20"], 2),
                               (["replay"], 2), (["replay", scratch.file("missing.nut")], 1),
                               (["replay", scratch.file("x.nut"), "--rate", "0"], 2)] {
            let r = try scratch.run(args, timeout: 10)
            #expect(r.status == status && r.stderr.split(separator: "\n").count == 1, "\(args): \(r.status) \(r.stderr)")
        }
    }
}
