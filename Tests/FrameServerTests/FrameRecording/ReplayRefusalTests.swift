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
}
