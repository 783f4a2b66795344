import Glibc
import Synchronization

/// Counted by the SIGINT/SIGTERM handler; read by `Interrupts.count`. An atomic with no
/// lock, so adding to it is async-signal-safe; `install()` touches it first, so the handler
/// never runs its lazy initialisation.
private let interruptCount = Atomic<Int32>(0)

/// SIGINT and SIGTERM counted, for a supervisor that drains at the first Ctrl-C and forces
/// at the second (`PipelineRun.poll(interrupts:)`), as gst-launch and docker compose do.
public enum Interrupts {
    /// Turns SIGINT and SIGTERM into `count` instead of ending the process, and unblocks
    /// both in the calling thread. Install it once, from the main thread.
    ///
    /// The corresponding C functions are `sigaction` and `pthread_sigmask`.
    public static func install() {
        _ = interruptCount.load(ordering: .relaxed)
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in interruptCount.wrappingAdd(1, ordering: .relaxed) }
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        sigaction(SIGINT, &action, nil)
        sigaction(SIGTERM, &action, nil)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// SIGINTs and SIGTERMs received since `install()`.
    public static var count: Int { Int(interruptCount.load(ordering: .relaxed)) }
}
