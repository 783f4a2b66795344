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
}
