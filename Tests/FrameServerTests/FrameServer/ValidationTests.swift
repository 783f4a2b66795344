import CFrameServer
import Foundation
@testable import FrameServer
import Glibc
import Testing

/// Shared memory is untrusted input: one validator per structure (control segment, slot
/// table, consumer table, frame header), bad values reported in one line naming the file,
/// the field and the value, and never a trap.
@Suite struct ValidationTests {
    /// What `ControlSegment.validate` says about `bytes`: the slot count or the error.
    private func check(_ bytes: [UInt8], path: String = "x.ctl") -> Result<Int, SegmentError> {
        bytes.withUnsafeBytes { b in
            do throws(SegmentError) { return .success(try ControlSegment.validate(b, path: path)) } catch { return .failure(error) }
        }
    }

    /// The bytes of a freshly created control segment of `slots` slots.
    private func controlBytes(slots: Int, _ scratch: Scratch) throws -> [UInt8] {
        var options = ProducerOptions()
        options.slots = slots
        let producer = try Producer(stream: "bytes", options: options, directory: scratch.directory)
        defer { producer.close() }
        let size = ControlSegment.requiredSize(slotCount: UInt32(slots))
        return Array(UnsafeRawBufferPointer(start: producer.ctl, count: size))
    }

    /// Every header field PROTOCOL.md 4.1 fixes is checked, and the error names it and its value.
    @Test(arguments: [(8, "header_size"), (12, "slot_count"), (16, "max_consumers"), (20, "slot_ctl_size"),
                      (24, "consumer_size"), (28, "slot_ctl_offset"), (32, "consumer_offset")])
    func eachControlFieldIsChecked(_ offset: Int, _ field: String) throws {
        let scratch = try Scratch()
        var bytes = try controlBytes(slots: 4, scratch)
        #expect(check(bytes) == .success(4))
        for bad: UInt32 in [0, 0xFFFF_FFFF, bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) } + 1] {
            bytes.withUnsafeMutableBytes { $0.storeBytes(of: bad, toByteOffset: offset, as: UInt32.self) }
            switch check(bytes) {
            case .success: Issue.record("\(field) = \(bad) was accepted")
            case .failure(let error):
                let line = ConsumerError.segment(error).description
                #expect(!line.contains("\n"))
                #expect(line.contains("x.ctl"))
                // A slot count that is in range but disagrees with the offsets names the offset.
                if !(field == "slot_count" && bad == 5) {
                    #expect(line.contains(field) && line.contains("\(bad)"), "\(line)")
                }
            }
        }
    }

    @Test func shortOrForeignControlSegmentsAreRefused() throws {
        let scratch = try Scratch()
        let bytes = try controlBytes(slots: 2, scratch)
        #expect(check(Array(bytes.dropLast()), path: "x") == .failure(.tooSmall(path: "x", size: bytes.count - 1, needed: bytes.count)))
        var foreign = bytes
        foreign[0] = 0x41
        #expect(check(foreign, path: "x") == .failure(.badMagic(path: "x", found: 0x5443_5341)))
        #expect(check([0, 0, 0], path: "x") == .failure(.tooSmall(path: "x", size: 3, needed: 512)))
    }

    /// Issue 9 finding 1: one stream with a bad record offset no longer takes the monitor
    /// down; it is skipped with one warning and the other streams are listed.
    @Test func monitorSkipsABadStreamAndListsTheOthers() throws {
        let scratch = try Scratch()
        let good = try Producer(stream: "good", directory: scratch.directory)
        let bad = try Producer(stream: "bad", directory: scratch.directory)
        bad.ctl.pointee.slot_ctl_offset = 0xFFFF_FFFF
        let (streams, warnings) = StreamSnapshot.scan(in: scratch.directory)
        #expect(streams.map(\.name) == ["good"])
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("bad.ctl") == true && warnings.first?.contains("slot_ctl_offset is 4294967295") == true)
        for args in [["ls"], ["ls", "--json"], ["top", "-b", "-n", "1"]] {
            let (status, out, err) = try scratch.run(args)
            #expect(status == 0 && out.contains("good"), "\(args): \(err)")
            // The bad stream is named in exactly one warning line, not left out silently.
            #expect(err.split(separator: "\n").count == 1 && err.contains("bad.ctl"), "\(args): \(err)")
        }
        let (status, _, err) = try scratch.run(["inspect", "bad"])
        #expect(status == 1 && err.split(separator: "\n").count == 1 && err.contains("slot_ctl_offset"), "\(err)")
        bad.close()
        good.close()
    }

    /// Finding 2: a `latest` word naming a slot past the table is refused by monitors and consumers.
    @Test func latestPastTheSlotTableIsRefused() throws {
        let scratch = try Scratch()
        var options = ProducerOptions()
        options.slots = 2
        let producer = try Producer(stream: "late", options: options, directory: scratch.directory)
        let consumer = try Consumer(stream: "late", options: ConsumerOptions(mode: .live), directory: scratch.directory)
        try consumer.attach()
        try publishPattern(producer, FrameFormat(.gray8, width: 16, height: 16))
        fs_store_u64(&producer.ctl.pointee.latest, 1 << 8 | 200)
        #expect(scratch.snapshot("late")?.format == nil, "the monitor shows no format instead of reading slot 200")
        do {
            let frame = try consumer.next()
            _ = frame
            Issue.record("a frame was delivered from slot 200")
        } catch {
            #expect(error.description.contains("latest slot is 200"), "\(error)")
        }
        producer.close()
    }

    /// Finding 6: a FIFO in place of NAME.ctl is refused at once, not waited on.
    @Test func fifoInPlaceOfTheControlSegmentDoesNotHang() throws {
        let scratch = try Scratch()
        #expect(mkfifo(scratch.file("pipe.ctl"), 0o600) == 0)
        let (streams, warnings) = StreamSnapshot.scan(in: scratch.directory)
        #expect(streams.isEmpty)
        #expect(warnings.count == 1 && warnings[0].contains("not a regular file"), "\(warnings)")
        let consumer = try Consumer(stream: "pipe", directory: scratch.directory)
        #expect(throws: ConsumerError.segment(.notRegularFile(path: scratch.file("pipe.ctl")))) { try consumer.attach() }
        let (status, _, _) = try scratch.run(["inspect", "pipe"], timeout: 30)
        #expect(status != 0 && status < 128, "inspect exits with an error, not a signal or a hang")
    }

    /// A pool whose size is not a whole number of 64-byte-multiple slots (a truncation while
    /// nobody had it mapped) is refused: its slots' headers would be misaligned.
    @Test func poolOfTheWrongSizeIsRefused() throws {
        let scratch = try Scratch()
        let (producer, consumer) = try producerAndConsumer("odd", slots: 3, scratch)
        try publishPattern(producer, FrameFormat(.gray8, width: 64, height: 48))
        let path = scratch.file("odd.pool.1")
        let full = try #require(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int)
        #expect(truncate(path, off_t(full - 6102)) == 0)
        let snapshot = try #require(scratch.snapshot("odd"))
        #expect(snapshot.format == nil, "the monitor shows no format instead of reading a misaligned header")
        let consumer2 = try Consumer(stream: "odd", options: ConsumerOptions(mode: .live), directory: scratch.directory)
        do {
            _ = try consumer2.next()
            Issue.record("a frame was delivered from a damaged pool")
        } catch {
            #expect(error.description.contains("odd.pool.1") && error.description.contains("file size"), "\(error)")
        }
        _ = consumer
        producer.close()
    }

    /// Consumer entries whose mode or state is none of the protocol's are skipped with a warning.
    /// The control segment's rate pair is 0/0 (unknown) or both >= 1.
    @Test func ratePairIsChecked() throws {
        let scratch = try Scratch()
        var bytes = try controlBytes(slots: 2, scratch)
        func setRate(_ num: UInt64, _ den: UInt64) {
            bytes.withUnsafeMutableBytes {
                $0.storeBytes(of: num, toByteOffset: Int(FS_OFF_CONTROL_RATE_NUM), as: UInt64.self)
                $0.storeBytes(of: den, toByteOffset: Int(FS_OFF_CONTROL_RATE_DEN), as: UInt64.self)
            }
        }
        for (num, den) in [(0, 0), (30000, 1001), (1, 1)] as [(UInt64, UInt64)] {
            setRate(num, den)
            #expect(check(bytes) == .success(2))
        }
        for (num, den, field) in [(0, 1, "rate_num"), (25, 0, "rate_den")] as [(UInt64, UInt64, String)] {
            setRate(num, den)
            guard case .failure(let error) = check(bytes) else { Issue.record("\(num)/\(den) accepted"); continue }
            #expect(error.description.contains(field))
        }
    }

    /// An entry still registering (pid set, mode 0, FREE or CLAIMED) is shown as attaching.
    @Test func attachingEntryIsShownAsAttaching() throws {
        let scratch = try Scratch()
        let (producer, consumer) = try producerAndConsumer("attaching", slots: 2, scratch)
        let index = try #require(consumer.consumerIndex)
        let entry = producer.control.consumer(index)
        let (mode, state) = (entry.pointee.mode, entry.pointee.state)
        entry.pointee.mode = 0
        entry.pointee.state = FS_CONSUMER_CLAIMED
        let (snapshot, warnings) = try StreamSnapshot.inspect("attaching", in: scratch.directory)
        #expect(warnings.isEmpty)
        #expect(snapshot.consumers.map { [$0.mode, $0.state] } == [["-", "attaching"]])
        entry.pointee.mode = mode
        entry.pointee.state = state
        producer.close()
    }

    @Test func badConsumerEntriesAreSkipped() throws {
        let scratch = try Scratch()
        let (producer, consumer) = try producerAndConsumer("entries", slots: 2, scratch)
        let index = try #require(consumer.consumerIndex)
        producer.control.consumer(index).pointee.mode = 77
        let (snapshot, warnings) = try StreamSnapshot.inspect("entries", in: scratch.directory)
        #expect(snapshot.consumers.isEmpty)
        #expect(warnings.count == 1 && warnings[0].contains("mode 77"))
        producer.control.consumer(index).pointee.mode = FS_MODE_LOSSLESS
        producer.close()
    }
}

/// The frame-header validator: every reader reads only what a validated header allows.
@Suite struct FrameHeaderValidationTests {
    private let format = FrameFormat(.yuv420p, width: 100, height: 50)
    private var good: fs_frame { fs_frame(seq: 7, epoch: 1, format: format, description: FrameDescription()) }

    private func problem(_ h: fs_frame, slotBytes: Int? = nil) -> String? {
        do { try FrameHeader.validate(h, sequence: 7, slotBytes: slotBytes ?? format.slotBytes) } catch { return error.description }
        return nil
    }

    @Test func soundHeaderPasses() {
        #expect(problem(good) == nil)
        let bytes = withUnsafeBytes(of: good) { Array($0) }
        let accepted = bytes.withUnsafeBytes { b in
            (try? FrameHeader.validate(bytes: b, sequence: 7, slotBytes: format.slotBytes)) != nil
        }
        #expect(accepted)
    }

    /// Finding 3: stride and height at 0xffffffff are a bad frame, not an overflow trap.
    @Test func hugeStrideAndHeightAreRefused() {
        var h = good
        h.plane_stride.0 = 0xFFFF_FFFF
        #expect(problem(h) != nil)
        h = good
        h.height = 0xFFFF_FFFF
        #expect(problem(h)?.contains("height") == true)
        h = good
        h.plane_offset.2 = 0xFFFF_FFFF
        h.plane_size.2 = 0xFFFF_FFFF
        #expect(problem(h)?.contains("plane_size[2]") == true)
    }

    /// Finding 4: timestamps near Int64.max are rejected (so pts + duration cannot overflow downstream).
    @Test func extremeTimestampsAreRefused() {
        var h = good
        h.pts = Int64.max
        #expect(problem(h)?.contains("pts is 9223372036854775807") == true)
        h = good
        h.duration = Int64.max
        #expect(problem(h)?.contains("duration") == true)
        h = good
        h.duration = -1
        #expect(problem(h)?.contains("duration") == true)
        h = good
        h.pts = Int64.min   // FS_PTS_NONE: unknown, fine
        #expect(problem(h) == nil)
        h.pts = FrameHeader.timestampLimit
        h.duration = FrameHeader.timestampLimit
        #expect(problem(h) == nil)
    }

    /// Finding 5: the format name cannot make a reader run past a plane.
    @Test func formatNameMustAgreeWithTheCode() {
        func named(_ name: String, code: UInt32) -> fs_frame {
            var h = good
            h.pix_fmt = code
            writeCString(name, into: &h.pix_fmt_name)
            return h
        }
        // A known code with another name (rgba64le on an rgba frame) is refused.
        let rgba = FrameFormat(.rgba, width: 80, height: 72)
        var h = fs_frame(seq: 7, epoch: 1, format: rgba, description: FrameDescription())
        writeCString("rgba64le", into: &h.pix_fmt_name)
        #expect(problem(h, slotBytes: rgba.slotBytes)?.contains("pix_fmt") == true)
        // Code 0 with a name of the format table is invalid (v2, PROTOCOL.md 4.2): the
        // producer must write the code.
        #expect(problem(named("yuv420p", code: 0))?.contains("pix_fmt is 0") == true)
        #expect(problem(named("yuv420p", code: PixelFormat.yuv420p.rawValue)) == nil)
        // Code 0 with an unknown name: the planes stay bounded, and a reader with its own
        // geometry checks it against them.
        let other = named("yuv444p16le", code: 0)
        #expect(problem(other) == nil)
        let header = FrameHeader(other)
        #expect(header.plane(0, holds: 50, rowBytes: 128))
        #expect(!header.plane(0, holds: 50, rowBytes: 200), "yuv444p16le rows are 200 bytes: more than the stride")
        #expect(!header.plane(0, holds: Int.max, rowBytes: 1))
        // An unknown code is refused.
        #expect(problem(named("", code: 99))?.contains("pix_fmt is 99") == true)
    }

    /// v2: the time base is at least 1/1, field order and chroma location are FFmpeg's values.
    @Test func timeBaseFieldOrderAndChromaLocationAreChecked() {
        var h = good
        h.time_base_num = 0
        #expect(problem(h)?.contains("time_base_num is 0") == true)
        h = good
        h.time_base_den = -1
        #expect(problem(h)?.contains("time_base_den is -1") == true)
        h = good
        h.field_order = FS_FIELD_MAX + 1
        #expect(problem(h)?.contains("field_order is 6") == true)
        h.field_order = FS_FIELD_BB
        h.chroma_location = FS_CHROMA_MAX + 1
        #expect(problem(h)?.contains("chroma_location is 7") == true)
        h.chroma_location = FS_CHROMA_BOTTOM
        #expect(problem(h) == nil)
    }

    @Test func planeCountAndSequenceAreChecked() {
        var h = good
        h.plane_count = 0
        #expect(problem(h)?.contains("plane_count") == true)
        h.plane_count = 5
        #expect(problem(h)?.contains("plane_count") == true)
        h = good
        h.seq = 8
        #expect(problem(h)?.contains("seq") == true)
    }

    /// A consumer releases a frame whose header fails validation, counts it, throws one
    /// line, and goes on with the next frame.
    @Test func consumerSkipsABadFrameAndGoesOn() throws {
        let scratch = try Scratch()
        let (producer, consumer) = try producerAndConsumer("skip", slots: 4, scratch)
        let f = FrameFormat(.gray8, width: 32, height: 32)
        for _ in 0..<3 { try publishPattern(producer, f) }
        // Corrupt frame 2's header in the pool, through a mapping of our own.
        let pool = try Segment.open(scratch.file("skip.pool.1"), writable: true)
        let slotBytes = pool.size / 4
        let slot = try #require((0..<4).first { (pool.base + $0 * slotBytes).load(as: fs_frame.self).seq == 2 })
        (pool.base + slot * slotBytes).assumingMemoryBound(to: fs_frame.self).pointee.plane_stride.0 = 0xFFFF_FFFF
        let first = try nextFrame(consumer).sequence
        #expect(first == 1)
        do {
            _ = try consumer.next()
            Issue.record("frame 2 was delivered")
        } catch {
            #expect(error.description.contains("skip.pool.1") && error.description.contains("plane_stride[0] is 4294967295"), "\(error)")
            #expect(!error.description.contains("\n"))
        }
        let third = try nextFrame(consumer).sequence
        #expect(third == 3)
        #expect(consumer.badFrames == 1)
        #expect(consumer.heldFrames == 0, "the bad frame's slot was released")
        producer.close()
    }

    /// A slot whose `seq` was damaged in shared memory can never match the frame a lossless
    /// consumer expects. It skips to the next frame reserved for it and counts the lost one
    /// as missed, instead of waiting forever (and stalling the producer). A damaged value
    /// past what the producer published proves nothing and is not skipped to.
    @Test func losslessConsumerSkipsAFrameLostToADamagedSlot() throws {
        let scratch = try Scratch()
        let (producer, consumer) = try producerAndConsumer("lost", slots: 4, scratch)
        let f = FrameFormat(.gray8, width: 32, height: 32)
        for _ in 0..<3 { try publishPattern(producer, f) }
        let slot = try #require((0..<4).first { fs_control_slot(producer.ctl, UInt32($0)).pointee.seq == 2 })
        fs_control_slot(producer.ctl, UInt32(slot)).pointee.seq = 1000
        #expect(try nextFrame(consumer).sequence == 1)
        #expect(try nextFrame(consumer).sequence == 3)
        #expect(consumer.missed == 1)
        try publishPattern(producer, f)
        #expect(try nextFrame(consumer).sequence == 4)
        producer.close()
    }
}
