import Foundation
import Glibc

/// A fresh folder under /dev/shm (mode 0700, from mkdtemp), removed with its contents at the end:
/// the tests' one temporary-directory helper (Scratch, a runtime directory, is one of these).
/// FrameMediaTests compiles this same file (its Support/TemporaryFolder.swift is a link to it).
final class TemporaryFolder {
    let path: String

    init(_ prefix: String = "framesrv-tmp") {
        var template = Array("/dev/shm/\(prefix)-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// The path of `name` in the folder.
    func file(_ name: String) -> String { path + "/" + name }
}
