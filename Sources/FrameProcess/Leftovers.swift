import FrameServer
import Glibc

/// The processes a supervisor's stages leave behind, found and stopped as systemd stops a
/// unit's and tini its container's: SIGTERM (with SIGCONT, for a stopped one), then SIGKILL
/// to what is still there after a grace time, again until none is left.
///
/// What counts: a process in one of `groups` (the stages' process groups), one whose
/// environment has `mark` (set in every stage's, so inherited by their children, even one
/// that called setsid), everything below one of those, and, when this process adopts
/// orphans (`Orphans.adopt()`, whence they stay below it), every process below it. Below
/// `root` only, or anywhere when it is nil (a guard, once the supervisor is gone).
public struct Leftovers: Sendable {
    public let mark: String
    public let groups: Set<pid_t>
    public let root: pid_t?
    /// Every process below `root`, marked or not.
    public let everything: Bool
    /// Never stopped (a guard watching this supervisor).
    public let spared: Set<pid_t>

    public init(mark: String, groups: Set<pid_t>, root: pid_t?, everything: Bool = false, spared: Set<pid_t> = []) {
        self.mark = mark; self.groups = groups; self.root = root; self.everything = everything; self.spared = spared
    }

    /// The live processes that count (no zombie: it has exited already).
    public func find() -> [ProcessEntry] {
        let me = getpid()
        let table = ProcessTable.scan().filter { !$0.isZombie && $0.pid != me && !spared.contains($0.pid) }
        let candidates = root.map { ProcessTable.descendants(of: $0, in: table) } ?? table
        if everything { return candidates }
        let chosen = candidates.filter { groups.contains($0.group) || $0.environmentContains(mark) }
        var found = Set(chosen)
        for entry in chosen { found.formUnion(ProcessTable.descendants(of: entry.pid, in: candidates)) }
        return Array(found)
    }

    /// Stops every process that counts: SIGTERM, SIGKILL to those still running
    /// `graceSeconds` later (at once for 0), and again for any started meanwhile, for
    /// `rounds` at most. Returns how many it signalled.
    @discardableResult
    public func stop(graceSeconds: Double, rounds: Int = 10) -> Int {
        var signalled = Set<ProcessEntry>()
        if graceSeconds > 0 {
            let handles = find().compactMap(ProcessHandle.init)
            for h in handles { h.signal(SIGTERM); h.signal(SIGCONT) }
            ProcessHandle.waitForExit(handles, seconds: graceSeconds)
            signalled.formUnion(handles.map(\.entry))
        }
        for _ in 0..<rounds {
            Orphans.reap()
            let handles = find().compactMap(ProcessHandle.init)
            if handles.isEmpty { break }
            for h in handles { h.signal(SIGKILL) }
            ProcessHandle.waitForExit(handles, seconds: 1)
            signalled.formUnion(handles.map(\.entry))
        }
        Orphans.reap()
        return signalled.count
    }
}

/// A process to signal, pinned by a pidfd: a pid reused after its exit is never signalled
/// (the start time is checked once the descriptor is open).
///
/// The corresponding C functions are `pidfd_open` and `pidfd_send_signal` (glibc 2.36,
/// called through their addresses; without them, `kill` after a start time check).
final class ProcessHandle {
    let entry: ProcessEntry
    private let fd: Int32

    init?(_ entry: ProcessEntry) {
        self.entry = entry
        fd = pidfdOpen.map { $0(entry.pid, 0) } ?? -1
        guard ProcessEntry.read(entry.pid)?.startTime == entry.startTime else {
            if fd >= 0 { close(fd) }
            return nil
        }
    }

    deinit { if fd >= 0 { close(fd) } }

    func signal(_ signal: Int32) {
        if fd >= 0, let send = pidfdSendSignal { _ = send(fd, signal, nil, 0) }
        else if ProcessEntry.read(entry.pid)?.startTime == entry.startTime { _ = kill(entry.pid, signal) }
    }

    /// Whether it has exited (a zombie has).
    var exited: Bool {
        if fd >= 0 { return pollReadable([fd], timeoutMillis: 0) != nil }
        return ProcessEntry.read(entry.pid).map { $0.startTime != entry.startTime || $0.isZombie } ?? true
    }

    /// Waits until every one of `handles` has exited, for `seconds` at most.
    static func waitForExit(_ handles: [ProcessHandle], seconds: Double) {
        let deadline = monotonicNanos() + UInt64(seconds * 1e9)
        var left = handles
        while case let running = left.filter({ !$0.exited }), !running.isEmpty, monotonicNanos() < deadline {
            left = running
            Orphans.reap()
            usleep(10_000)
        }
    }
}

private let pidfdOpen: (@convention(c) (pid_t, UInt32) -> Int32)? = {
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pidfd_open") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (pid_t, UInt32) -> Int32).self)
}()

private let pidfdSendSignal: (@convention(c) (Int32, Int32, UnsafeMutableRawPointer?, UInt32) -> Int32)? = {
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "pidfd_send_signal") else { return nil }
    return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32, UnsafeMutableRawPointer?, UInt32) -> Int32).self)
}()
