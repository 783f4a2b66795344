import Foundation
import Testing

// Decoding straight into pool slots (zero copy): the decoder keeps pictures it already
// output as references, consumers hold slots for as long as they like, and neither may
// ever see a slot reused under it. If a referenced slot were recycled, every later frame
// predicted from it would decode wrong; if a held slot were, the sink would hash a torn
// frame. Either way the framemd5 would differ from ffmpeg's.
@Suite(.serialized) struct ZeroCopyDecodeTests {
    /// An H.264 clip with 4 reference frames and B-frames: the decoder keeps several
    /// pictures referenced at any time.
    func referenceHeavyClip(_ scratch: Scratch, frames: Int = 60) throws -> String {
        try generateClip(MediaInput(file: "refs.mp4", rate: "25", frames: frames,
                                            ffmpegArgs: ["-c:v", "libx264", "-x264-params", "ref=4:bframes=3:keyint=30",
                                                         "-pix_fmt", "yuv420p"]), scratch)
    }

    /// Few slots (so the decoder's references, consumers' holds and new frames compete for
    /// them), a lossless sink (fast: the slots it frees are the decoder's fresh references;
    /// or slow: the producer waits) and a live sink holding frames: the lossless sink's
    /// framemd5 is still ffmpeg's, and most frames were published in place.
    @Test(arguments: [(6, "0"), (6, "500-4000"), (16, "0")])
    func referencesAndHoldsAreNeverOverwritten(slots: Int, losslessHoldMicros: String) throws {
        let scratch = try Scratch()
        let path = try referenceHeavyClip(scratch)
        let expected = try ffmpegFramemd5(path, scratch)
        // The producer waits for the lossless sink; the live sink is attached before that one
        // starts, so it sees the stream from its first frame to its end however slow the machine.
        let producer = try scratch.start(["produce", "-i", path, "--out", "zc", "--wait-for", "1",
                                          "--slots", String(slots), "--threads", "2"])
        let live = try scratch.start(["sink", "--in", "zc", "--live", "--null", "--hold-us", "5000-20000", "--quiet"])
        #expect(eventually { scratch.snapshot("zc")?.consumers.count == 1 }, "live sink: \(live.stderr)")
        let lossless = try scratch.start(["sink", "--in", "zc", "--framemd5", "-", "--hold-us", losslessHoldMicros])
        #expect(producer.wait(timeout: 60) == 0, "producer: \(producer.stderr)")
        #expect(lossless.wait(timeout: 60) == 0, "sink: \(lossless.stderr)")
        #expect(live.wait(timeout: 60) == 0, "live sink: \(live.stderr)")
        #expect(lossless.stdout == expected, "framemd5 through zero-copy slots differs from ffmpeg's")
        let path2 = try #require(pathCounts(producer.stdout), "\(producer.stdout)")
        #expect(path2.zeroCopy + path2.copied == 60, "\(producer.stdout)")
        #expect(path2.zeroCopy >= 30, "\(producer.stdout)")
        if slots == 16 { #expect(path2.copied == 0, "\(producer.stdout)") }
    }

    /// A decoder that keeps one picture and updates it in place (qtrle, through FFmpeg's
    /// ff_reget_buffer) must not rewrite a slot it already published: slot buffers are
    /// read-only to it, so it takes a new slot for every frame.
    @Test func inPlaceUpdatingDecoderGetsANewSlotPerFrame() throws {
        let scratch = try Scratch()
        let path = try generateClip(MediaInput(file: "qtrle.mov", rate: "25", frames: 40,
                                                       ffmpegArgs: ["-c:v", "qtrle", "-pix_fmt", "rgb24"]), scratch)
        let expected = try ffmpegFramemd5(path, scratch)
        let (md5, producer, _) = try framemd5Pipeline(["-i", path], stream: "qtrle", scratch)
        #expect(md5 == expected, "qtrle frames through zero-copy slots differ from ffmpeg's")
        let counts = try #require(pathCounts(producer.stdout), "\(producer.stdout)")
        #expect(counts.zeroCopy == 40 && counts.copied == 0, "\(producer.stdout)")
    }

    /// `--copy` decodes into FFmpeg's memory and copies: same frames, every one copied.
    @Test func copyPathGivesTheSameFrames() throws {
        let scratch = try Scratch()
        let path = try referenceHeavyClip(scratch, frames: 30)
        let expected = try ffmpegFramemd5(path, scratch)
        let (md5, producer, _) = try framemd5Pipeline(["-i", path, "--copy"], stream: "copied", scratch)
        #expect(md5 == expected)
        #expect(producer.stdout.contains("0 zero-copy, 30 copied"), "\(producer.stdout)")
        let (status, _, err) = try scratch.run(["produce", "--pattern", "--out", "p", "--frames", "1", "--copy"])
        #expect(status == 2 && err.contains("--copy goes with -i"), "\(err)")
    }

    /// With a consumer that keeps up, `inspect` shows slots that only the decoder still
    /// references ("reference"): published frames every consumer released, which are not
    /// reused until the decoder lets go (the stream still ends complete).
    @Test func inspectShowsDecoderReferences() throws {
        let scratch = try Scratch()
        let path = try referenceHeavyClip(scratch, frames: 90)
        let sink = try scratch.start(["sink", "--in", "refs", "--null", "--stats-json", "--quiet"])
        let producer = try scratch.start(["produce", "-i", path, "--out", "refs", "--wait-for", "1", "--threads", "1", "-re"])
        var sawReference = false
        #expect(eventually(timeout: 20) {
            let (status, out, _) = (try? scratch.run(["inspect", "refs", "--json"], timeout: 10)) ?? (1, "", "")
            guard status == 0, let json = try? JSONSerialization.jsonObject(with: Data(out.utf8)) as? [String: Any],
                  let slots = json["slotTable"] as? [[String: Any]] else { return false }
            sawReference = slots.contains { $0["state"] as? String == "reference" }
            return sawReference
        }, "no slot was ever shown as a decoder reference")
        #expect(producer.wait(timeout: 60) == 0, "producer: \(producer.stderr)")
        #expect(sink.wait(timeout: 60) == 0, "sink: \(sink.stderr)")
        #expect(sink.stdout.contains("\"received\":90"), "\(sink.stdout)")
    }

    /// Pictures the decoder keeps that are not published yet (B-frames waiting for their
    /// turn, a frame being decoded) are decoder references too, not `writing`: with a stuck
    /// lossless consumer every published slot is its, and the decoder's own are the rest.
    @Test func inspectShowsUnpublishedDecoderPicturesAsReferences() throws {
        let scratch = try Scratch()
        let path = try referenceHeavyClip(scratch, frames: 90)
        let producer = try scratch.start(["produce", "-i", path, "--out", "pending", "--wait-for", "1", "--threads", "2"])
        let stuck = try scratch.start(["sink", "--in", "pending", "--null", "--hold-us", "10000000", "--quiet"])
        func states() -> [String] { scratch.snapshot("pending")?.slotTable.map(\.state) ?? [] }
        #expect(eventually(timeout: 20) {
            let s = states()
            return s.filter { $0 == "held" }.count >= 3 && s.contains("reference") && !s.contains("writing")
        }, "slots: \(states())")
        let (status, out, _) = try scratch.run(["inspect", "pending"])
        #expect(status == 0 && out.contains("decoder reference") && !out.contains("writing"), "\(out)")
        producer.signal(SIGINT)
        stuck.kill()
        _ = producer.wait(timeout: 30)
    }
}
