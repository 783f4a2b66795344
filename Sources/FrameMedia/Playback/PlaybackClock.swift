import FrameControl
import FrameServer
import Glibc

/// The playback clock of a producer that reads a file (`produce -i FILE`, `replay`): maps
/// each frame's media time (seconds from the input's start) to the moment it is released,
/// and holds what `framesrv ctl` changes at run time.
///
/// - Pause stops time; resume continues from where it stopped (no jump, nothing skipped).
/// - `rate X` changes the speed from the current position on, without a jump; `rate max`
///   (nil) releases every frame as soon as it is asked for (as fast as consumers take them).
/// - `step N` releases exactly N frames while paused (and pauses first when playing, as
///   mpv's frame step does).
/// - A seek is requested here (`requestSeek`) and performed by the playback loop, which
///   then calls `didSeek(to:)`: the mapping starts again at the next frame released.
///
/// Thread-safe: every method takes one pthread mutex; the playback loop waits on its
/// condition variable (CLOCK_MONOTONIC) and any other thread (the control socket's) may
/// change the clock meanwhile.
public final class PlaybackClock: @unchecked Sendable {
    // @unchecked Sendable: every stored property is read and written under `lock`.
    /// What `status` reports.
    public struct State: Sendable, Equatable {
        public var paused: Bool
        /// Times real time; nil: as fast as the consumers take frames (`rate max`).
        public var rate: Double?
        /// The media time of the last frame released (after a seek: its target until then).
        public var position: Double
        /// Frames `step` still has to release.
        public var stepsLeft: Int
        /// A seek asked for and not yet done by the playback loop.
        public var pendingSeek: Double?
        /// Frames released so far.
        public var released: UInt64
        /// Where the last frame released lies in the file (a looping input's media time goes
        /// on growing; this starts again each play), and how many plays ended before its.
        public var filePosition: Double
        public var loops: Int
    }

    /// Where a frame lies in its file: seconds from its start, and the plays before this one.
    public struct FilePlace: Sendable, Equatable {
        public var position: Double
        public var loops: Int
        public init(position: Double, loops: Int) { self.position = position; self.loops = loops }
    }

    /// What `wait(toRelease:)` decided.
    public enum Release: Equatable, Sendable {
        /// Publish the frame now.
        case now
        /// A seek is pending: perform it (`didSeek(to:)`) instead of publishing this frame.
        case seek(Double)
        /// The stop predicate said so.
        case stopped
    }

    private let lock = ConditionLock()
    private var paused: Bool
    private var rate: Double?
    private var steps = 0
    private var seekTarget: Double?
    private var released: UInt64 = 0
    private var position: Double
    private var place: FilePlace
    /// The mapping: media time `anchorMedia` is wall time `anchorWall` (nil: anchor on the next frame).
    private var anchor: (wall: UInt64, media: Double)?

    /// The allowed rates (`rate X`): 0.01 to 100 times real time, as the control socket takes them.
    public static var rates: ClosedRange<Double> { ControlRequest.rates }

    /// A clock at `rate` (nil: max), paused or not, at media time `position`.
    public init(rate: Double?, paused: Bool = false, position: Double = 0) {
        self.rate = rate
        self.paused = paused
        self.position = position
        place = FilePlace(position: position, loops: 0)
    }

    /// A snapshot of the clock's state.
    public var state: State {
        lock.withLock {
            State(paused: paused, rate: rate, position: position, stepsLeft: steps, pendingSeek: seekTarget, released: released,
                  filePosition: place.position, loops: place.loops)
        }
    }

    /// Stops time. Returns false when already paused.
    @discardableResult
    public func pause() -> Bool { lock.withLock { setPaused(true) } }

    /// Starts time again from where it stopped. Returns false when already playing.
    @discardableResult
    public func resume() -> Bool { lock.withLock { setPaused(false) } }

    /// Pauses when playing, resumes when paused; returns whether it is paused now.
    @discardableResult
    public func toggle() -> Bool { lock.withLock { _ = setPaused(!paused); return paused } }

    /// Changes the speed (nil: max) from the current position on, without a jump.
    public func setRate(_ newRate: Double?) {
        lock.withLock {
            reanchor(now: monotonicNanos())
            rate = newRate
            lock.broadcast()
        }
    }

    /// Releases `count` more frames while paused (pausing first when playing).
    public func step(_ count: Int) {
        lock.withLock {
            _ = setPaused(true)
            steps += max(0, count)
            lock.broadcast()
        }
    }

    /// Asks the playback loop to seek to media time `target`.
    public func requestSeek(_ target: Double) {
        lock.withLock {
            seekTarget = target
            lock.broadcast()
        }
    }

    /// The playback loop performed the seek to `target`: the mapping starts again at the
    /// next frame released, and steps still owed are kept.
    public func didSeek(to target: Double) {
        lock.withLock {
            if seekTarget == target { seekTarget = nil }
            position = target
            place.position = target
            anchor = nil
        }
    }

    /// Blocks until the frame at media time `media` is due, a seek is pending or
    /// `shouldStop` says so (asked at least every 50 ms: signals do not wake the wait).
    /// A frame without a time (nil) is due at once unless paused. `file`: where the frame
    /// lies in its file, when that is not its media time (a looping input).
    public func wait(toRelease media: Double?, file: FilePlace? = nil, shouldStop: () -> Bool) -> Release {
        lock.withLock {
            while true {
                if let seekTarget { return .seek(seekTarget) }
                if shouldStop() { return .stopped }
                let now = monotonicNanos()
                if paused, steps == 0 {
                    lock.wait(untilNanos: now + 50_000_000)
                    continue
                }
                let due = paused ? now : dueTime(of: media, now: now)
                if due <= now {
                    release(media, now: now)
                    if let file { place = file } else if let media { place.position = media }
                    return .now
                }
                lock.wait(untilNanos: min(due, now + 50_000_000))
            }
        }
    }

    // MARK: Under the lock

    private func setPaused(_ value: Bool) -> Bool {
        guard paused != value else { return false }
        let now = monotonicNanos()
        if value {
            reanchor(now: now)
        } else if let a = anchor {
            anchor = (now, a.media)   // time stood still while paused
        }
        paused = value
        lock.broadcast()
        return true
    }

    /// The mapping's media time at `now`, made the new anchor (a rate change or a pause
    /// starts there). With no pace, or paused, the anchor is the last frame released.
    private func reanchor(now: UInt64) {
        guard let a = anchor else { return }
        guard !paused, let rate else { anchor = (now, max(a.media, position)); return }
        let media = a.media + Double(now &- a.wall) / 1e9 * rate
        // Never behind the last frame released: a late loop does not replay what went out.
        anchor = (now, max(media, position))
    }

    private func dueTime(of media: Double?, now: UInt64) -> UInt64 {
        guard let rate, let media, let a = anchor else { return now }
        let seconds = (media - a.media) / rate
        guard seconds > 0 else { return now }
        return a.wall &+ UInt64(min(seconds, 1e9) * 1e9)
    }

    private func release(_ media: Double?, now: UInt64) {
        if paused { steps -= 1 }
        released += 1
        if let media {
            position = media
            if anchor == nil || rate == nil || paused { anchor = (now, media) }
        }
    }
}

/// A pthread mutex with a condition variable on CLOCK_MONOTONIC.
///
/// The corresponding C functions are `pthread_mutex_lock`, `pthread_cond_timedwait` and
/// `pthread_cond_broadcast`.
package final class ConditionLock: @unchecked Sendable {
    // @unchecked Sendable: a pthread mutex and condition, used only through their functions.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    package init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    package func withLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// With the lock held: waits for a broadcast or until `ns` (CLOCK_MONOTONIC).
    package func wait(untilNanos ns: UInt64) {
        var ts = timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
        _ = pthread_cond_timedwait(condition, mutex, &ts)
    }

    /// With the lock held: wakes every waiter.
    package func broadcast() { pthread_cond_broadcast(condition) }
}
