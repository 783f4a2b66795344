import Foundation
@testable import FrameServer
import Glibc
import Testing

/// A producer that waited for lossless consumers does not publish to nobody once they have
/// all left: it waits --linger seconds for a consumer, saying so, goes on when one comes and
/// ends when none does (issue 27 item 4: two `produce --pattern --rate max --wait-for 1` went
/// on at 1.1M frames/s for 30 minutes after their consumers had gone).
@Suite struct DesertedProducerTests {
    /// `published` of stream `name`, read without attaching.
    func published(_ name: String, _ scratch: Scratch) throws -> UInt64 {
        try StreamSnapshot.read(name, in: scratch.directory).published
    }

    @Test func aDesertedProducerWaitsForTheNextConsumer() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "d", "--size", "64x48", "--rate", "max", "--wait-for", "1",
                                          "--linger", "-1"])
        defer { producer.signal(SIGINT); _ = producer.wait(timeout: 10) }
        let first = try scratch.run(["sink", "--in", "d", "--null", "--frames", "200", "--quiet", "--wait", "30"], timeout: 60)
        #expect(first.status == 0, "\(first.stderr)")
        // Every consumer gone: publishing stops (it would go on by hundreds of thousands a second).
        #expect(eventually { producer.stderr.contains("'d': every consumer left; waiting for one") }, "\(producer.stderr)")
        let stopped = try published("d", scratch)
        usleep(300_000)
        #expect(try published("d", scratch) == stopped, "frames were published to nobody")
        // The next consumer gets frames again.
        let second = try scratch.run(["sink", "--in", "d", "--null", "--frames", "100", "--quiet", "--wait", "30"], timeout: 60)
        #expect(second.status == 0, "\(second.stderr)")
        #expect(try published("d", scratch) > stopped)
    }

    /// None comes within --linger: the stream ends (exit 0), saying why.
    @Test func aDesertedProducerEndsAfterItsLinger() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "e", "--size", "64x48", "--rate", "max", "--wait-for", "1",
                                          "--linger", "0.5"])
        let sink = try scratch.run(["sink", "--in", "e", "--null", "--frames", "50", "--quiet", "--wait", "30"], timeout: 60)
        #expect(sink.status == 0, "\(sink.stderr)")
        #expect(producer.wait(timeout: 30) == 0, "\(producer.stderr)")
        #expect(producer.stderr.contains("'e': every consumer left; waiting up to 0.5 s for one"), "\(producer.stderr)")
        #expect(producer.stderr.contains("'e': no consumer came within 0.5 s (--linger); ending the stream"), "\(producer.stderr)")
    }

    /// The same for a decoded file whose frames go zero-copy (decoded into leased slots and
    /// published in place): it published into nothing before, since only the copy path waited.
    /// A 250-frame clip at its own pace (-re): the sink takes 20 and leaves, and the producer
    /// ends after --linger 0.5 instead of publishing the other 230 to nobody for 9 seconds.
    @Test func aDesertedFileProducerEndsAfterItsLinger() throws {
        let scratch = try Scratch()
        let clip = scratch.file("clip.mp4")
        let made = try shell("ffmpeg -v error -f lavfi -i testsrc2=size=160x120:rate=25 -t 10 -c:v libx264 '\(clip)'", scratch)
        try #require(made.status == 0, "ffmpeg: \(made.stderr)")
        let producer = try scratch.start(["produce", "-i", clip, "-re", "--out", "f", "--wait-for", "1", "--linger", "0.5"])
        let sink = try scratch.run(["sink", "--in", "f", "--null", "--frames", "20", "--quiet", "--wait", "30"], timeout: 60)
        #expect(sink.status == 0, "\(sink.stderr)")
        #expect(producer.wait(timeout: 8) == 0, "still publishing to nobody after 8 s: \(producer.stderr)")
        #expect(producer.stderr.contains("'f': no consumer came within 0.5 s (--linger); ending the stream"), "\(producer.stderr)")
        #expect(producer.stdout.contains("zero-copy") && !producer.stdout.contains("published 250 frames"), "\(producer.stdout)")
    }

    @Test func lingerTakesSecondsOrMinusOne() throws {
        let scratch = try Scratch()
        for bad in ["-2", "nan", "x"] {
            let r = try scratch.run(["produce", "--pattern", "--out", "l", "--wait-for", "1", "--linger", bad])
            #expect(r.status != 0 && r.stderr.split(separator: "\n").count == 1 && r.stderr.contains("--linger"), "\(bad): \(r.stderr)")
        }
    }
}
