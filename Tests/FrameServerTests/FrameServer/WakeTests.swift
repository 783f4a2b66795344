import CFrameServer
import CZMQ
import Foundation
@testable import FrameServer
import Glibc
import Testing

/// The one-hop wake (protocol v2): a consumer sleeps on the stream's `frame_wake` futex and
/// the producer wakes it directly through shared memory; ZeroMQ is not on the path.
@Suite struct WakeTests {
    /// A lossless sink asleep for 2 s gets a frame published after its sleep began, while
    /// the only ZeroMQ path is stalled: a subscriber with a high-water mark of 1 that never
    /// reads, behind a producer whose own high-water mark is 1 and already full.
    @Test func sleepingConsumerWakesWithoutTheDoorbell() throws {
        try wakeAfterSleep(stalledSubscriber: true)
    }

    /// The same with no subscriber at all: the producer sends no announcement.
    @Test func sleepingConsumerWakesWithNoSubscriber() throws {
        try wakeAfterSleep(stalledSubscriber: false)
    }

    private func wakeAfterSleep(stalledSubscriber: Bool) throws {
        let scratch = try Scratch()
        var options = ProducerOptions()
        options.sendHighWaterMark = 1
        let producer = try Producer(stream: "w", options: options, directory: scratch.directory)
        defer { producer.close() }
        let peer = stalledSubscriber ? try StalledSubscriber(endpoint: scratch.directory.endpoint("w")) : nil
        defer { peer?.close() }
        let format = FrameFormat(.yuv420p, width: 64, height: 48)
        // Fill the doorbell path (nobody consumes these frames: no consumer is attached yet).
        if stalledSubscriber { for _ in 0..<50 { try publishPattern(producer, format) } }
        let log = scratch.file("seq.log")
        let sink = try scratch.start(["sink", "--in", "w", "--null", "--lossless", "--verify", "--seq-log", log,
                                      "--stats-json"])
        #expect(producer.waitForLosslessConsumers(1, timeoutSeconds: 30))
        #expect(eventually { fs_load_u64(&producer.ctl.pointee.sleepers) != 0 }, "the sink sleeps on frame_wake")
        sleep(2)
        try publishPattern(producer, format)
        producer.finish()
        #expect(sink.wait(timeout: 30) == 0, "sink: \(sink.stderr)")
        let stats = try #require(SinkStats.parse(sink.stdout))
        #expect(stats.received == 1 && stats.corrupt == 0)
        let expected: UInt64 = stalledSubscriber ? 51 : 1
        #expect(readSeqLog(log).attachments.flatMap { $0 } == [expected])
    }

    /// A woken consumer takes its frame before it clears its bit in `sleepers` (PROTOCOL.md
    /// 11.1), but it clears it: while it works on the frame (here: holds it for a second) the
    /// producer's publishes see nobody asleep and make no FUTEX_WAKE.
    @Test func aWokenConsumerClearsItsSleeperBitWithItsFrame() throws {
        let scratch = try Scratch()
        let producer = try Producer(stream: "b", options: ProducerOptions(), directory: scratch.directory)
        defer { producer.close() }
        let sink = try scratch.start(["sink", "--in", "b", "--null", "--lossless", "--hold-us", "3000000", "--stats-json"])
        #expect(producer.waitForLosslessConsumers(1, timeoutSeconds: 30))
        #expect(eventually { fs_load_u64(&producer.ctl.pointee.sleepers) != 0 }, "the sink sleeps on frame_wake")
        try publishPattern(producer, FrameFormat(.yuv420p, width: 64, height: 48))
        #expect(eventually { scratch.snapshot("b")?.consumers.first?.held == 1 }, "the sink holds the frame")
        // (It holds the frame 3 s; the bit is cleared microseconds after the frame was taken.)
        #expect(eventually(timeout: 2) { fs_load_u64(&producer.ctl.pointee.sleepers) == 0 },
                "the sink holds its frame with its sleeper bit still set")
        producer.finish()
        #expect(sink.wait(timeout: 30) == 0, "sink: \(sink.stderr)")
    }

    /// A stop asked for while the consumer was busy (no system call to interrupt: as when a
    /// SIGTERM lands between two frames) ends `next()` at the next frame's wake, even
    /// while frames keep coming, rather than only when a wait times out.
    @Test func stopRequestedWhileBusyEndsNextAtTheNextWake() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "s", "--size", "64x48", "--rate", "200",
                                          "--frames", "2000", "--wait-for", "1", "--quiet"])
        defer { producer.signal(SIGKILL) }
        let consumer = try Consumer(stream: "s", directory: scratch.directory)
        var received = 0
        consumer.shouldStop = { received >= 5 }   // true from the 5th frame on, between two waits
        while let frame = try consumer.next() {
            received += 1
            frame.release()
        }
        // Frames already published when the stop came are taken without a sleep: at most the
        // 8 slots' worth, and one more that woke it. Without the check it would take all 2000.
        #expect(received >= 5 && received <= 5 + 8 + 1, "next() went on to frame \(received) after the stop")
    }

    /// Busy-polling changes when a consumer looks, never what it gets: `--poll-us 50` and
    /// `--poll-us 0` deliver the same frames, every one once, in order, intact.
    @Test func busyPollDeliversTheSameFrames() throws {
        let scratch = try Scratch()
        let sinks = try [0, 50].map { poll in
            try scratch.start(["sink", "--in", "p", "--null", "--lossless", "--verify", "--poll-us", String(poll),
                               "--seq-log", scratch.file("seq\(poll).log"), "--stats-json"])
        }
        let producer = try scratch.start(["produce", "--pattern", "--out", "p", "--size", "64x48", "--rate", "max",
                                          "--frames", "3000", "--slots", "4", "--wait-for", "2"])
        #expect(producer.wait() == 0, "producer: \(producer.stderr)")
        for (sink, poll) in zip(sinks, [0, 50]) {
            #expect(sink.wait() == 0, "sink --poll-us \(poll): \(sink.stderr)")
            let stats = try #require(SinkStats.parse(sink.stdout))
            #expect(stats.received == 3000 && stats.corrupt == 0)
            #expect(readSeqLog(scratch.file("seq\(poll).log")).attachments == [Array(1...3000)])
        }
    }

    /// PROTOCOL.md 11.3's catch-up spin: without a window of the user's, a consumer spins
    /// only on a stream faster than 20,000 frames a second (twice its interval, at most
    /// 50 us) and sleeps at once on a slower one or one whose pace it does not know yet; a
    /// user's window is always its own. (The max-rate stream above takes this path with
    /// `--poll-us 0`, and gets every frame.)
    @Test func catchUpSpinOnlyOnFastStreams() {
        #expect(Attachment.spinWindowNanos(pollMicros: 0, interval: 0) == 0)
        #expect(Attachment.spinWindowNanos(pollMicros: 0, interval: 13_000) == 26_000)
        #expect(Attachment.spinWindowNanos(pollMicros: 0, interval: 40_000) == 50_000)
        #expect(Attachment.spinWindowNanos(pollMicros: 0, interval: 50_000) == 0)
        #expect(Attachment.spinWindowNanos(pollMicros: 0, interval: 5_000_000) == 0)   // 200 fps
        #expect(Attachment.spinWindowNanos(pollMicros: 1000, interval: 13_000) == 1_000_000)
        #expect(Attachment.spinWindowNanos(pollMicros: 7, interval: 5_000_000) == 7_000)
        // One CPU: the producer cannot run while the consumer spins; a user's window stays.
        #expect(Attachment.spinWindowNanos(pollMicros: 0, interval: 13_000, cpus: 1) == 0)
        #expect(Attachment.spinWindowNanos(pollMicros: 1000, interval: 13_000, cpus: 1) == 1_000_000)
    }
}

extension WakeTests {
    /// A consumer subscribes to the doorbell only when asked for a descriptor (for event
    /// loops); that descriptor then signals announcements, and frames still come from `next()`.
    @Test func descriptorConnectsTheDoorbellOnDemand() throws {
        let scratch = try Scratch()
        let (producer, consumer) = try producerAndConsumer("fd", slots: 4, scratch)
        defer { producer.close() }
        let format = FrameFormat(.yuv420p, width: 64, height: 48)
        let fd = try consumer.descriptor
        #expect(fd >= 0)
        #expect(try consumer.descriptor == fd, "one socket per attachment")
        var readable = false
        for _ in 0..<500 where !readable {
            try publishPattern(producer, format)
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            readable = poll(&p, 1, 10) > 0
            _ = try nextFrame(consumer)
        }
        #expect(readable, "the doorbell's descriptor signals announcements once subscribed")
    }
}

/// A ZeroMQ subscriber that connects with a receive high-water mark of 1 and never reads.
private final class StalledSubscriber {
    private let context: UnsafeMutableRawPointer
    private let socket: UnsafeMutableRawPointer

    init(endpoint: String) throws {
        context = zmq_ctx_new()
        guard let s = zmq_socket(context, ZMQ_SUB) else { throw TestFailure("zmq_socket") }
        socket = s
        var hwm: Int32 = 1, linger: Int32 = 0
        zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, MemoryLayout<Int32>.size)
        zmq_setsockopt(s, ZMQ_LINGER, &linger, MemoryLayout<Int32>.size)
        zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0)
        guard zmq_connect(s, endpoint) == 0 else { throw TestFailure("zmq_connect \(endpoint)") }
        usleep(100_000)   // let the subscription reach the producer
    }

    func close() {
        zmq_close(socket)
        zmq_ctx_term(context)
    }
}
