// libFuzzer target: the control-segment validator.
//
// Input: the bytes of a `NAME.ctl` file. Oracle: whatever `ControlSegment.validate` accepts, a
// consumer may then address every slot record and every consumer record through the header's
// offsets (PROTOCOL.md 4.1: "MUST check that the records lie inside the file"), with the 8-byte
// alignment their atomics need (a split-lock atomic can SIGBUS), so an accepted file that breaks
// that is a crash. The validator is pure (it reads only the bytes given), so no file is mapped.
import CFrameServer
@testable import FrameServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzControl(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: count)
    // -- The validator under test. --
    guard let slots = try? ControlSegment.validate(bytes, path: "fuzz.ctl") else { return 0 }
    checkAccepted(bytes, slots: slots)
    return 0
}

/// The records an accepted segment promises, checked with overflow-free arithmetic.
func checkAccepted(_ bytes: UnsafeRawBufferPointer, slots: Int) {
    let c = bytes.loadUnaligned(as: fs_control.self)
    guard slots == Int(c.slot_count), (1...Int(FS_MAX_SLOTS)).contains(slots) else {
        fatalError("validator returned \(slots) slots for slot_count \(c.slot_count)")
    }
    func table(_ what: String, offset: UInt32, count: UInt32, size: Int) {
        let start = Int(offset), length = Int(count) * size
        guard start >= MemoryLayout<fs_control>.size, start % 8 == 0, start + length <= bytes.count else {
            fatalError("validator accepted \(what) at offset \(offset) x \(count) in a \(bytes.count)-byte file")
        }
    }
    table("slot records", offset: c.slot_ctl_offset, count: c.slot_count, size: MemoryLayout<fs_slot_ctl>.size)
    table("consumer records", offset: c.consumer_offset, count: c.max_consumers, size: MemoryLayout<fs_consumer>.size)
}
