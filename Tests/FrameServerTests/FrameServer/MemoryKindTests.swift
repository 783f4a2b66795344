import CFrameServer
import Foundation
@testable import FrameServer
import Glibc
import Testing

/// Memory kinds (PROTOCOL.md 4.5) on the host side: the control segment's `memory` and
/// `fence_offset` are validated like every other field, and a host consumer meeting a CUDA
/// stream is refused in one line before it claims an entry. (The CUDA path itself runs on a
/// GPU: `make test-gpu`.)
@Suite struct MemoryKindTests {
    static let uuid: [UInt8] = [0x3f, 0x1c, 0x2a, 0x09, 0x51, 0x77, 0x40, 0x0e, 0x9a, 0x1b, 0x00, 0xc4, 0xd2, 0x5e, 0x6f, 0x80]
    static let deviceName = "GPU-3f1c2a09-5177-400e-9a1b-00c4d25e6f80"

    private func layout(_ bytes: [UInt8]) -> Result<StreamMemory, SegmentError> {
        bytes.withUnsafeBytes { b in
            do throws(SegmentError) { return .success(try ControlSegment.validateLayout(b, path: "m.ctl").memory) } catch { return .failure(error) }
        }
    }

    /// A producer's control segment, as bytes, of `slots` slots.
    private func hostSegment(slots: UInt32, _ scratch: Scratch) throws -> [UInt8] {
        var options = ProducerOptions()
        options.slots = Int(slots)
        let producer = try Producer(stream: "m", options: options, directory: scratch.directory)
        defer { producer.close() }
        return Array(UnsafeRawBufferPointer(start: producer.ctl, count: ControlSegment.requiredSize(slotCount: slots)))
    }

    /// Makes `ctl` (mapped) say CUDA memory on `uuid`, with its fence table at the right place.
    static func markCUDA(_ ctl: UnsafeMutablePointer<fs_control>) {
        ctl.pointee.memory = FS_MEMORY_CUDA
        ctl.pointee.fence_offset = UInt32(fs_control_fence_offset(ctl.pointee.slot_count))
        withUnsafeMutableBytes(of: &ctl.pointee.device_uuid) { $0.copyBytes(from: uuid) }
    }

    @Test func memoryAndFenceOffsetAreValidated() throws {
        let scratch = try Scratch()
        let host = try hostSegment(slots: 4, scratch)
        #expect(layout(host) == .success(.host))
        func with(_ bytes: [UInt8], _ offset: Int32, _ value: UInt32) -> [UInt8] {
            var b = bytes
            b.withUnsafeMutableBytes { $0.storeBytes(of: value, toByteOffset: Int(offset), as: UInt32.self) }
            return b
        }
        // An unknown kind, and a host stream that claims a fence table: bad fields, named.
        #expect(layout(with(host, FS_OFF_CONTROL_MEMORY, 2))
                == .failure(.badField(path: "m.ctl", field: "memory", value: 2, expected: "0 (host) or 1 (cuda)")))
        guard case .failure(.badField(_, "fence_offset", 4096, _)) = layout(with(host, FS_OFF_CONTROL_FENCE_OFFSET, 4096)) else {
            Issue.record("a host stream with a fence_offset was accepted"); return
        }
        // CUDA: the fence table right after the consumer table, and inside the file.
        let fences = UInt32(fs_control_fence_offset(4))
        var cuda = with(with(host, FS_OFF_CONTROL_MEMORY, FS_MEMORY_CUDA), FS_OFF_CONTROL_FENCE_OFFSET, fences)
        cuda.replaceSubrange(Int(FS_OFF_CONTROL_DEVICE_UUID)..<Int(FS_OFF_CONTROL_DEVICE_UUID) + 16, with: Self.uuid)
        #expect(layout(cuda) == .failure(.tooSmall(path: "m.ctl", size: host.count, needed: fs_control_size_cuda(4))))
        cuda += [UInt8](repeating: 0, count: 4 * MemoryLayout<fs_slot_fence>.size)
        #expect(layout(cuda) == .success(.cuda(device: Self.deviceName)))
        guard case .failure(.badField(_, "fence_offset", _, _)) = layout(with(cuda, FS_OFF_CONTROL_FENCE_OFFSET, fences + 64)) else {
            Issue.record("a misplaced fence table was accepted"); return
        }
    }

    /// `sink` of a CUDA stream: one line naming the stream, the device and what reads it; no
    /// entry claimed. Monitors show the kind and the device.
    @Test func hostConsumerOfACUDAStreamIsOneLine() throws {
        let scratch = try Scratch()
        let producer = try Producer(stream: "gpu", directory: scratch.directory)
        defer { producer.close() }
        Self.markCUDA(producer.ctl)
        #expect(truncate(scratch.file("gpu.ctl"), off_t(fs_control_size_cuda(producer.ctl.pointee.slot_count))) == 0)
        let sink = try scratch.run(["sink", "--in", "gpu", "--null", "--wait", "5"], timeout: 20)
        #expect(sink.status != 0)
        let lines = sink.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("stream 'gpu'") && lines[0].contains(Self.deviceName)
                && lines[0].contains("CUDA consumer"), "\(sink.stderr)")
        let inspect = try scratch.run(["inspect", "gpu"])
        #expect(inspect.status == 0 && inspect.stdout.contains("on CUDA device \(Self.deviceName)"), "\(inspect.stdout)\(inspect.stderr)")
        #expect(inspect.stdout.contains("consumers:\n    none"), "the refused sink claimed an entry:\n\(inspect.stdout)")
        let json = try scratch.run(["ls", "--json"])
        #expect(json.stdout.contains("\"memory\":\"cuda\"") && json.stdout.contains("\"device\":\"\(Self.deviceName)\""), "\(json.stdout)")
    }

    @Test func deviceNamesAreNvidiaSmis() {
        #expect(StreamMemory.deviceName(Self.uuid) == Self.deviceName)
        #expect(StreamMemory.deviceName([UInt8](repeating: 0, count: 16)) == "GPU-00000000-0000-0000-0000-000000000000")
    }
}
