import FrameServer
import Glibc

/// What `framesrv replay` plays and how.
public struct ReplaySettings: Sendable {
    public var path: String
    /// Prepended to every recorded stream's name.
    public var prefix = ""
    /// Times real time; nil: as fast as the consumers take frames.
    public var rate: Double? = 1
    /// Play the file again and again until stopped.
    public var loop = false
    /// Start this far (ns of capture time) after the recording's first frame.
    public var start: Int64 = 0
    /// Stop after this much capture time (ns), nil: to the end.
    public var duration: Int64?
    /// Wait for every stream's first lossless consumer before publishing.
    public var waitForConsumers = true
    public var slots = 8

    public init(path: String) { self.path = path }
}

/// What a replay did.
public struct ReplayReport: Sendable {
    public var streams: [String] = []
    public var frames: [Int] = []
    public var skippedPackets = 0
    public var decodeErrors = 0
    public var readError: String?
    /// The file ends without its index: the recorder was killed, or the file was cut.
    public var incomplete = false
    public var loops = 0
}

/// Releases each frame when its capture time is due, at a fixed rate. `PlaybackClock`'s
/// shape (`wait(toRelease:shouldStop:)`), so a controllable clock can take its place.
final class ReplayPacer {
    let rate: Double?
    private var anchor: (wall: UInt64, media: Double)?

    init(rate: Double?) { self.rate = rate }

    /// Blocks until media time `media` (seconds) is due; false when `shouldStop` said so first.
    func wait(toRelease media: Double, shouldStop: () -> Bool) -> Bool {
        guard let rate else { return !shouldStop() }
        let now = monotonicNanos()
        guard let a = anchor else { anchor = (now, media); return !shouldStop() }
        let due = a.wall &+ UInt64(max(0, (media - a.media) / rate) * 1e9)
        while !shouldStop() {
            let now = monotonicNanos()
            guard due > now else { return true }
            var ts = timespec(tv_sec: 0, tv_nsec: Int(min(due - now, 50_000_000)))
            nanosleep(&ts, nil)
        }
        return false
    }
}

/// `framesrv replay`: republishes every stream of a recording under its recorded name
/// (plus a prefix), frames bit-identical and every header field restored, paced by the
/// recorded capture times (all streams on one clock, so they stay in sync).
///
/// Restored as recorded: pixels, pts, time base, duration, key flag, colour, aspect ratio,
/// field order, chroma location, discontinuity and source_dropped, and the stream's
/// nominal rate. capture_ns is the replay's start plus the recorded offset (so every
/// offset between frames, across streams too, is the recorded one). Sequence numbers and
/// epochs are the replaying producer's own (the protocol numbers frames contiguously);
/// the recorded ones stay in the file.
public final class Replayer {
    public let settings: ReplaySettings
    public let reader: RecordingReader
    private var producers: [Producer] = []
    /// The replay's capture time of recorded offset 0.
    private var base: UInt64?
    private let stop: () -> Bool

    public init(settings: ReplaySettings, stop: @escaping () -> Bool) throws(RecordingError) {
        self.settings = settings
        self.stop = stop
        reader = try RecordingReader(path: settings.path)
    }

    /// The stream names the replay publishes.
    public var streamNames: [String] { reader.tracks.map { settings.prefix + $0.name } }

    /// Creates the streams; with `waitForConsumers`, waits for each one's first lossless
    /// consumer. False when stopped first.
    public func open(onWaiting: (String) -> Void = { _ in }) throws -> Bool {
        for (track, name) in zip(reader.tracks, streamNames) {
            var options = ProducerOptions()
            options.slots = settings.slots
            options.nominalRate = track.rate
            options.name = ClientName.fit("replay \(settings.path)")
            let producer = try Producer(stream: name, options: options)
            producer.shouldStop = stop
            producers.append(producer)
        }
        guard settings.waitForConsumers else { return true }
        for (producer, name) in zip(producers, streamNames) where producer.losslessConsumerCount < 1 {
            onWaiting(name)
            while !producer.waitForLosslessConsumers(1, timeoutSeconds: 1) {
                if stop() { return false }
            }
        }
        return true
    }

    /// Plays the file (again and again with `loop`), then ends every stream.
    public func run() throws -> ReplayReport {
        var report = ReplayReport(streams: streamNames, frames: Array(repeating: 0, count: producers.count))
        let pacer = ReplayPacer(rate: settings.rate)
        var shift: Int64 = 0   // capture ns added by earlier loops
        repeat {
            let last = try playOnce(pacer, shift: shift, loop: report.loops, into: &report)
            guard settings.loop, !stop(), let last, report.frames.reduce(0, +) > 0, reader.rewind() else { break }
            report.loops += 1
            shift += last + 1   // the next pass starts right after this one's last frame (+1 ns)
        } while true
        report.skippedPackets = reader.skippedPackets
        report.decodeErrors = reader.decodeErrors
        report.readError = reader.readError
        report.incomplete = !reader.complete
        for p in producers { p.finish(); p.close() }
        return report
    }

    /// One pass over the file; returns the capture offset of the last frame (from -ss), if any.
    private func playOnce(_ pacer: ReplayPacer, shift: Int64, loop: Int,
                          into report: inout ReplayReport) throws -> Int64? {
        var last: Int64?
        var first = true
        while !stop(), let f = reader.next() {
            let offset = f.record.captureOffsetNanos - settings.start
            guard offset >= 0 else { continue }
            if let d = settings.duration, offset >= d { break }
            guard pacer.wait(toRelease: Double(offset + shift) / 1e9, shouldStop: stop) else { break }
            var d = f.record.description
            // The first frame out is captured now; every later one at its recorded offset from it.
            if base == nil { base = monotonicNanos() &- UInt64(offset + shift) }
            d.captureNanos = base! &+ UInt64(offset + shift)
            if first, loop > 0 { d.flags.insert(.discontinuity) }   // a loop starts the timeline again
            guard try publish(f, description: d) else { break }
            report.frames[f.track] += 1
            last = offset
            first = false
        }
        return last
    }

    private func publish(_ f: ReadFrame, description: FrameDescription) throws -> Bool {
        let producer = producers[f.track]
        guard var slot = try producer.reserve(f.record.format) else { return false }
        f.copy(into: slot)
        slot.description = description
        slot.publish()
        return true
    }

    /// Closes the streams without ending them normally (after an error).
    public func abort() {
        for p in producers { p.finish(failed: true); p.close() }
    }
}
