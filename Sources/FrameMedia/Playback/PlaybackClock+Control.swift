import FrameControl
import FrameServer

// What a playback control does to the clock: ControlRequest (FrameControl) applied to PlaybackClock.

extension PlaybackClock {
    /// The reply to a playback control: the handler of `produce -i FILE` and `replay`.
    /// `duration`: the input's, for refusing a seek past the end (nil: unknown); `canSeek`:
    /// false for a pipe; `status`: the current figures.
    public func handle(_ request: ControlRequest, duration: Double?, canSeek: Bool,
                       status: () -> PlaybackStatus) -> ControlReply {
        switch request {
        case .pause: return pause() ? .ok("paused") : .ok("paused already")
        case .resume: return resume() ? .ok("playing") : .ok("playing already")
        case .toggle: return .ok(toggle() ? "paused" : "playing")
        case .rate(let r):
            setRate(r)
            return .ok("rate \(r.map { formatFixed($0, 2) + "x" } ?? "max")")
        case .step(let n):
            step(n)
            return .ok("step \(n) (paused)")
        case .seek(let target):
            guard canSeek else { return .error("seek: '\(status().stream)' reads an input that cannot seek (a pipe)") }
            let t = target.resolved(from: state.pendingSeek ?? state.filePosition)
            if let duration, t >= duration {
                return .error("seek \(formatFixed(t, 3)): past the end (the input lasts \(formatFixed(duration, 3)) s)")
            }
            requestSeek(t)
            return .ok("seek \(formatFixed(t, 3))")
        case .status: return .json(status().json)
        case .snapshot: return .error("'\(status().stream)' does not take 'snapshot'")
        }
    }
}
