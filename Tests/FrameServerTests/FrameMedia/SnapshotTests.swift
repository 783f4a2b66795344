import Foundation
import FrameServer
import Testing

/// `framesrv inspect --snapshot`: the newest frame as a PNG, checked with FFmpeg as the oracle.
@Suite(.serialized) struct SnapshotTests {
    /// Runs a tool from PATH and returns its status and standard output as bytes.
    func tool(_ name: String, _ args: [String]) throws -> (Int32, Data) {
        let r = try Spawned.run([name] + args)
        return (r.status, r.stdout)
    }

    /// An RGB stream needs no colour conversion, so the PNG must hold exactly the frame's
    /// pixels: FFmpeg decodes it back to the test pattern of the frame it names.
    @Test func rgbSnapshotIsBitExact() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "snap", "--size", "96x64", "--pix-fmt", "rgb24", "--rate", "50"])
        let png = scratch.file("snap.png")
        let (status, out, err) = try scratch.run(["inspect", "snap", "--snapshot", png])
        #expect(status == 0, "\(err)")
        // "inspect: wrote frame N (96x64 rgb24) of 'snap' to ..."
        let words = out.split(separator: " ")
        let seq = try #require(words.firstIndex(of: "frame").flatMap { UInt64(words[$0 + 1]) })
        let (ffStatus, rgb) = try tool("ffmpeg", ["-v", "error", "-i", png, "-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        #expect(ffStatus == 0, "ffmpeg must be installed (scripts/setup --test installs it)")
        let format = FrameFormat(.rgb24, width: 96, height: 64)
        var expected = [UInt8]()
        for y in 0..<format.rows(plane: 0) {
            for x in 0..<format.rowBytes(plane: 0) { expected.append(TestPattern.value(plane: 0, x: x, y: y, sequence: seq)) }
        }
        #expect(rgb.count == expected.count)
        #expect(Array(rgb) == expected, "the PNG holds exactly pattern frame \(seq)")
        // Taking a snapshot left no consumer behind.
        #expect(eventually { scratch.snapshot("snap")?.consumers.isEmpty == true })
        producer.signal(SIGINT)
        #expect(producer.wait() == 0)
    }

    /// A YUV stream is converted to RGB: a PNG of the frame's size that FFmpeg reads.
    @Test func yuvSnapshotIsAValidPNG() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "yuv", "--size", "321x241", "--pix-fmt", "nv12", "--rate", "50"])
        let png = scratch.file("yuv.png")
        let (status, _, err) = try scratch.run(["inspect", "yuv", "--snapshot", png])
        #expect(status == 0, "\(err)")
        let (probe, info) = try tool("ffprobe", ["-v", "error", "-show_entries", "stream=codec_name,width,height,pix_fmt", "-of", "csv=p=0", png])
        #expect(probe == 0)
        #expect(String(decoding: info, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "png,321,241,rgb24")
        producer.signal(SIGINT)
        #expect(producer.wait() == 0)
    }

    /// A frame whose header says code 0 with a name of wider samples than its planes hold
    /// (yuv444p16le on yuv420p planes, 16384 rows) is refused in one line, not read past the
    /// pool by libswscale (issue 27 item 2: the road the web's preview and snapshot share).
    @Test func aDamagedFrameIsOneLineNotACrash() throws {
        let scratch = try Scratch()
        let producer = try stoppedDamagedStream("bad", FileMutation.wideSamplesUnderCodeZero, in: scratch)
        defer { producer.kill() }
        let (status, _, err) = try scratch.run(["inspect", "bad", "--snapshot", scratch.file("bad.png"), "--wait", "2"])
        #expect(status == 1 && err.split(separator: "\n").count == 1 && err.contains("a damaged frame"), "\(status): \(err.prefix(600))")
    }

    @Test func snapshotErrorsAreOneLine() throws {
        let scratch = try Scratch()
        let (s1, _, e1) = try scratch.run(["inspect", "none", "--snapshot", scratch.file("x.png"), "--wait", "0.2"])
        #expect(s1 == 1 && e1.split(separator: "\n").count == 1 && e1.contains("no frame from stream 'none'"))
        let producer = try scratch.start(["produce", "--pattern", "--out", "p", "--rate", "50"])
        let (s2, _, e2) = try scratch.run(["inspect", "p", "--snapshot", "/nonexistent-dir/x.png"])
        #expect(s2 == 1 && e2.split(separator: "\n").count == 1 && e2.contains("cannot write /nonexistent-dir/x.png"))
        producer.signal(SIGINT)
        #expect(producer.wait() == 0)
    }
}
