// libFuzzer target: the announcement decoder.
//
// Input: one ZeroMQ message as it arrives on a stream's SUB socket. Oracle: whatever decodes
// re-encodes to a message that decodes to the same announcement.
@testable import FrameServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzAnnouncement(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    // -- The decoder under test: adapt these lines when it changes. --
    guard let a = try? Announcement(decoding: UnsafeRawBufferPointer(start: data, count: count)) else { return 0 }
    guard a.stream.utf8.count <= Int(UInt16.max) else { return 0 }   // encode stores name_len as u16
    guard let again = try? Announcement(decoding: a.bytes), again == a else {
        fatalError("announcement \(a) does not survive encode + decode")
    }
    return 0
}
