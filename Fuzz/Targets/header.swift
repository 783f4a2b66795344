// libFuzzer target: the frame-header validator.
//
// Input: a slot's 256-byte `fs_frame` header (zero-padded when shorter), then optionally the
// slot's size in bytes as a little-endian u32 (default 16 MiB). Oracle: a header the validator
// accepts can be read the way every consumer reads it, planes at their offsets and rows at
// their strides, without one byte outside the slot; an accepted header that breaks that is a crash.
import CFrameServer
@testable import FrameServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzHeader(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let (raw, slotBytes) = parse(UnsafeRawBufferPointer(start: data, count: count))
    // -- The validator under test, for the kind of stream the header claims (PROTOCOL.md 4.6). --
    let media = MediaKind(rawValue: raw.media) ?? .video
    guard (try? FrameHeader.validate(raw, sequence: raw.seq, slotBytes: slotBytes, media: media)) != nil else { return 0 }
    checkAccepted(FrameHeader(raw), slotBytes: slotBytes)
    return 0
}

func parse(_ bytes: UnsafeRawBufferPointer) -> (fs_frame, Int) {
    var raw = fs_frame()
    withUnsafeMutableBytes(of: &raw) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes.prefix(256))) }
    let headerSize = MemoryLayout<fs_frame>.size
    guard bytes.count >= headerSize + 4 else { return (raw, 16 << 20) }
    return (raw, Int(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: headerSize, as: UInt32.self))))
}

/// What a consumer reads of an accepted header stays inside the slot.
func checkAccepted(_ h: FrameHeader, slotBytes: Int) {
    for i in 0..<h.planeCount {
        let (end, overflow) = h.offset(plane: i).addingReportingOverflow(h.size(plane: i))
        guard !overflow, h.offset(plane: i) >= MemoryLayout<fs_frame>.size, end <= slotBytes else {
            fatalError("validator accepted plane \(i) at \(h.offset(plane: i))+\(h.size(plane: i)) in a \(slotBytes)-byte slot")
        }
    }
    _ = h.description
    if let audio = h.audioFormat {
        // Sample rows: one per channel (planar) or one (packed), rowBytes each, at the stride.
        guard let rowBytes = audio.rowBytes, h.plane(0, holds: audio.rows, rowBytes: rowBytes) else {
            fatalError("validator accepted an audio frame whose \(audio.rows) rows do not fit its plane (\(audio))")
        }
        return
    }
    guard let format = h.format else { return }
    for i in 0..<h.planeCount {
        let rows = format.rows(plane: i), stride = h.stride(plane: i), rowBytes = format.rowBytes(plane: i)
        guard rows > 0 else { continue }   // nothing of this plane is read
        let (lastRow, o1) = stride.multipliedReportingOverflow(by: rows - 1)
        let (needed, o2) = lastRow.addingReportingOverflow(rowBytes)
        guard !o1, !o2, stride >= rowBytes, needed <= h.size(plane: i) else {
            fatalError("validator accepted plane \(i): \(rows) rows of \(rowBytes) bytes at stride \(stride) in \(h.size(plane: i)) bytes")
        }
    }
}
