import Glibc

/// Wakes a consumer asleep on `frame_wake` as soon as its producer exits.
///
/// A clean end bumps `frame_wake` (the producer's `finish` and `close`), but a SIGKILLed
/// producer bumps nothing, and a consumer's futex sleep lasts up to 500 ms. This thread
/// sleeps in poll() on the producer's pidfd (no CPU, no wake-ups while the producer runs)
/// and, when it becomes readable, bumps `frame_wake` and wakes every sleeper, so the
/// consumer's next look finds the producer gone at once (design section 7). Other
/// consumers of the stream wake too, look, and go back to sleep (or see the exit as well).
final class ProducerExitWatch {
    private let stop: FileDescriptor
    private var thread: pthread_t?

    /// Watches `producerFD` (a pidfd that must stay open until this object is gone);
    /// nil when no eventfd is available (the consumer then notices within its futex timeout).
    init?(control: ControlSegment, producerFD: Int32) {
        guard let stop = try? makeEventDescriptor() else { return nil }
        let stopFD = stop.rawValue
        self.stop = stop
        thread = spawnThread {
            while true {
                // nil: a signal interrupted the poll (no timeout); poll again.
                guard let fd = waitReadable([producerFD, stopFD], timeoutMillis: -1) else { continue }
                if fd == producerFD { control.wakeFrameWaiters() }
                return
            }
        }
    }

    deinit {
        signalEvent(stop.rawValue)
        if let thread { pthread_join(thread, nil) }
    }
}
