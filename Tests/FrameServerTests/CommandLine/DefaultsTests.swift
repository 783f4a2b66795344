import CFrameServer
import Foundation
@testable import FrameServer
import Glibc
import Testing

/// Issue 12, "defaults that never lose silently": a file producer waits for its first
/// lossless consumer, a consumer says what it waits for and is told when the stream already
/// ended, a stopped stage ends its stream cleanly, and a live source's drops reach consumers.
@Suite struct DefaultsTests {
    /// A live source that found no free slot marks its next frame as a discontinuity and
    /// says how many frames it dropped before it (fs_frame.source_dropped).
    @Test func liveSourceDropsReachTheLosslessConsumer() throws {
        let scratch = try Scratch()
        var options = ProducerOptions()
        options.slots = 4
        options.liveSource = true
        let producer = try Producer(stream: "cam", options: options, directory: scratch.directory)
        let consumer = try Consumer(stream: "cam", directory: scratch.directory)
        try consumer.attach()
        #expect(producer.waitForLosslessConsumers(1, timeoutSeconds: 10))
        let format = FrameFormat(.gray8, width: 16, height: 16)
        // The consumer takes nothing: four frames fill the pool, the next six are dropped.
        for _ in 0..<4 { try publishPattern(producer, format) }
        for _ in 0..<6 { #expect(try producer.reserve(format) == nil) }
        #expect(producer.droppedCount == 6)
        for seq in 1...4 as ClosedRange<UInt64> {
            let frame = try nextFrame(consumer)
            #expect(frame.sequence == seq && !frame.header.flags.contains(.discontinuity) && frame.header.sourceDropped == 0)
            frame.release()
        }
        try publishPattern(producer, format)
        try publishPattern(producer, format)
        let first = try nextFrame(consumer)
        #expect(first.sequence == 5, "sequence numbers stay contiguous")
        #expect(first.header.flags.contains(.discontinuity))
        #expect(first.header.sourceDropped == 6)
        #expect(first.header.description.sourceDropped == 6)
        first.release()
        let second = try nextFrame(consumer)
        #expect(!second.header.flags.contains(.discontinuity) && second.header.sourceDropped == 0)
        second.release()
        #expect(consumer.missed == 0)
        // top and inspect count them per consumer too (fs_consumer.source_dropped).
        let seen = try StreamSnapshot.read("cam", in: scratch.directory)
        #expect(seen.consumers.map(\.sourceDropped) == [6] && seen.dropped == 6)
        producer.close()
    }

    /// `-re` with a lossless sink that holds every frame: the source drops, and the sink
    /// counts the drops and discontinuities it was told about ("dropped at source").
    @Test func realTimeSourceDropsAreCountedBySink() throws {
        let scratch = try Scratch()
        let clip = try generateClip(MediaInput(file: "drops.mp4", rate: "50", frames: 50,
                                               ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p"]), scratch)
        let sink = try scratch.start(["sink", "--in", "drops", "--null", "--hold-us", "100000", "--stats-json"])
        let producer = try scratch.run(["produce", "-i", clip, "--out", "drops", "-re", "--slots", "4",
                                        "--wait-for", "1", "--stats-json", scratch.file("p.json")])
        #expect(producer.status == 0, "\(producer.stderr)")
        #expect(sink.wait() == 0, "\(sink.stderr)")
        let p = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: scratch.file("p.json")))) as? [String: Any]
        let dropped = (p?["dropped"] as? Int) ?? 0
        let line = sink.stdout.split(separator: "\n").first { $0.hasPrefix("{") }.map(String.init) ?? ""
        let s = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        let atSource = (s?["dropped_at_source"] as? Int) ?? -1
        let discontinuities = (s?["discontinuities"] as? Int) ?? -1
        let received = (s?["received"] as? Int) ?? -1
        #expect(dropped > 0, "the source dropped nothing: \(producer.stdout)")
        // Every drop followed by a published frame is reported on it; drops after the last frame are not.
        #expect(atSource > 0 && atSource <= dropped && discontinuities > 0, "\(sink.stdout)")
        #expect(received + dropped == 50 && (s?["missed"] as? Int) == 0, "\(sink.stdout)")
        #expect(sink.stdout.contains("dropped at source \(atSource)"))
    }

    /// A file producer without --wait-for waits for its first lossless consumer (and says
    /// so once): a sink started after it still gets frame 1, every frame as ffmpeg decodes them.
    @Test func sinkStartedAfterFileProducerGetsEveryFrame() throws {
        let scratch = try Scratch()
        let clip = try generateClip(MediaInput(file: "film.mp4", rate: "25", frames: 20,
                                               ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p"]), scratch)
        let producer = try scratch.start(["produce", "-i", clip, "--out", "film"])
        #expect(eventually { producer.stderr.contains("waiting for its first lossless consumer") })
        let sink = try scratch.run(["sink", "--in", "film", "--framemd5", "-", "--quiet"])
        #expect(sink.status == 0, "\(sink.stderr)")
        #expect(sink.stdout == (try ffmpegFramemd5(clip, scratch)))
        #expect(producer.wait() == 0, "\(producer.stderr)")
        #expect(producer.stdout.contains("published 20 frames"), "\(producer.stdout)")
        #expect(producer.stderr.components(separatedBy: "waiting for").count == 2, "said once: \(producer.stderr)")
    }

    /// A consumer of a stream that ended before it attached (its producer ran with --no-wait)
    /// exits with one line instead of waiting forever; the next producer of the name clears that.
    @Test func consumerOfAnEndedStreamExitsWithOneLine() throws {
        let scratch = try Scratch()
        let clip = try generateClip(MediaInput(file: "gone.mp4", rate: "25", frames: 10,
                                               ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p"]), scratch)
        let producer = try scratch.run(["produce", "-i", clip, "--out", "gone", "--no-wait"])
        #expect(producer.status == 0 && producer.stdout.contains("published 10 frames"), "\(producer.stdout)\(producer.stderr)")
        for command in [["sink", "--in", "gone", "--null"], ["filter", "--in", "gone", "--out", "g2", "--vf", "format=gray"]] {
            let r = try scratch.run(command, timeout: 30)
            #expect(r.status == 1, "\(command): \(r.stderr)")
            #expect(r.stderr == "framesrv: error: stream 'gone' ended before this consumer attached (10 frames published to no consumer);"
                    + " start consumers first (the producer waits for one unless --no-wait), or --wait S for its next producer\n")
        }
        #expect(try scratch.run(["produce", "-i", clip, "--out", "x", "--no-wait", "--wait-for", "1"]).status == 2)
        // A new producer of the name: the stream is there again, from its first frame.
        let again = try scratch.start(["produce", "--pattern", "--out", "gone", "--frames", "3", "--wait-for", "1", "--quiet"])
        let sink = try scratch.run(["sink", "--in", "gone", "--wait", "30", "--null", "--stats-json", "--quiet"])
        #expect(sink.status == 0 && SinkStats.parse(sink.stdout)?.received == 3, "\(sink.stdout)\(sink.stderr)")
        #expect(again.wait() == 0)
    }

    /// On a terminal, a consumer waiting for a stream that does not exist yet says so, once.
    @Test func waitingConsumerSaysSoOnATerminal() throws {
        let scratch = try Scratch()
        let log = scratch.file("tty.txt")
        let tty = try scratch.start(["-qfec", "'\(framesrvPath)' sink --in late --null", log], executable: try RequiredTool.script.path())
        #expect(eventually { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("waiting for stream 'late' (Ctrl-C to stop)") })
        let producer = try scratch.run(["produce", "--pattern", "--out", "late", "--frames", "5", "--wait-for", "1", "--quiet"])
        #expect(producer.status == 0)
        #expect(tty.wait() == 0, "\(tty.stderr)")
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(text.components(separatedBy: "waiting for stream").count == 2, "\(text)")
        #expect(text.contains("received 5 frames"), "\(text)")
    }

    /// SIGTERM to the filter in the middle of produce -> filter -> sink: the filter ends its
    /// output as a clean end of stream, and the sink below exits 0 with what it got.
    @Test func stoppedFilterEndsItsStreamCleanly() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "a", "--size", "64x48", "--rate", "200",
                                          "--wait-for", "1", "--quiet"])
        let filter = try scratch.start(["filter", "--in", "a", "--out", "b", "--vf", "format=gray", "--wait-for", "1", "--quiet"])
        let log = scratch.file("seq.log")
        let sink = try scratch.start(["sink", "--in", "b", "--null", "--seq-log", log, "--stats-json"])
        #expect(eventually { (readSeqLog(log).attachments.first?.count ?? 0) >= 10 })
        filter.signal(SIGTERM)
        #expect(filter.wait() == 0, "\(filter.stderr)")
        #expect(sink.wait() == 0, "\(sink.stderr)")
        let got = readSeqLog(log).attachments.first ?? []
        #expect(got.count >= 10 && got == Array(1...UInt64(got.count)), "every frame from the first, in order")
        #expect(SinkStats.parse(sink.stdout)?.received == got.count, "\(sink.stdout)")
        #expect(!sink.stderr.contains("waiting for it to come back"), "\(sink.stderr)")
        producer.signal(SIGINT)
        #expect(producer.wait() == 0, "\(producer.stderr)")
    }
}
