import Foundation
import FrameRecording
@testable import FrameServer
import Glibc
import Testing

/// A recording `replay` cannot play whole is refused in one line before anything is
/// published, and a replay that fails while it creates its streams leaves none behind
/// (issue 26, items 2 and 7). The files are made by ffmpeg with framesrv's tags.
@Suite struct ReplayRefusalTests {
    /// A NUT file of `names.count` tracks (one 16x16 frame each) that says it is a framesrv recording.
    func recording(_ names: [String], _ scratch: Scratch, file: String = "tracks.nut") throws -> String {
        let path = scratch.file(file)
        let maps = String(repeating: "-map 0:v ", count: names.count)
        let tags = names.enumerated().map { "-metadata:s:\($0.offset) framesrv_stream=\($0.element) " }.joined()
        let (status, _, err) = try shell("ffmpeg -v error -f lavfi -i color=s=16x16:d=0.04 \(maps)-c:v ffv1 "
                                         + "-metadata framesrv_recording=1 \(tags)'\(path)'", scratch)
        try #require(status == 0, "ffmpeg: \(err)")
        return path
    }

    /// The stream files (not the recordings) in the scratch runtime directory.
    func streamFiles(_ scratch: Scratch) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: scratch.directory.path)) ?? [])
            .filter { RuntimeDirectory.stream(ofFile: $0) != nil }.sorted()
    }

    @Test func twoTracksOfOneNameAreOneLineAndLeaveNothing() throws {
        let scratch = try Scratch()
        let path = try recording(["a", "b", "b"], scratch)
        let r = try scratch.run(["replay", path, "--quiet"], timeout: 30)
        #expect(r.status != 0)
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("two of its tracks are named 'b'"), "\(r.stderr)")
        #expect(streamFiles(scratch).isEmpty, "left behind: \(streamFiles(scratch))")
    }

    /// A name another producer has: the replay fails on its second stream, and its first goes again.
    @Test func aStreamItCannotCreateTakesTheOthersWithIt() throws {
        let scratch = try Scratch()
        let path = try recording(["a", "b"], scratch)
        let b = try scratch.start(["produce", "--pattern", "--out", "b", "--size", "16x16", "--rate", "10"])
        defer { b.signal(SIGINT); _ = b.wait(timeout: 10) }
        #expect(eventually { FileManager.default.fileExists(atPath: scratch.file("b.ctl")) })
        let r = try scratch.run(["replay", path, "--quiet"], timeout: 30)
        #expect(r.status != 0 && r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        #expect(!streamFiles(scratch).contains { $0.hasPrefix("a.") }, "stream a left behind: \(streamFiles(scratch))")
    }

    /// More tracks than a replay publishes: one line before any decoder or thread starts.
    @Test func tooManyTracksAreOneLine() throws {
        let scratch = try Scratch()
        let path = try recording((0...RecordingReader.maxTracks).map { "t\($0)" }, scratch)
        let r = try scratch.run(["replay", path, "--quiet"], timeout: 60)
        #expect(r.status != 0)
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("it has \(RecordingReader.maxTracks + 1) tracks"), "\(r.stderr)")
        #expect(streamFiles(scratch).isEmpty)
    }

    /// A frame record whose capture offset was damaged to 10^15 ns (11.6 days) in the middle
    /// of a recording: the replay skips and counts it instead of waiting for it, and its
    /// duration is the last frame's (issue 27 item 1, issue 26 item 6).
    @Test func aRecordPastTheEndIsSkippedNotWaitedFor() throws {
        let scratch = try Scratch()
        let rec = scratch.file("rec.nut")
        let producer = try scratch.start(["produce", "--pattern", "--frames", "25", "--size", "64x48", "--rate", "25",
                                          "--out", "cam", "--wait-for", "1"])
        #expect(try scratch.run(["record", "--in", "cam", "-o", rec, "--wait", "30"], timeout: 60).status == 0)
        #expect(producer.wait(timeout: 30) == 0)
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: rec)))
        let magic = Array("FSRF".utf8)
        let records = bytes.indices.dropLast(FrameRecord.size).filter { i in bytes[i..<i + 4].elementsEqual(magic) }
        try #require(records.count == 25, "found \(records.count) frame records")
        withUnsafeBytes(of: Int64(1_000_000_000_000_000).littleEndian) { bytes.replaceSubrange(records[12] + 32..<records[12] + 40, with: $0) }
        try Data(bytes).write(to: URL(fileURLWithPath: rec))

        let paused = try scratch.start(["replay", rec, "--paused", "--quiet"])
        defer { paused.signal(SIGINT); _ = paused.wait(timeout: 10) }
        #expect(eventually { FileManager.default.fileExists(atPath: scratch.file("cam.control")) })
        let status = try scratch.run(["ctl", "cam", "status"])
        // "cam: 0.000/0.960 s paused 1.00x, 0 frames": the last frame's end, not the damaged one's.
        let duration = status.stdout.split(separator: "/").dropFirst().first.flatMap { Double($0.prefix { $0 != " " }) }
        #expect(duration.map { $0 > 0.5 && $0 < 2 } == true, "the duration: \(status.stdout)\(status.stderr)")
        paused.signal(SIGINT)
        _ = paused.wait(timeout: 10)

        let replay = try scratch.start(["replay", rec, "--rate", "1"])
        let sink = try scratch.run(["sink", "--in", "cam", "--null", "--wait", "30"], timeout: 60)
        #expect(replay.wait(timeout: 60) == 0, "the replay waited for the damaged frame: \(replay.stderr)")
        #expect(replay.stderr.contains("1 whose record lies past the recording's end"), "\(replay.stderr)")
        #expect(sink.stdout.contains("24 frames") || sink.stderr.contains("24 frames"), "\(sink.stdout)\(sink.stderr)")
    }
}
