import Foundation
import Glibc

/// A fresh folder under /dev/shm (mode 0700, from mkdtemp), removed with its contents at the end.
final class TemporaryFolder {
    let path: String

    init(_ prefix: String = "framesrv-tmp") {
        var template = Array("/dev/shm/\(prefix)-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }
}
