import CFrameServer
import Foundation
@testable import FrameServer
import Glibc
import Testing

/// A segment truncated while it is mapped (the one case validation cannot catch): the
/// SIGBUS guard maps zero pages over it, and the reader turns the fault into one line and
/// a clean detach. See PROTOCOL.md section 17.
@Suite(.serialized) struct TruncationTests {
    /// A consumer holding a frame whose pool is truncated under it reads zeros instead of
    /// dying, and its next frame from that pool ends the attachment with one line.
    @Test func poolTruncatedUnderAnAttachedConsumer() throws {
        let scratch = try Scratch()
        let (producer, consumer) = try producerAndConsumer("trunc", slots: 4, scratch)
        let format = FrameFormat(.gray8, width: 64, height: 64)
        try publishPattern(producer, format)
        let frame = try nextFrame(consumer)
        let before = fs_guard_total_faults()
        #expect(truncate(scratch.file("trunc.pool.1"), 0) == 0)
        let plane = frame.plane(0)
        let sum = plane.reduce(0) { $0 + Int($1) }   // faults, is caught, reads zeros
        #expect(sum == 0)
        #expect(fs_guard_total_faults() > before)
        frame.release()
        try publishPattern(producer, format)   // the producer's own mapping faults too, and goes on
        do {
            _ = try consumer.next()
            Issue.record("a frame from a truncated pool was delivered")
        } catch {
            #expect(error == .segment(.truncated(path: scratch.file("trunc.pool.1"))), "\(error)")
            #expect(error.description.contains("truncated") && !error.description.contains("\n"))
        }
        #expect(throws: ProducerError.segment(.truncated(path: scratch.file("trunc.pool.1")))) {
            _ = try producer.reserve(format)
        }
        producer.close()
    }

    /// A running producer whose control segment is truncated exits with one error line, not
    /// a signal; monitors skip the stream with a warning.
    @Test func controlTruncatedUnderARunningProducer() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "tc", "--size", "32x32", "--rate", "200", "--slots", "2"])
        let sink = try scratch.start(["sink", "--in", "tc", "--null", "--live"])
        #expect(eventually { (scratch.snapshot("tc")?.published ?? 0) > 5 })
        #expect(truncate(scratch.file("tc.ctl"), 0) == 0)
        let (streams, warnings) = StreamSnapshot.scan(in: scratch.directory)
        #expect(streams.isEmpty)
        #expect(warnings.count == 1 && warnings[0].contains("tc.ctl"), "\(warnings)")
        let status = producer.wait(timeout: 20)
        #expect(status > 0 && status < 128, "producer exit \(status): \(producer.stderr)")
        #expect(producer.stderr.split(separator: "\n").count <= 1, "\(producer.stderr)")
        let sinkStatus = sink.wait(timeout: 20)
        #expect(sinkStatus >= 0 && sinkStatus < 128, "sink exit \(sinkStatus): \(sink.stderr)")
        #expect(sink.stderr.split(separator: "\n").count <= 2, "\(sink.stderr)")
    }
}
