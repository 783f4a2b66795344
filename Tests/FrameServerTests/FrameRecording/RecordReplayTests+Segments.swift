import Foundation
import FrameServer
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
        // A shorter recording to the same name leaves the old later files (of another series):
        // replay plays the new one alone.
        let (shorter, _, again) = try record(["--pattern", "--frames", "30", "--size", "320x240", "--rate", "max"], scratch,
                                             codec: ["--segment-size", "1M"])
        try #require(again == rec && shorter.count == 30)
        #expect(segmentFiles(rec).count == files.count, "the old recording's later files are still there")
        let alone = try replay(rec, streams: ["cam"], scratch)[0]
        let same = alone.map(\.digest) == shorter.map(\.digest)
        #expect(same, "replay gave \(alone.count) frames, the new recording has \(shorter.count)")
    }
}
