import Glibc
import Synchronization

/// A process this one started, known by its pid until it is reaped, and how it ended.
///
/// Its end is its exit, seen by `waitpid`: no pipe or socket stands for it, so a child of
/// its own that keeps an inherited descriptor open does not keep it "running" (Foundation's
/// `Process` learns of the exit through a socket the child inherits, and never does then).
public final class ChildProcess: Sendable {
    public let processIdentifier: pid_t
    /// The raw `waitpid` status, once reaped (here or by `Orphans.reap`).
    private let ended = Mutex<Int32?>(nil)

    init(_ pid: pid_t) {
        processIdentifier = pid
        // Reaped by Orphans.reap on another thread between its start and now: the status waits here.
        let early = children.withLock { table in
            table.children[pid] = WeakChild(self)
            return table.unclaimed.removeValue(forKey: pid)
        }
        if let early { record(early) }
    }

    deinit { _ = children.withLock { $0.children.removeValue(forKey: processIdentifier) } }

    /// Whether the process has not exited (or has, and is not reaped yet: one look reaps it).
    public var isRunning: Bool { status == nil }

    /// Waits until the process has exited and is reaped.
    public func waitUntilExit() {
        while status == nil {
            var raw: Int32 = 0
            // Blocking, outside the lock; another thread (or Orphans.reap) may reap it first.
            let r = waitpid(processIdentifier, &raw, 0)
            if r == processIdentifier { record(raw) } else if r < 0, errno == ECHILD { usleep(1_000) }
        }
    }

    /// The exit code, or the number of the signal that ended it; nil while it runs.
    public var terminationStatus: Int32? {
        guard let raw = status else { return nil }
        return raw & 0x7f == 0 ? (raw >> 8) & 0xff : raw & 0x7f
    }

    /// The signal that ended it; nil while it runs or when it exited.
    public var terminatingSignal: Int32? {
        guard let raw = status, raw & 0x7f != 0 else { return nil }
        return raw & 0x7f
    }

    /// The raw status once reaped, reaping it (without waiting) if it has exited.
    private var status: Int32? {
        ended.withLock { ended in
            if let ended { return ended }
            var raw: Int32 = 0
            var r: pid_t
            repeat { r = waitpid(processIdentifier, &raw, WNOHANG) } while r < 0 && errno == EINTR
            if r == processIdentifier { ended = raw }
            return ended
        }
    }

    func record(_ raw: Int32) { ended.withLock { if $0 == nil { $0 = raw } } }
}

/// The processes that `ChildProcess` objects stand for, by pid: what `Orphans.reap` hands a
/// status to when it reaps one of them; and the last statuses of pids it reaped that no
/// `ChildProcess` claimed (yet: one started on another thread may claim its own).
let children = Mutex<ChildTable>(ChildTable())

struct ChildTable {
    var children: [pid_t: WeakChild] = [:]
    var unclaimed: [pid_t: Int32] = [:]
}

struct WeakChild: @unchecked Sendable {
    weak var child: ChildProcess?
    init(_ child: ChildProcess) { self.child = child }
}

/// `prctl` with one argument, through its address (Swift does not import variadic C functions).
func prctl(_ option: Int32, _ argument: UInt) -> Int32 {
    typealias Prctl = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "prctl") else { return -1 }
    return unsafeBitCast(symbol, to: Prctl.self)(option, argument, 0, 0, 0)
}
