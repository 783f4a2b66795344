// PROTOCOL.md 12.3, Waiting for a slot (the `producer_waiting` handshake): the one way the
// producer sleeps on consumers (`sleepOnWake`, on the `wake` futex), and the waits built on it.

import CFrameServer
import Glibc
import Synchronization

extension Producer {
    /// Waits until at least `count` lossless consumers are attached (for deterministic
    /// scripted pipelines: a reader attached first gets every frame). Returns false if
    /// `timeoutSeconds` passed first (nil: forever), or when `shouldStop` says so.
    public func waitForLosslessConsumers(_ count: Int, timeoutSeconds: Double? = nil) -> Bool {
        guard !isForkedCopy else { return false }
        let deadline = timeoutSeconds.map { monotonicNanos() + UInt64(min(max($0, 0), 1e9) * 1e9) }
        return sleepOnWake(until: deadline) {
            if losslessConsumerCount >= count { return true }
            return shouldStop?() == true ? false : nil
        } ?? false
    }

    /// With `lingerWhenDeserted`: when lossless consumers were admitted and every one has
    /// left, with no other consumer attached, waits that long for one to attach (or for
    /// `shouldStop`), saying so through `onDeserted`; past it, the producer is `deserted`.
    /// Returns false when it did not end with a consumer. A producer spends nothing on a
    /// stream nobody reads (issue 27 item 4).
    func waitWhileDeserted() -> Bool {
        guard let linger = options.lingerWhenDeserted, !deserted else { return !deserted }
        func alone() -> Bool { shared.withLock { $0.everAdmitted && $0.losslessMask == 0 && $0.watched.isEmpty } }
        guard alone() else { return true }
        let seconds = formatFixed(max(linger, 0), 1)
        let how = linger.isFinite ? "waiting up to \(seconds) s" : "waiting"
        onDeserted?("every consumer left; \(how) for one before publishing on (Ctrl-C to stop)")
        let deadline = linger.isFinite ? monotonicNanos() + UInt64(min(max(linger, 0), 1e9) * 1e9) : nil
        if let ready = sleepOnWake(until: deadline, { () -> Bool? in
            if !alone() { return true }
            return shouldStop?() == true ? false : nil
        }) { return ready }
        deserted = true
        onDeserted?("no consumer came within \(seconds) s (--linger); ending the stream")
        return false
    }

    /// Gives consumers up to `timeoutSeconds` to release what they hold (the last frames
    /// of an ended stream), so the pool can be removed with the stream. Sleeps on `wake`.
    func waitForReleases(timeoutSeconds: Double) {
        let deadline = monotonicNanos() + UInt64(timeoutSeconds * 1e9)
        _ = sleepOnWake(until: deadline) { control.anySlotHeld(countingWriter: false) ? nil : true }
    }

    /// The one way the producer waits for consumers: sleeps on the `wake` futex until
    /// `ready` returns a value, or returns nil once `deadline` (CLOCK_MONOTONIC ns, nil:
    /// never) has passed. `beforeSleep` runs each time just before sleeping.
    /// SYNC: see fs_producer_wait_begin: any release after it changes `wake`, so the
    /// futex wait returns at once and `ready` is asked again (no lost wake-up).
    func sleepOnWake<T>(until deadline: UInt64?, beforeSleep: () -> Void = {}, _ ready: () -> T?) -> T? {
        while true {
            let w = control.beginWaitForRelease()
            defer { control.endWaitForRelease() }
            if let value = ready() { return value }
            // A truncated control segment (now private zero pages) wakes nobody: give up.
            if control.segment.truncated { return nil }
            var timeout = longestSleepNanos
            if let deadline {
                let now = monotonicNanos()
                guard now < deadline else { return nil }
                timeout = min(timeout, Int64(deadline - now))
            }
            beforeSleep()
            control.waitForRelease(seen: w, timeoutNanos: timeout)
        }
    }

    /// The longest a producer thread sleeps on a futex before it looks again (1 s): a
    /// lost wake-up (a truncated segment, see `sleepOnWake`) then costs at most this long.
    static let longestWaitNanos: Int64 = 1_000_000_000
    /// What `sleepOnWake` sleeps at most: a second, or a quarter of the stall timeout.
    private var longestSleepNanos: Int64 {
        guard let t = options.stallTimeout else { return Self.longestWaitNanos }
        return max(1_000_000, min(Self.longestWaitNanos, Int64(min(max(t, 0), 1e9) * 0.25e9)))
    }

    /// Bumps `wake` and wakes whoever sleeps on it (this producer's own waits, which all
    /// count themselves in `producer_waiting`): no system call when none does. A lease ends
    /// once a frame, so the futex wake it made every time cost a decoder of small frames
    /// (sound) more than the copy the lease saves.
    func wakeWaiters() { control.notifyProducer() }
}
