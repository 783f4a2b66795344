import Foundation
@testable import FrameServer
import Glibc
import Testing

/// A producer that waited for lossless consumers does not publish to nobody once they have
/// all left: it waits for a consumer again, says so once, and goes on when one comes
/// (issue 27 item 4: two `produce --pattern --rate max --wait-for 1` went on at 1.1M frames/s
/// for 30 minutes after their consumers had gone).
@Suite struct DesertedProducerTests {
    /// `published` of stream `name`, read without attaching.
    func published(_ name: String, _ scratch: Scratch) throws -> UInt64 {
        try StreamSnapshot.read(name, in: scratch.directory).published
    }

    @Test func aDesertedProducerWaitsForTheNextConsumer() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "d", "--size", "64x48", "--rate", "max", "--wait-for", "1"])
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
}
