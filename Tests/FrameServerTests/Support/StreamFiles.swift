import CFrameServer
import Foundation
import Glibc

/// One stream's files in a runtime directory, read and written with pread/pwrite and never
/// mapped, so that a damaged file cannot bring down the test process itself.
struct StreamFiles: Sendable {
    let directory: String
    let name: String

    var control: String { "\(directory)/\(name).ctl" }
    func pool(epoch: UInt64) -> String { "\(directory)/\(name).pool.\(epoch)" }

    /// The pool of the control segment's current epoch (nil if the control segment cannot say).
    var currentPool: String? { read(SharedLayout.field(.control, "epoch")).map { pool(epoch: $0) } }

    /// Where record `index` of `structure` starts in its file, read from the control
    /// segment's own offsets and strides.
    func recordBase(_ structure: SharedStructure, index: Int) -> Int? {
        switch structure {
        case .control: return 0
        case .slot:
            return read(SharedLayout.field(.control, "slot_ctl_offset")).map { Int($0) + index * structure.size }
        case .consumer:
            return read(SharedLayout.field(.control, "consumer_offset")).map { Int($0) + index * structure.size }
        case .frame:
            return read(SharedLayout.field(.control, "slot_stride")).map { Int($0) * index }
        }
    }

    /// The file a structure's records live in.
    func file(of structure: SharedStructure) -> String? { structure == .frame ? currentPool : control }

    /// An integer field of record `index` (little-endian, as on every machine framesrv runs on).
    func read(_ field: SharedField, index: Int = 0) -> UInt64? {
        guard let path = file(of: field.structure), let base = recordBase(field.structure, index: index) else { return nil }
        return readBytes(path, at: base + field.offset, count: field.size).map { bytes in
            bytes.enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
        }
    }

    /// The slot of the newest frame (the one monitors and snapshots look at), 0 if none.
    var latestSlot: Int {
        guard let latest = read(SharedLayout.field(.control, "latest")), latest != 0,
              let count = read(SharedLayout.field(.control, "slot_count")), latest & 0xff < count else { return 0 }
        return Int(latest & 0xff)
    }

    /// Consumer entries in state FS_CONSUMER_ACTIVE that have been handed at least one frame.
    var deliveringConsumers: Int {
        let state = SharedLayout.field(.consumer, "state"), delivered = SharedLayout.field(.consumer, "delivered")
        let size = SharedStructure.consumer.size
        guard let base = recordBase(.consumer, index: 0),
              let table = readBytes(control, at: base, count: Int(FS_MAX_CONSUMERS) * size) else { return 0 }
        func word(_ at: Int, _ width: Int) -> UInt64 {
            (0..<width).reduce(0) { $0 | UInt64(table[at + $1]) << (8 * UInt64($1)) }
        }
        return stride(from: 0, to: table.count - size + 1, by: size).filter {
            word($0 + state.offset, state.size) == FS_CONSUMER_ACTIVE && word($0 + delivered.offset, delivered.size) > 0
        }.count
    }

    /// Frames published so far (nil if the control segment is unreadable).
    var published: UInt64? { read(SharedLayout.field(.control, "published")) }

    /// Removes every file of the stream (control segment, pools, socket, lock, temporaries).
    func remove() {
        let prefix = name + "."
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where entry.hasPrefix(prefix) {
            unlink("\(directory)/\(entry)")
        }
    }

    /// The whole contents of every file of the stream, to put back later with `restore`.
    func save() -> [String: [UInt8]] {
        var files: [String: [UInt8]] = [:]
        let prefix = name + "."
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [] where entry.hasPrefix(prefix) {
            let path = "\(directory)/\(entry)"
            var st = stat()
            guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { continue }
            if let bytes = readBytes(path, at: 0, count: Int(st.st_size)) { files[entry] = bytes }
        }
        return files
    }

    /// Replaces the stream's files with `saved` (what `save` returned).
    func restore(_ saved: [String: [UInt8]]) {
        remove()
        for (entry, bytes) in saved {
            let fd = open("\(directory)/\(entry)", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard fd >= 0 else { continue }
            _ = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
            close(fd)
        }
    }
}

/// `count` bytes of `path` from `offset` (fewer at the end of the file); nil if it cannot be read.
func readBytes(_ path: String, at offset: Int, count: Int) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
    var bytes = [UInt8](repeating: 0, count: count)
    let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
    guard n >= 0 else { return nil }
    return Array(bytes.prefix(n))
}

/// Writes `bytes` into the existing regular file `path` at `offset`; false if it cannot.
@discardableResult
func writeBytes(_ bytes: [UInt8], to path: String, at offset: Int) -> Bool {
    let fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) } == bytes.count
}

/// The size of the regular file `path`, nil if it is not one.
func regularFileSize(_ path: String) -> Int? {
    var st = stat()
    guard lstat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
    return Int(st.st_size)
}
