import CFrameServer
import Foundation
@testable import FrameServer
import Glibc
import Testing

/// Protocol properties checked with a producer and a consumer in this process: real shared
/// memory, real ZeroMQ, real watcher threads; only the process boundary is missing (the
/// pipeline tests add it).
@Suite(.serialized) struct ProtocolTests {
    /// Property 1: a stale announcement can never be acquired, and a slot being written
    /// cannot be acquired at all.
    @Test func staleAnnouncementIsRefusedAndCounted() throws {
        let scratch = try Scratch()
        var options = ProducerOptions()
        options.slots = 2
        let producer = try Producer(stream: "stale", options: options, directory: scratch.directory)
        let format = FrameFormat(.gray8, width: 16, height: 16)
        func publish() throws -> (slot: UInt32, seq: UInt64) {
            var f = try reserve(producer, format)
            let seq = producer.nextSequence
            TestPattern.fill(f, sequence: seq)
            f.description.flags = [.keyframe]
            let slot = f.slot
            f.publish()
            return (slot, seq)
        }
        let first = try publish()
        let bit: UInt64 = 1 << 40   // an unused consumer index
        let s = fs_control_slot(producer.ctl, first.slot)
        // Still current: acquirable, then released.
        #expect(fs_slot_try_acquire(s, bit, first.seq) == 1)
        _ = fs_slot_release(producer.ctl, s, bit)
        // Recycle the slot: two more frames through a two-slot pool.
        _ = try publish()
        let third = try publish()
        #expect(third.slot == first.slot)
        #expect(fs_slot_try_acquire(s, bit, first.seq) == 0, "a recycled slot must refuse the old sequence number")
        #expect(fs_load_u64(&s.pointee.holders) & bit == 0, "a refused acquire leaves no hold behind")
        // A slot being written (writer bit) refuses everyone, even with the right number.
        let writing = try reserve(producer, format)
        let ws = fs_control_slot(producer.ctl, writing.slot)
        let oldSeq = ws.pointee.seq
        #expect(fs_slot_try_acquire(ws, bit, oldSeq) == 0)
        #expect(fs_load_u64(&ws.pointee.holders) == FS_HOLDER_WRITER)
        _ = consume writing   // abandoned: the slot is free again and its old number no longer matches
        #expect(fs_load_u64(&ws.pointee.holders) == 0)
        #expect(fs_slot_try_acquire(ws, bit, oldSeq) == 0, "an abandoned, half-written slot must not match its old frame")
        producer.close()
    }

    /// Property 4: every header field a producer writes reaches the consumer, for every pixel format.
    /// A consumer refuses a frame header whose plane layout would make a reader (rows x the
    /// header's stride) leave the plane or the slot, and accepts a decoder's padded layout.
    @Test func headerLayoutIsCheckedBeforeDelivery() {
        let format = FrameFormat(.yuv420p, width: 100, height: 50)
        var h = fs_frame(seq: 7, epoch: 1, format: format, description: FrameDescription())
        #expect(Attachment.headerProblem(h, seq: 7, slotBytes: format.slotBytes) == nil)
        // A decoder's layout: 192-byte strides, padding rows and gaps between planes.
        h.setLayout(PlaneLayout(offsets: [256, 256 + 192 * 66 + 128, 256 + 192 * 66 + 128 + 128 * 34 + 64],
                                strides: [192, 128, 128]), format: format)
        let padded = 256 + 192 * 66 + 128 + 128 * 34 + 64 + 128 * 25
        #expect(Attachment.headerProblem(h, seq: 7, slotBytes: padded) == nil)
        #expect(Attachment.headerProblem(h, seq: 7, slotBytes: padded - 1) != nil)
        var inHeader = h
        inHeader.plane_offset.0 = 128
        #expect(Attachment.headerProblem(inHeader, seq: 7, slotBytes: padded) != nil)
        var narrow = h
        narrow.plane_stride.1 = 40   // chroma rows are 50 bytes
        #expect(Attachment.headerProblem(narrow, seq: 7, slotBytes: padded) != nil)
        var short = h
        short.plane_size.2 = 128 * 24   // 25 rows of chroma do not fit
        #expect(Attachment.headerProblem(short, seq: 7, slotBytes: padded) != nil)
        #expect(Attachment.headerProblem(h, seq: 8, slotBytes: padded) != nil)
    }

    @Test func frameDescriptionRoundTripsForEveryFormat() throws {
        let scratch = try Scratch()
        let producer = try Producer(stream: "desc", directory: scratch.directory)
        let consumer = try Consumer(stream: "desc", options: ConsumerOptions(mode: .lossless), directory: scratch.directory)
        try consumer.attach()
        #expect(producer.waitForLosslessConsumers(1, timeoutSeconds: 10))
        for (n, f) in PixelFormat.allCases.enumerated() {
            let format = FrameFormat(f, width: 33 + n, height: 17 + n)
            var frame = try reserve(producer, format)
            let seq = producer.nextSequence
            TestPattern.fill(frame, sequence: seq)
            var d = FrameDescription()
            d.color = n % 2 == 0 ? .bt709Limited : .bt2020Limited
            d.color.range = n % 3 == 0 ? FS_RANGE_FULL : FS_RANGE_LIMITED
            d.sampleAspectRatio = Rational(4, 3)
            d.pts = Int64(1000 + n)
            d.timeBase = Rational(1001, 30000)
            d.duration = 1001
            d.captureNanos = 123_456_789 + UInt64(n)
            d.flags = n % 2 == 0 ? [.keyframe] : [.discontinuity]
            frame.description = d
            frame.publish()

            let got = try nextFrame(consumer)
            let h = got.header
            #expect(got.sequence == seq)
            #expect(h.pixelFormat == f && h.pixelFormatName == f.name)
            #expect(h.width == format.width && h.height == format.height)
            #expect(h.planeCount == f.planes.count)
            for i in f.planes.indices {
                #expect(h.offset(plane: i) == format.planeOffset(i))
                #expect(h.stride(plane: i) == format.stride(plane: i))
            }
            #expect(h.description == d)
            let intact = TestPattern.verify(got)
            #expect(intact)
        }
        producer.finish()
        #expect(try reachesEnd(consumer), "end of stream after the last frame")
    }

    /// A consumer that holds frames across a size change (a filter graph keeping its last
    /// frames) does not block the producer: the new epoch starts at once, the held frame and
    /// a frame still owed from the old pool stay readable, and the old pool file goes once
    /// its slots are reused.
    @Test func framesHeldAcrossAnEpochChangeDoNotBlockIt() throws {
        let scratch = try Scratch()
        let (producer, consumer) = try producerAndConsumer("held", slots: 3, scratch)
        let small = FrameFormat(.yuv420p, width: 64, height: 48), large = FrameFormat(.yuv420p, width: 640, height: 480)
        for _ in 0..<2 { try publishPattern(producer, small) }
        let held = try nextFrame(consumer)   // frame 1, held on; frame 2 is owed, not yet delivered
        // Publishing a larger frame must not wait for the held and owed slots.
        let published = DispatchSemaphore(value: 0)
        let box = UncheckedBox(producer)
        DispatchQueue.global().async {
            try? publishPattern(box.value, large)
            published.signal()
        }
        #expect(published.wait(timeout: .now() + 10) == .success, "the epoch change waited for frames a consumer holds")
        #expect(FileManager.default.fileExists(atPath: scratch.file("held.pool.1")), "the old pool must stay while its frames are held")
        for (seq, format) in [(UInt64(2), small), (3, large)] {
            let frame = try nextFrame(consumer)
            #expect(frame.sequence == seq && frame.header.width == format.width && frame.header.epoch == (seq == 2 ? 1 : 2))
            let intact = TestPattern.verify(frame)
            #expect(intact)
        }
        let stillIntact = TestPattern.verify(held)
        #expect(stillIntact && held.header.epoch == 1)
        held.release()
        for _ in 0..<3 {
            try publishPattern(producer, large)
            try nextFrame(consumer).release()
        }
        #expect(!FileManager.default.fileExists(atPath: scratch.file("held.pool.1")), "the old pool is removed once its slots are reused")
        producer.close()
    }

    /// Property 4: a larger format mid-stream starts a new pool epoch that the consumer follows.
    @Test func sizeChangeStartsAnEpochTheConsumerFollows() throws {
        let scratch = try Scratch()
        let (producer, consumer) = try producerAndConsumer("epoch", slots: 3, scratch)
        let sizes = [(64, 48), (1280, 720), (320, 240), (1920, 1080)]
        var epochs: [UInt64] = []
        for (w, h) in sizes {
            for _ in 0..<2 {
                try publishPattern(producer, FrameFormat(.nv12, width: w, height: h))
                let got = try nextFrame(consumer)
                #expect(got.header.width == w && got.header.height == h)
                let intact = TestPattern.verify(got)
                #expect(intact)
                epochs.append(got.header.epoch)
            }
        }
        // 64x48 -> 1280x720 grows (epoch 2), 320x240 fits, 1920x1080 grows again (epoch 3).
        #expect(epochs == [1, 1, 2, 2, 2, 2, 3, 3])
        #expect(!FileManager.default.fileExists(atPath: scratch.file("epoch.pool.1")), "an old epoch's pool is removed")
        producer.close()
    }

    /// Property 7: a segment of another protocol version is refused with both versions named.
    @Test func versionMismatchNamesBothVersions() throws {
        let scratch = try Scratch()
        let producer = try Producer(stream: "ver", directory: scratch.directory)
        producer.ctl.pointee.version = 99
        let consumer = try Consumer(stream: "ver", directory: scratch.directory)
        #expect(throws: ConsumerError.segment(.versionMismatch(path: scratch.file("ver.ctl"), found: 99))) {
            try consumer.attach()
        }
        let message = ConsumerError.segment(.versionMismatch(path: "x", found: 99)).description
        #expect(message.contains("version 99") && message.contains("version \(FS_PROTOCOL_VERSION)"))
        producer.ctl.pointee.version = FS_PROTOCOL_VERSION
        producer.close()
    }

    /// A v1 control segment whose producer (here: this test process) is alive: a v2 sink
    /// prints one line naming both versions and exits non-zero, without retrying.
    @Test func liveVersion1ProducerIsRefusedInOneLine() throws {
        let scratch = try Scratch()
        try writeVersion1Control(scratch.file("old.ctl"), pid: getpid(), startTime: processStartTime(getpid()))
        let (status, _, stderr) = try scratch.run(["sink", "--in", "old", "--null", "--wait", "30"], timeout: 20)
        #expect(status != 0)
        let lines = stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("version 1") && lines[0].contains("version \(FS_PROTOCOL_VERSION)"), "\(stderr)")
        #expect(FileManager.default.fileExists(atPath: scratch.file("old.ctl")), "nothing removed or rewritten")
        // Monitors list it in one line and go on.
        let ls = try scratch.run(["ls"])
        #expect(ls.status == 0)
        #expect(ls.stderr.contains("old  protocol v1 (this framesrv speaks v\(FS_PROTOCOL_VERSION))"), "\(ls.stderr)")
    }

    /// A v1 control segment left by a dead producer is a leftover: a v2 sink waits past it
    /// and attaches to the v2 producer that replaces it.
    @Test func deadVersion1ProducerIsALeftover() throws {
        let scratch = try Scratch()
        // This process's pid with another start time: a process that is gone.
        try writeVersion1Control(scratch.file("old.ctl"), pid: getpid(), startTime: 1)
        let sink = try scratch.start(["sink", "--in", "old", "--null", "--lossless", "--verify", "--stats-json",
                                      "--wait", "30"])
        usleep(500_000)
        #expect(sink.isRunning, "the sink waits: \(sink.stderr)")
        let producer = try scratch.start(["produce", "--pattern", "--out", "old", "--size", "64x48", "--frames", "20",
                                          "--rate", "max", "--wait-for", "1"])
        #expect(producer.wait() == 0, "producer: \(producer.stderr)")
        #expect(sink.wait() == 0, "sink: \(sink.stderr)")
        #expect(SinkStats.parse(sink.stdout)?.received == 20)
    }

    /// A version-1 control segment as a v1 producer wrote it: magic, version 1, the fixed
    /// identity prefix (pid @36, start time @40); the rest zero.
    private func writeVersion1Control(_ path: String, pid: Int32, startTime: UInt64) throws {
        var bytes = [UInt8](repeating: 0, count: ControlSegment.requiredSize(slotCount: 8))
        bytes.withUnsafeMutableBytes { b in
            b.storeBytes(of: FS_MAGIC_CONTROL, toByteOffset: 0, as: UInt32.self)
            b.storeBytes(of: UInt32(1), toByteOffset: 4, as: UInt32.self)
            b.storeBytes(of: pid, toByteOffset: 36, as: Int32.self)
            b.storeBytes(of: startTime, toByteOffset: 40, as: UInt64.self)
        }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// A stop that nothing wakes the consumer for (a SIGINT that lands just before its wait
    /// for the stream begins, or a flag set by another thread) still ends that wait: the
    /// wait re-asks `shouldStop` (Consumer.stopRecheckMillis), and `next()` returns nil.
    /// Without the re-check it would wait for the stream until `waitSeconds` and throw.
    @Test func stopWithoutAWakeUpEndsTheWaitForTheStream() throws {
        let scratch = try Scratch()
        var options = ConsumerOptions()
        options.waitSeconds = 60
        let consumer = try Consumer(stream: "never", options: options, directory: scratch.directory)
        var asked = 0
        consumer.shouldStop = { asked += 1; return asked >= 3 }   // true only after a wait timed out
        let stopped = try consumer.next() == nil
        #expect(stopped)
        #expect(asked == 3)
    }

    /// A second producer of a live stream is refused; a held frame is released exactly once.
    @Test func secondProducerIsRefused() throws {
        let scratch = try Scratch()
        let producer = try Producer(stream: "one", directory: scratch.directory)
        #expect(throws: ProducerError.streamBusy("one", producerPID: getpid())) {
            _ = try Producer(stream: "one", directory: scratch.directory)
        }
        producer.close()
        // After a clean close the name is free again.
        let again = try Producer(stream: "one", directory: scratch.directory)
        again.close()
    }

    @Test(arguments: ["", ".hidden", "a/b", "x y", String(repeating: "n", count: 49)])
    func invalidStreamNamesAreRefused(_ name: String) {
        #expect(throws: StreamNameError.invalid(name)) { try validateStreamName(name) }
    }

    @Test func fileNamesMapToTheirStreamExactly() {
        #expect(RuntimeDirectory.stream(ofFile: "a.pool.12") == "a")
        #expect(RuntimeDirectory.stream(ofFile: "a.pool.x.ctl") == "a.pool.x")
        #expect(RuntimeDirectory.stream(ofFile: "a.pool.x") == nil)
        #expect(RuntimeDirectory.stream(ofFile: "cam.ctl.tmp.4242") == "cam")
        #expect(RuntimeDirectory.stream(ofFile: "cam.lock") == "cam")
        #expect(RuntimeDirectory.stream(ofFile: "cam.cuda") == "cam" && RuntimeDirectory.stream(ofFile: ".cuda") == nil)
        #expect(RuntimeDirectory.stream(ofFile: ".out-1234") == nil)
    }
}

/// Hands a non-Sendable reference to another thread in a test that synchronises by hand.
final class UncheckedBox<T>: @unchecked Sendable {
    let value: T
    init(_ value: T) { self.value = value }
}
