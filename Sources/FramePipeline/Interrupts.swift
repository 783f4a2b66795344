import FrameServer
import Synchronization

/// Counted by the SIGINT/SIGTERM handler; read by `Interrupts.count`. An atomic with no
/// lock, so adding to it is async-signal-safe; `install()` touches it first, so the handler
/// never runs its lazy initialisation.
private let interruptCount = Atomic<Int32>(0)

/// SIGINT and SIGTERM counted, for a supervisor that drains at the first Ctrl-C and forces
/// at the second (`PipelineRun.poll(interrupts:)`), as gst-launch and docker compose do.
public enum Interrupts {
    /// Turns SIGINT and SIGTERM into `count` instead of ending the process, and unblocks
    /// both in the calling thread (`StopSignal.handle`). Install it once, from the main thread.
    public static func install() {
        _ = interruptCount.load(ordering: .relaxed)
        StopSignal.handle(restarting: true) { _ in interruptCount.wrappingAdd(1, ordering: .relaxed) }
    }

    /// SIGINTs and SIGTERMs received since `install()`.
    public static var count: Int { Int(interruptCount.load(ordering: .relaxed)) }
}
