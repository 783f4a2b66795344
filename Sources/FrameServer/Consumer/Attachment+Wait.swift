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
    /// look; spin up to `pollMicros`; announce the sleep; look again; sleep.
    func nextFrame(stop: () -> Bool) throws(ConsumerError) -> Outcome {
        var spun = false
        while true {
            settleReleases()
            drainDoorbell()
            // Read before the look: a publish between the look and the spin then ends the
            // spin at once, instead of waiting out the window.
            let seen = pollMicros > 0 ? control.frameWakeWord : 0
            if let outcome = try look() { return outcome }
            var sleepNanos = Self.longestSleepNanos
            if pollMicros > 0, !spun {
                let now = monotonicNanos(), opens = pollWindowOpens(now: now)
                if opens <= now {
                    spun = true
                    if spin(seen: seen) { continue }
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
            control.endWaitForFrame(bit)
            // Asked after every sleep, not only an interrupted one: a signal that landed
            // while this thread was busy (no EINTR) is seen at the next frame's wake.
            if stop() { return .ended }
        }
    }

    /// Whether this consumer's entry stopped being its own while it waits: another process
    /// (damage, a bug) freed it or asked for its detach, so the producer serves it no more and
    /// waiting would last for ever. Asked once per sleep.
    private var entryLost: Bool {
        !detached && (control.consumerPID(index) != getpid() || control.consumerState(index) != .active)
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

    /// When this frame's busy-poll window opens: half the window before the next frame is
    /// due on a paced stream; `now` when the pace is unknown or faster than the window.
    private func pollWindowOpens(now: UInt64) -> UInt64 {
        let window = UInt64(pollMicros) * 1000
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

    /// Busy-polls `frame_wake` for up to `pollMicros`; whether it changed (look again).
    /// SYNC: the acquire load that sees the change orders the next look after the bump.
    private func spin(seen: UInt32) -> Bool {
        let end = monotonicNanos() + UInt64(pollMicros) * 1000
        var spins = 0
        while control.frameWakeWord == seen {
            spins &+= 1
            if spins & 63 == 0, monotonicNanos() >= end { return false }
        }
        return true
    }
}
