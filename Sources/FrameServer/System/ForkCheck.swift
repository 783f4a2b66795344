import Glibc
import Synchronization

/// This process's pid, read without a system call: a `pthread_atfork` handler stores the
/// child's own before anything else of the child runs (as libframesrv's `fsi_opener_pid`).
/// A Consumer or Producer records it at open; used in a forked child, where the pid differs,
/// it refuses (`ConsumerError.forked`, `ProducerError.forked`) and touches nothing shared:
/// the child's copy names the parent's consumer entry, holder bits and slots.
enum ForkCheck {
    private static let pid = Atomic<Int32>(0)
    private static let installed: Void = {
        pid.store(getpid(), ordering: .relaxed)
        pthread_atfork(nil, nil) { ForkCheck.pid.store(getpid(), ordering: .relaxed) }
    }()

    /// The calling process's pid.
    static var currentPID: Int32 {
        _ = installed
        return pid.load(ordering: .relaxed)
    }

    /// Whether this process is not `opener` (a forked child of it).
    static func isForkedChild(of opener: Int32) -> Bool { currentPID != opener }

    /// The one line both refusals say.
    static func message(_ what: String, stream: String, opener: Int32, child: Int32) -> String {
        "this \(what) of stream '\(stream)' was opened by pid \(opener); a forked child (pid \(child)) must open its own"
    }
}
