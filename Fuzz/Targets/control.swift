// libFuzzer target: the control-segment validator.
//
// Input: the bytes of a `NAME.ctl` file. They are written to a scratch file and mapped as a
// consumer maps them. Oracle: whatever the validator accepts, a consumer may then address
// every slot record and every consumer record through the header's offsets (PROTOCOL.md 4.1:
// "MUST check that the records lie inside the file"), with the 8-byte alignment their atomics
// need (a split-lock atomic can SIGBUS), so an accepted file that breaks that is a crash.
import CFrameServer
import Glibc
@testable import FrameServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzControl(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    guard let control = mapped(UnsafeRawBufferPointer(start: data, count: count)) else { return 0 }
    // -- The validator under test: adapt these lines when it changes. --
    do { try Attachment.validateControl(control) } catch { return 0 }
    checkAccepted(UnsafeRawBufferPointer(start: control.base, count: control.size))
    return 0
}

/// The records an accepted segment promises, checked with overflow-free arithmetic.
func checkAccepted(_ bytes: UnsafeRawBufferPointer) {
    let c = bytes.loadUnaligned(as: fs_control.self)
    func table(_ what: String, offset: UInt32, count: UInt32, size: Int) {
        let start = Int(offset), length = Int(count) * size
        guard start >= MemoryLayout<fs_control>.size, start % 8 == 0, start + length <= bytes.count else {
            fatalError("validator accepted \(what) at offset \(offset) x \(count) in a \(bytes.count)-byte file")
        }
    }
    table("slot records", offset: c.slot_ctl_offset, count: c.slot_count, size: MemoryLayout<fs_slot_ctl>.size)
    table("consumer records", offset: c.consumer_offset, count: c.max_consumers, size: MemoryLayout<fs_consumer>.size)
}

/// The input as a mapped file, the way a consumer maps `NAME.ctl` (one scratch file per process,
/// unlinked at once and reached through /proc/self/fd, so a crash leaves nothing in /dev/shm).
func mapped(_ bytes: UnsafeRawBufferPointer) -> MappedFile? {
    guard ftruncate(scratch.fd, 0) == 0, bytes.isEmpty || pwrite(scratch.fd, bytes.baseAddress, bytes.count, 0) == bytes.count
    else { fatalError("cannot write the scratch file \(scratch.path)") }
    return try? MappedFile.openExisting(scratch.path, writable: true)
}

let scratch: (path: String, fd: Int32) = {
    let name = "/dev/shm/fuzz-control-\(getpid()).ctl"
    let fd = open(name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { fatalError("cannot create \(name)") }
    unlink(name)
    return ("/proc/self/fd/\(fd)", fd)
}()
