// PROTOCOL.md 11, Waiting: the frame wake. The consumer's wait loop (11.1, 11.2), the
// busy-poll window (11.3) and the producer's exit seen while asleep (11.4).

import CFrameServer
import Glibc
import Synchronization

extension Attachment {
    /// The longest one futex sleep lasts: the producer's SIGKILL (which bumps nothing) and
    /// a stop signal that landed just before the sleep are seen at most this late.
    static let longestSleepNanos: Int64 = 500_000_000

    /// The next frame, the end, or the producer's exit. Sleeps on `frame_wake` (design 1.3):
    /// look; spin (`spinWindowNanos`); announce the sleep; look again; sleep.
    func nextFrame(stop: () -> Bool) throws(ConsumerError) -> Outcome {
        var spun = false
        while true {
            settleReleases()
            drainDoorbell()
            let window = spun ? 0 : Self.spinWindowNanos(pollMicros: pollMicros, interval: captureIntervalNanos)
            // Read before the look: a publish between the look and the spin then ends the
            // spin at once, instead of waiting out the window.
            let seen = window > 0 ? control.frameWakeWord : 0
            if let outcome = try look() { return outcome }
            var sleepNanos = Self.longestSleepNanos
            if window > 0 {
                let now = monotonicNanos(), opens = pollWindowOpens(now: now, window: window)
                if opens <= now {
                    spun = true
                    if spin(seen: seen, for: window) { continue }
                } else {
                    sleepNanos = Int64(min(opens - now, UInt64(sleepNanos)))   // then spin
                }
            }
            // SYNC: fs_consumer_wait_begin before the last look; see `ControlSegment.frameReady`.
            let w = control.beginWaitForFrame(bit)
            let last: Outcome?
            do { last = try look() } catch {
                control.endWaitForFrame(bit)
                throw error
            }
            if let last {
                control.endWaitForFrame(bit)
                return last
            }
            if waitReadable([producerFD.rawValue], timeoutMillis: 0) != nil {
                control.endWaitForFrame(bit)
                producerExited = true
                continue
            }
            if entryLost {
                control.endWaitForFrame(bit)
                throw .entryLost(stream: stream, index: index)
            }
            _ = control.waitForFrame(seen: w, timeoutNanos: sleepNanos)
            // Asked after every sleep, not only an interrupted one: a signal that landed
            // while this thread was busy (no EINTR) is seen at the next frame's wake.
            if stop() {
                control.endWaitForFrame(bit)
                return .ended
            }
            if let woken = try lookAfterWake() { return woken }
        }
    }

    /// The frame that ended a sleep, handed out before the wake's bookkeeping: clearing the
    /// `sleepers` bit (an RMW on the line the producer just wrote) and draining the doorbell
    /// wait until after it. After a sleep every touch is a cache miss, and those before the
    /// frame are its latency. A bit cleared late costs at most one needless FUTEX_WAKE.
    private func lookAfterWake() throws(ConsumerError) -> Outcome? {
        settleReleases()   // a live consumer's hold limit counts settled releases
        let woken: Outcome?
        do { woken = try look() } catch {
            control.endWaitForFrame(bit)
            throw error
        }
        control.endWaitForFrame(bit)
        return woken
    }

    /// Whether this consumer's entry stopped being its own while it waits: another process
    /// (damage, a bug) freed it or asked for its detach, so the producer serves it no more and
    /// waiting would last for ever. Asked once per sleep.
    private var entryLost: Bool {
        !detached && (control.consumerPID(index) != ForkCheck.currentPID || control.consumerState(index) != .active)
    }

    /// One look at shared memory: a frame, the end, the producer gone, or nil (nothing yet).
    @inline(__always)
    private func look() throws(ConsumerError) -> Outcome? {
        do { try control.segment.checkIntact() } catch { throw .segment(error) }
        mapCurrentPool()
        switch try mode == .lossless ? nextLossless() : nextLive() {
        case .frame(let f): return .frame(f)
        case .ended: return .ended
        case .nothingYet: break
        }
        if control.ended, mode == .live || producerExited { return .ended }
        if producerExited { return .producerGone }
        if detached { return .ended }
        return nil
    }

    /// A frame interval under which a consumer spins before it sleeps even without a
    /// window of its own (11.3's catch-up spin): 50 us, 20,000 frames a second.
    static let catchUpNanos: UInt64 = 50_000
    /// CPUs online when the process started (the catch-up spin needs a second one).
    static let onlineCPUs = sysconf(Int32(_SC_NPROCESSORS_ONLN))

    /// How long to spin before sleeping (PROTOCOL.md 11.3), in ns: the user's window
    /// (`pollMicros`); without one, on a stream whose frames come less than `catchUpNanos`
    /// apart (`interval`, the smoothed pace; 0: unknown), twice that interval, at most
    /// `catchUpNanos`: there a sleep and a wake per frame (two system calls, one of them
    /// the producer's) cost more than the frame, and a consumer that keeps up slowed its
    /// producer by that much. 0: sleep at once.
    /// On one CPU it never spins: the producer cannot publish while the consumer spins.
    static func spinWindowNanos(pollMicros: Int, interval: UInt64, cpus: Int = onlineCPUs) -> UInt64 {
        if pollMicros > 0 { return UInt64(pollMicros) * 1000 }
        guard cpus > 1, interval > 0, interval < catchUpNanos else { return 0 }
        return min(2 * interval, catchUpNanos)
    }

    /// When this frame's busy-poll window opens: half the window before the next frame is
    /// due on a paced stream; `now` when the pace is unknown or faster than the window.
    private func pollWindowOpens(now: UInt64, window: UInt64) -> UInt64 {
        guard captureIntervalNanos > window, lastCaptureNanos > 0 else { return now }
        return lastCaptureNanos + captureIntervalNanos - window / 2
    }

    /// Folds a delivered frame's capture time into the stream's pace (a 1/8 moving average).
    func notePace(capture: UInt64) {
        if lastCaptureNanos > 0, capture > lastCaptureNanos {
            let interval = capture - lastCaptureNanos
            captureIntervalNanos = captureIntervalNanos == 0 ? interval : (captureIntervalNanos * 7 + interval) / 8
        }
        lastCaptureNanos = capture
    }

    /// Busy-polls `frame_wake` for up to `window` ns; whether it changed (look again).
    /// SYNC: the acquire load that sees the change orders the next look after the bump.
    private func spin(seen: UInt32, for window: UInt64) -> Bool {
        let end = monotonicNanos() + window
        var spins = 0
        while control.frameWakeWord == seen {
            spins &+= 1
            if spins & 63 == 0, monotonicNanos() >= end { return false }
        }
        return true
    }
}
