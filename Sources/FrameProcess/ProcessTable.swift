import FoundationEssentials
import Glibc

/// One process as `/proc/PID/stat` shows it.
public struct ProcessEntry: Hashable, Sendable {
    public let pid: pid_t
    public let parent: pid_t
    public let group: pid_t
    /// R, S, D, Z, T, ... (a zombie, Z, has exited and waits for its parent to reap it).
    public let state: UInt8
    /// In clock ticks since boot: with the pid, names the process whatever reuses the pid later.
    public let startTime: UInt64

    public var isZombie: Bool { state == UInt8(ascii: "Z") || state == UInt8(ascii: "X") }

    /// The entry of process `pid`, nil when there is none.
    public static func read(_ pid: pid_t) -> ProcessEntry? {
        guard let text = readSmallFile("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
        // After "pid (comm)": state ppid pgrp session tty_nr tpgid flags ... starttime (field 22).
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 19, let state = fields[0].utf8.first, let parent = pid_t(fields[1]), let group = pid_t(fields[2]),
              let start = UInt64(fields[19]) else { return nil }
        return ProcessEntry(pid: pid, parent: parent, group: group, state: state, startTime: start)
    }

    /// Whether the process's environment has `entry` ("KEY=value") as it is now; false when
    /// it cannot be read (another user's, or gone). A process inherits its parent's
    /// environment, so a mark set in a stage's is found in its own children too.
    public func environmentContains(_ entry: String) -> Bool {
        guard let bytes = readSmallFile("/proc/\(pid)/environ", limit: 1 << 20) else { return false }
        return bytes.split(separator: "\0").contains { $0 == entry }
    }
}

/// Every process on the machine, as `/proc` lists them (threads are not processes here).
public enum ProcessTable {
    public static func scan() -> [ProcessEntry] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return names.compactMap { pid_t($0).flatMap(ProcessEntry.read) }
    }

    /// The processes of `table` below `root` (children, their children, ...), not `root` itself.
    public static func descendants(of root: pid_t, in table: [ProcessEntry]) -> [ProcessEntry] {
        let children = Dictionary(grouping: table, by: \.parent)
        var found: [ProcessEntry] = [], next = [root]
        while let pid = next.popLast() {
            for child in children[pid] ?? [] where child.pid != root {
                found.append(child)
                next.append(child.pid)
            }
        }
        return found
    }
}

/// A small text file read whole (a /proc file: its size says 0, so read until the end).
package func readSmallFile(_ path: String, limit: Int = 65536) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while bytes.count < limit {
        let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
        if n < 0, errno == EINTR { continue }
        guard n > 0 else { break }
        bytes += buffer[..<n]
    }
    return String(decoding: bytes, as: UTF8.self)
}
