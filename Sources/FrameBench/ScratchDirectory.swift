import FoundationEssentials
import Glibc

/// A private runtime directory under /dev/shm, removed with everything in it on deinit.
final class ScratchDirectory {
    let path: String
    init(prefix: String) {
        var template = Array("/dev/shm/\(prefix)-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}
