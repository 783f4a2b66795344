import Foundation
import FrameServer
import Glibc
import Testing

/// A recording in several files (`record --segment-size`): each file a whole NUT file that
/// ffmpeg reads, and replay plays them as one, seeks into any of them, and never takes a file
/// left by another recording for a part of this one.
extension RecordReplayTests {
    /// The files of the recording at `rec` that exist: rec.nut, rec.001.nut, ... (up to the first missing).
    func segmentFiles(_ rec: String) -> [String] {
        var files = [rec]
        let stem = String(rec.dropLast(4))
        while FileManager.default.fileExists(atPath: stem + String(format: ".%03d.nut", files.count)) {
            files.append(stem + String(format: ".%03d.nut", files.count))
        }
        return files
    }

    @Test func segmentedRecordingReplaysAsOne() throws {
        let scratch = try Scratch()
        let (original, md5, rec) = try record(["--pattern", "--frames", "240", "--size", "320x240", "--rate", "max"], scratch,
                                              codec: ["--segment-size", "1M"])
        try #require(original.count == 240)
        let files = segmentFiles(rec)
        #expect(files.count >= 3, "240 frames of about 15 KB in 1 MiB files: \(files)")
        // Each file alone is a NUT file ffmpeg reads; together they hold every frame, in order.
        var pieces: [Substring] = []
        for f in files { pieces += hashes(try text("ffmpeg -v error -i '\(f)' -fps_mode passthrough -f framemd5 -", scratch)) }
        #expect(pieces == hashes(md5))
        // Replay plays them as one: every frame and header field.
        let replayed = try replay(rec, streams: ["cam"], scratch)[0]
        #expect(rebased(replayed, base: replayed.first?.description.captureNanos ?? 0)
                == rebased(original, base: original[0].description.captureNanos))
        // -ss lands in a later file, on its target frame.
        let media = mediaOffsets(original)
        let target = media.count * 3 / 4
        let seconds = String(format: "%.6f", Double(media[target]) / 1e9)
        let tail = try replay(rec, streams: ["cam"], scratch, extra: ["-ss", seconds])[0]
        #expect(tail.map(\.digest) == original[target...].map(\.digest), "replay -ss \(seconds) did not start at frame \(target)")
        // A middle file missing, or cut: replay plays what it can and says which file.
        let damaged = scratch.file("damaged")
        try FileManager.default.createDirectory(atPath: damaged, withIntermediateDirectories: true)
        for f in files { try FileManager.default.copyItem(atPath: f, toPath: damaged + "/" + (f as NSString).lastPathComponent) }
        let second = damaged + "/rec.001.nut"
        try FileManager.default.moveItem(atPath: second, toPath: second + ".away")
        let missing = try scratch.run(["replay", damaged + "/rec.nut", "--rate", "max", "--no-wait", "--out", "m_"])
        #expect(missing.status == 0 && missing.stderr.contains("rec.001.nut is missing"), "\(missing.stderr)")
        try FileManager.default.moveItem(atPath: second + ".away", toPath: second)
        #expect(truncate(second, off_t(try FileManager.default.attributesOfItem(atPath: second)[.size] as! Int / 2)) == 0)
        let cut = try scratch.run(["replay", damaged + "/rec.nut", "--rate", "max", "--no-wait", "--out", "t_"])
        #expect(cut.status == 0 && cut.stderr.contains("rec.001.nut: the file ends without its index"), "\(cut.stderr)")
        // A shorter recording to the same name leaves the old later files (of another series):
        // replay plays the new one alone.
        let (shorter, _, again) = try record(["--pattern", "--frames", "30", "--size", "320x240", "--rate", "max"], scratch,
                                             codec: ["--segment-size", "1M"])
        try #require(again == rec && shorter.count == 30)
        #expect(segmentFiles(rec).count == files.count, "the old recording's later files are still there")
        let player = try scratch.start(["replay", rec, "--out", "n_", "--rate", "max"])
        let alone = try FrameCollector("n_cam", scratch).wait()
        #expect(player.wait(timeout: 60) == 0)
        let same = alone.map(\.digest) == shorter.map(\.digest)
        #expect(same, "replay gave \(alone.count) frames, the new recording has \(shorter.count)")
        #expect(player.stderr.contains("rec.001.nut is not the next file of"), "\(player.stderr)")
    }

    /// Records two pattern streams (`a` and `b`: produce options) with `record --codec h264
    /// --crf 0` (lossless, so digests compare) and `options`; returns what a collector saw of each.
    func recordTwoH264(_ a: (name: String, args: [String]), _ b: (name: String, args: [String]), to rec: String,
                       _ options: [String], _ scratch: Scratch) throws -> (a: [SeenFrame], b: [SeenFrame]) {
        let pa = try scratch.start(["produce", "--pattern", "--out", a.name, "--wait-for", "2"] + a.args)
        let ca = try FrameCollector(a.name, scratch)
        let pb = try scratch.start(["produce", "--pattern", "--out", b.name, "--wait-for", "2"] + b.args)
        let cb = try FrameCollector(b.name, scratch)
        let recorder = try scratch.run(["record", "--in", "\(a.name),\(b.name)", "-o", rec, "--codec", "h264", "--crf", "0", "--wait", "30"] + options)
        #expect(recorder.status == 0 && pa.wait(timeout: 30) == 0 && pb.wait(timeout: 30) == 0, "\(recorder.stderr)")
        return (try ca.wait(), try cb.wait())
    }

    /// Each track's frames captured at or after `target` (ns from the recording's first frame).
    func frames(_ seen: (a: [SeenFrame], b: [SeenFrame]), from target: Int64) -> (a: [UInt64], b: [UInt64]) {
        let base = min(seen.a[0].description.captureNanos, seen.b[0].description.captureNanos)
        let from = { (f: [SeenFrame]) in f.filter { Int64($0.description.captureNanos - base) >= target }.map(\.digest) }
        return (from(seen.a), from(seen.b))
    }

    /// Two H.264 tracks of other rates: a later file starts at a keyframe of the first, and the second's
    /// first frames there follow a keyframe in the file before. A seek to one of them still gets
    /// every frame of both from the target (replay starts in the file before).
    @Test func seekIntoALaterFileKeepsASecondH264Track() throws {
        let scratch = try Scratch()
        let rec = scratch.file("h.nut")
        // b at 30 fps: its keyframes (one per 50 frames) fall between a's.
        let original = try recordTwoH264(("a", ["--frames", "150", "--rate", "50", "--size", "320x240"]),
                                         ("b", ["--frames", "90", "--rate", "30", "--size", "320x240"]), to: rec, ["--segment-size", "1M"], scratch)
        let later = try #require(segmentFiles(rec).dropFirst().first, "one file only")
        // The target: track b's second packet in the later file, neither of its first two a keyframe.
        let packets = try text("ffprobe -v error -select_streams 1 -show_entries packet=pts,flags -of csv=p=0 '\(later)'", scratch)
            .split(separator: "\n")
        try #require(packets.count >= 2 && !packets[0].contains("K") && !packets[1].contains("K"),
                     "track b's first packets in \(later) are keyframes: nothing to check (\(packets.prefix(2)))")
        let target = try #require(Int64(packets[1].split(separator: ",")[0])) * 1000
        let expected = frames(original, from: target)
        let seconds = String(format: "%.6f", Double(target) / 1e9)
        let seen = try replay(rec, streams: ["a", "b"], scratch, extra: ["--pace", "capture", "-ss", seconds])
        #expect(seen[0].map(\.digest) == expected.a, "track a from \(seconds) s")
        #expect(seen[1].map(\.digest) == expected.b, "track b from \(seconds) s: \(seen[1].count) frames, \(expected.b.count) expected")
    }

    /// A sparse second H.264 track (2 fps: its one keyframe is its first frame) in one file:
    /// a seek past its keyframe starts reading there, so every frame of both tracks from the
    /// target on comes out (libavformat alone went back to the first track's keyframe, and the
    /// sparse track's frames until its next keyframe, here all of them, were lost unsaid).
    @Test func seekKeepsASparseH264Track() throws {
        let scratch = try Scratch()
        let rec = scratch.file("sparse.nut")
        let original = try recordTwoH264(("big", ["--frames", "100", "--rate", "25", "--size", "160x120"]),
                                         ("small", ["--frames", "8", "--rate", "2", "--size", "64x48"]), to: rec, ["--segment-size", "0"], scratch)
        let expected = frames(original, from: 2_200_000_000)
        try #require(expected.b.count >= 3, "the sparse track has \(original.b.count) frames")
        let seen = try replay(rec, streams: ["big", "small"], scratch, extra: ["--pace", "capture", "-ss", "2.2"])
        #expect(seen[0].map(\.digest) == expected.a, "big from 2.2 s: \(seen[0].count) frames, \(expected.a.count) expected")
        #expect(seen[1].map(\.digest) == expected.b, "small from 2.2 s: \(seen[1].count) frames, \(expected.b.count) expected")
    }
}
