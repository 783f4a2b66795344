import Foundation
import FrameServer
import Testing

/// A raw H.264 stream (no container: no timestamps, no seeking by time) with the options that
/// need either: its frames get ffmpeg's timestamps (each frame after the one before, so -re
/// paces them), and --loop plays it again from its first byte (issue 26 item 9: `produce -i
/// raw.h264 --loop -1 -re` played once, as fast as it could, and said nothing).
@Suite struct RawStreamTests {
    func rawClip(_ scratch: Scratch) throws -> String {
        let path = scratch.file("raw.h264")
        let (status, _, err) = try shell("ffmpeg -v error -f lavfi -i testsrc2=size=160x120:rate=25 -frames:v 20 -c:v libx264 -g 10 '\(path)'", scratch)
        try #require(status == 0, "ffmpeg: \(err)")
        return path
    }

    @Test func framesOfARawStreamHaveTimestamps() throws {
        let scratch = try Scratch()
        let path = try rawClip(scratch)
        let producer = try scratch.start(["produce", "-i", path, "--out", "raw", "--wait-for", "1", "--quiet"])
        let seen = try FrameCollector("raw", scratch).wait()
        #expect(producer.wait(timeout: 30) == 0, "\(producer.stderr)")
        let pts = seen.map(\.description.pts)
        try #require(seen.count == 20)
        #expect(pts.allSatisfy { $0 != nil }, "frames without a pts: \(pts)")
        let values = pts.compactMap { $0 }
        #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, "pts \(values)")
    }

    /// --loop 2 is three plays: the same frames as ffmpeg decodes from the stream written three times over.
    @Test func loopPlaysARawStreamAgain() throws {
        let scratch = try Scratch()
        let path = try rawClip(scratch)
        let expected = try ffmpegFramemd5("concat:\(path)|\(path)|\(path)", scratch)
        #expect(frameLines(expected).count == 60)
        let (md5, producer, _) = try framemd5Pipeline(["-i", path, "--loop", "2"], stream: "rawloop", scratch)
        #expect(frameLines(md5).map { $0.split(separator: ",").last } == frameLines(expected).map { $0.split(separator: ",").last },
                "the frames of --loop 2 differ from the stream played three times")
        #expect(producer.stdout.contains("published 60 frames"), "\(producer.stdout)")
        #expect(!producer.stderr.contains("error"), "\(producer.stderr)")
    }
}
