import Glibc
import Synchronization

/// Set by the SIGINT/SIGTERM handler; read by `StopSignal.requested`. An atomic with no
/// lock, so storing it is async-signal-safe. `StopSignal.install()` touches it before
/// installing the handler, so the handler never runs its lazy initialisation.
private let stopFlag = Atomic<Int32>(0)

/// SIGINT and SIGTERM as a request to stop, for a stage that ends its stream cleanly (its
/// consumers get every frame it published, then the end) instead of dying mid-stream.
///
/// ```swift
/// StopSignal.install()
/// consumer.shouldStop = StopSignal.shouldStop   // next() returns nil
/// producer.shouldStop = StopSignal.shouldStop   // reserve() returns nil
/// while !StopSignal.requested, let frame = try consumer.next() { ... }
/// producer.close()                              // ends the stream
/// ```
///
/// The handlers only set a flag. They do not restart interrupted calls (no `SA_RESTART`),
/// so a wait for a frame, for a slot or for a reader of a blocked pipe returns early with
/// `EINTR` and asks `shouldStop`; `Consumer` and `Producer` also ask it at least every
/// second while they wait, so a signal that lands just before a wait is not lost.
/// The framesrv commands use this type; a process has one set of handlers, so install
/// it once, from the main thread, before starting threads of your own.
public enum StopSignal {
    /// Turns SIGINT and SIGTERM into `requested` (instead of ending the process), and
    /// unblocks both in the calling thread (a parent that spawned this process with them
    /// blocked, as `posix_spawn` inherits the mask, would otherwise keep them pending forever).
    ///
    /// The corresponding C functions are `sigaction` and `pthread_sigmask`.
    public static func install() {
        _ = stopFlag.load(ordering: .relaxed)   // initialised before any handler can run
        // No SA_RESTART: a blocked wait returns EINTR and asks shouldStop.
        handle(restarting: false) { _ in stopFlag.store(1, ordering: .relaxed) }
    }

    /// Calls `handler` on SIGINT and SIGTERM instead of ending the process (restarting
    /// interrupted calls or not), and unblocks both in the calling thread: `install()`'s
    /// mechanics, for a process that counts its stop signals itself (`framesrv run`).
    /// `handler` must be async-signal-safe (an atomic store, nothing that allocates).
    ///
    /// The corresponding C functions are `sigaction` and `pthread_sigmask`.
    public static func handle(restarting: Bool, _ handler: @convention(c) (Int32) -> Void) {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = handler
        sigemptyset(&action.sa_mask)
        action.sa_flags = restarting ? SA_RESTART : 0
        sigaction(SIGINT, &action, nil)
        sigaction(SIGTERM, &action, nil)
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// Whether SIGINT or SIGTERM arrived since `install()` (or `request()` was called).
    public static var requested: Bool { stopFlag.load(ordering: .relaxed) != 0 }

    /// `requested` as a closure, for `Consumer.shouldStop` and `Producer.shouldStop`.
    public static let shouldStop: @Sendable () -> Bool = { requested }

    /// Requests a stop as a signal would (from another thread, or a test). A wait already
    /// under way sees it at its next periodic check (within a second).
    public static func request() { stopFlag.store(1, ordering: .relaxed) }
}
