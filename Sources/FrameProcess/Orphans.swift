import Glibc
import Synchronization

/// Orphaned descendants, adopted: a process that supervises every process below it (framesrv
/// run) becomes their reaper, so that a stage's own children, even one that left the stage's
/// process group or session (setsid), stay below it when the stage exits, where
/// `ProcessTable` finds them, instead of moving to init.
public enum Orphans {
    private static let adopting = Atomic<Bool>(false)

    /// Makes this process the reaper of its orphaned descendants; false if the kernel refused
    /// (then they go to init as before). Only for a process whose every child is a
    /// `ChildProcess` (`reap` reaps the others): not a test runner or a library's host.
    ///
    /// The corresponding C call is `prctl(PR_SET_CHILD_SUBREAPER, 1)` (variadic in C, so
    /// called through its address).
    @discardableResult
    public static func adopt() -> Bool {
        guard prctl(36 /* PR_SET_CHILD_SUBREAPER */, 1) == 0 else { return false }
        adopting.store(true, ordering: .relaxed)
        return true
    }

    /// Whether `adopt()` made this process the reaper of its orphans.
    public static var adopted: Bool { adopting.load(ordering: .relaxed) }

    /// Reaps every exited child, without waiting: an adopted orphan's status is dropped (it
    /// would stay a zombie otherwise), a `ChildProcess`'s is kept for it. Nothing without `adopt()`.
    ///
    /// The corresponding C function is `waitpid(-1, WNOHANG)`.
    public static func reap() {
        guard adopted else { return }
        // Recorded outside the lock: the last reference to a child may go with its `record`.
        let reaped = children.withLock { table in
            var found: [(ChildProcess, Int32)] = []
            var raw: Int32 = 0
            while case let pid = waitpid(-1, &raw, WNOHANG), pid > 0 || (pid < 0 && errno == EINTR) {
                guard pid > 0 else { continue }
                if let child = table.children[pid]?.child { found.append((child, raw)) } else {
                    if table.unclaimed.count >= 1024 { table.unclaimed.removeAll() }
                    table.unclaimed[pid] = raw
                }
            }
            return found
        }
        for (child, raw) in reaped { child.record(raw) }
    }
}
