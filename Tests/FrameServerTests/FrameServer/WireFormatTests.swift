import CFrameServer
import Foundation
@testable import FrameServer
import Testing

/// The wire format against protocol/vectors/announcements.json, and the layout against the header.
@Suite struct WireFormatTests {
    struct Vector: Decodable {
        let name: String
        let hex: String
        let error: String?
        let kind: UInt16?
        let stream: String?
        let seq: UInt64?
        let slot: UInt32?
        let flags: UInt32?
        let epoch: UInt64?
        let capture_ns: UInt64?
        let pts: Int64?
        let publish_ns: UInt64?
    }

    static let vectors: [Vector] = {
        let url = repositoryRoot.appendingPathComponent("protocol/vectors/announcements.json")
        return (try? JSONDecoder().decode([Vector].self, from: Data(contentsOf: url))) ?? []
    }()

    static func bytes(_ hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var it = hex.makeIterator()
        while let a = it.next(), let b = it.next() { out.append(UInt8(String([a, b]), radix: 16)!) }
        return out
    }

    @Test func vectorsArePresent() {
        #expect(Self.vectors.filter { $0.error == nil }.count >= 5)
        #expect(Self.vectors.filter { $0.error != nil }.count >= 5)
        // Every check of PROTOCOL.md 5 has a vector, the version 1 message included.
        let errors = Set(Self.vectors.compactMap(\.error))
        #expect(errors == ["short", "bad-magic", "version", "kind", "name-len", "length", "name"])
        #expect(Self.vectors.contains { $0.name == "version-1" && $0.error == "version" })
        #expect(Self.vectors.contains { $0.name == "version-2" && $0.error == "version" })
    }

    @Test(arguments: vectors.filter { $0.error == nil }.map(\.name))
    func validVectorDecodesAndReencodes(_ name: String) throws {
        let v = try #require(Self.vectors.first { $0.name == name })
        let a = try Announcement(decoding: Self.bytes(v.hex))
        #expect(a.kind.rawValue == v.kind)
        #expect(a.stream == v.stream)
        #expect(a.sequence == v.seq)
        #expect(a.slot == v.slot)
        #expect(a.flags.rawValue == v.flags)
        #expect(a.epoch == v.epoch)
        #expect(a.captureNanos == v.capture_ns)
        #expect(a.pts == v.pts)
        #expect(a.publishNanos == v.publish_ns)
        #expect(a.bytes == Self.bytes(v.hex), "re-encoding \(name) must give the vector's bytes")
    }

    @Test(arguments: vectors.filter { $0.error != nil }.map(\.name))
    func invalidVectorIsRejectedForTheStatedReason(_ name: String) throws {
        let v = try #require(Self.vectors.first { $0.name == name })
        do {
            _ = try Announcement(decoding: Self.bytes(v.hex))
            Issue.record("\(name) decoded, but it is invalid (\(v.error!))")
        } catch {
            switch (v.error!, error) {
            case ("bad-magic", .badMagic): break
            case ("version", .versionMismatch(let found)):
                let old = try #require(UInt32(name.dropFirst("version-".count)), "a version vector is named version-N")
                #expect(found == old && old < FS_PROTOCOL_VERSION)
                #expect(error.description.contains("version \(FS_PROTOCOL_VERSION)") && error.description.contains("version \(old)"))
            case ("short", .tooShort): #expect(error.description.contains("shorter"))
            case ("length", .lengthMismatch): #expect(error.description.contains("length"))
            case ("kind", .unknownKind): #expect(error.description.contains("kind"))
            case ("name-len", .nameLength): #expect(error.description.contains("name-len") && !error.description.contains("does not match"))
            case ("name", .badNameByte): #expect(error.description.contains("name has a byte"))
            default: Issue.record("\(name): expected \(v.error!), got \(error)")
            }
        }
    }

    @Test func swiftSeesTheHeaderLayout() {
        #expect(MemoryLayout<fs_control>.size == 512)
        #expect(MemoryLayout<fs_slot_ctl>.size == 64)
        #expect(MemoryLayout<fs_consumer>.size == 1280)
        #expect(MemoryLayout<fs_frame>.size == 256)
        #expect(MemoryLayout<fs_announce>.size == 64)
        #expect(MemoryLayout<fs_control>.offset(of: \.latest) == Int(FS_OFF_CONTROL_LATEST))
        #expect(MemoryLayout<fs_control>.offset(of: \.wake) == Int(FS_OFF_CONTROL_WAKE))
        #expect(MemoryLayout<fs_frame>.offset(of: \.capture_ns) == Int(FS_OFF_FRAME_CAPTURE_NS))
        #expect(MemoryLayout<fs_consumer>.offset(of: \.first_seq) == Int(FS_OFF_CONSUMER_FIRST_SEQ))
        #expect(MemoryLayout<fs_control>.offset(of: \.rate_num) == Int(FS_OFF_CONTROL_RATE_NUM))
        #expect(MemoryLayout<fs_control>.offset(of: \.rate_den) == Int(FS_OFF_CONTROL_RATE_DEN))
        #expect(MemoryLayout<fs_control>.offset(of: \.frame_wake) == Int(FS_OFF_CONTROL_FRAME_WAKE))
        #expect(MemoryLayout<fs_control>.offset(of: \.sleepers) == Int(FS_OFF_CONTROL_SLEEPERS))
        #expect(MemoryLayout<fs_frame>.offset(of: \.field_order) == Int(FS_OFF_FRAME_FIELD_ORDER))
        #expect(MemoryLayout<fs_frame>.offset(of: \.chroma_location) == Int(FS_OFF_FRAME_CHROMA_LOCATION))
    }

    @Test(arguments: PixelFormat.allCases)
    func planeLayoutIsAlignedAndFits(_ f: PixelFormat) {
        let format = FrameFormat(f, width: 321, height: 241)
        var end = FrameFormat.headerSize
        for i in f.planes.indices {
            #expect(format.planeOffset(i) % FrameFormat.strideAlignment == 0)
            #expect(format.stride(plane: i) % FrameFormat.strideAlignment == 0)
            #expect(format.stride(plane: i) >= format.rowBytes(plane: i))
            #expect(format.planeOffset(i) >= end, "planes must not overlap")
            end = format.planeOffset(i) + format.stride(plane: i) * format.rows(plane: i)
        }
        #expect(format.slotBytes == end)
    }
}
