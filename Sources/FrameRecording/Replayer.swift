import FrameControl
import FrameMedia
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
    /// What the replay paces by: media time (pts, the default) or capture time. -ss, -t,
    /// seeks and the position `status` reports are on the same timeline.
    public var pace = ReplayPace.pts
    /// Start this far (ns of the pace's timeline) after the recording's first frame.
    public var start: Int64 = 0
    /// Stop after this much of the pace's timeline (ns), nil: to the end.
    public var duration: Int64?
    /// Wait for every stream's first lossless consumer before publishing.
    public var waitForConsumers = true
    /// Start paused (`framesrv ctl NAME resume`, `step N`, `seek T`).
    public var paused = false
    public var slots = 8

    public init(path: String) { self.path = path }
}

/// What a replay did.
public struct ReplayReport: Sendable {
    public var streams: [String] = []
    public var frames: [Int] = []
    public var skippedPackets = 0
    /// Frame records past the recording's span (damage: `MediaTimeline.isBeyondSpan`), skipped.
    public var beyondSpan = 0
    public var decodeErrors = 0
    public var readError: FileReadError?
    /// Earlier files that stopped being readable before their end (RecordingReader.fileErrors).
    public var fileErrors: [FileReadError] = []
    /// The recording's files that end without their index: the recorder was killed, or a file was cut.
    public var cutFiles: [String] = []
    /// Why the recording was taken to end before a file named as its next (RecordingReader.segmentsStop).
    public var segmentsStop: String?
    public var loops = 0
}

/// `framesrv replay`: republishes every stream of a recording under its recorded name
/// (plus a prefix), frames bit-identical and every header field restored, paced by the
/// frames' media time (pts; `MediaTimeline`) or by the recorded capture times, all streams on
/// one clock, so they stay in sync.
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
    /// Pace, pause, rate, step and seek (`framesrv ctl`): every stream on this one clock.
    public let clock: PlaybackClock
    private var controls: [ControlServer] = []
    private let stop: () -> Bool
    /// The recording on the media timeline, and its span (both paces).
    private let span: MediaTimeline
    /// The timeline replay paces by; nil when paced by capture time (media time is then the
    /// capture offset).
    private var timeline: MediaTimeline? { settings.pace == .pts ? span : nil }
    /// The recording's length in seconds on the pace's timeline (nil: not known, a capture-paced
    /// file that did not finish).
    public let duration: Double?

    public init(settings: ReplaySettings, stop: @escaping () -> Bool) throws(RecordingError) {
        self.settings = settings
        self.stop = stop
        reader = try RecordingReader(path: settings.path)
        clock = PlaybackClock(rate: settings.rate, paused: settings.paused, position: Double(settings.start) / 1e9)
        span = reader.mediaTimeline()
        // From the last readable frame record, not the container's estimate (a killed
        // recording has no index, and libavformat guesses).
        let length = settings.pace == .pts ? span.durationNanos : span.lastOffsetNanos
        duration = length > 0 ? Double(length) / 1e9 : nil
    }

    /// The frame's time on the pace's timeline, nanoseconds.
    private func mediaNanos(of f: ReadFrame) -> Int64 {
        timeline?.mediaNanos(of: f.record, track: f.track) ?? f.record.captureOffsetNanos
    }

    /// The capture offset to seek the file to for the pace's time `media`.
    private func captureOffset(for media: Int64) -> Int64 {
        timeline.map { $0.captureOffset(atOrAfter: media) ?? media } ?? media
    }

    /// What `status` says for `stream` (position, duration, rate, paused, frames released), from any thread.
    public func statusReporter(stream: String) -> @Sendable () -> PlaybackStatus {
        let duration = duration, clock = clock
        return {
            let s = clock.state
            return PlaybackStatus(stream: stream, position: s.pendingSeek ?? s.position, duration: duration,
                                  rate: s.rate, paused: s.paused, frames: s.released)
        }
    }

    /// Serves `NAME.control` for every replayed stream, all driving the one clock. Returns
    /// why a socket could not be bound (the replay still plays), if one could not.
    public func serveControls() -> String? {
        let duration = duration, clock = clock
        for (name, producer) in zip(streamNames, producers) {
            let status = statusReporter(stream: name)
            do {
                controls.append(try ControlServer(stream: name, directory: producer.directory, verbs: ControlVerb.playback) { request in
                    clock.handle(request, duration: duration, canSeek: true, status: status)
                })
            } catch { return "\(name): no run-time control (framesrv ctl): \(error)" }
        }
        return nil
    }

    /// The stream names the replay publishes.
    public var streamNames: [String] { reader.tracks.map { settings.prefix + $0.name } }

    /// Creates the streams (each with the recorded nominal rate). All or none: when one
    /// cannot be made (a name another producer has), those made before it are closed again,
    /// so a failed replay leaves no stream behind.
    public func createStreams() throws {
        do {
            for (track, name) in zip(reader.tracks, streamNames) {
                var options = ProducerOptions()
                options.slots = settings.slots
                options.nominalRate = track.rate
                options.media = track.media
                options.name = ClientName.fit("replay \(settings.path)")
                let producer = try Producer(stream: name, options: options)
                producer.shouldStop = stop
                producers.append(producer)
            }
        } catch {
            for p in producers { p.close() }
            producers = []
            throw error
        }
    }

    /// With `waitForConsumers`: waits for each stream's first lossless consumer (`onWaiting`
    /// hears which it waits for). False when stopped first.
    public func waitForConsumers(onWaiting: (String) -> Void = { _ in }) -> Bool {
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
        var pass = Pass(shift: 0, discontinuity: [])
        while try playOnce(&pass, into: &report) {
            // At the end with --loop: again from -ss, its capture times right after this pass's
            // last frame (+1 ns); the clock's timeline starts again at -ss (released at once).
            guard settings.loop, !stop(), let last = pass.last, reader.rewind() else { break }
            report.loops += 1
            pass = Pass(shift: pass.shift + last + 1 - captureOffset(for: settings.start), discontinuity: allTracks)
            clock.didSeek(to: Double(settings.start) / 1e9)
        }
        report.skippedPackets = reader.skippedPackets
        report.decodeErrors = reader.decodeErrors
        report.readError = reader.readError
        report.fileErrors = reader.fileErrors
        report.cutFiles = reader.cutFiles
        report.segmentsStop = reader.segmentsStop
        closeControls()
        for p in producers { p.finish(); p.close() }
        return report
    }

    private var allTracks: Set<Int> { Set(reader.tracks.indices) }

    /// Where a pass over the file is: the capture time added to its offsets (earlier loops),
    /// the last capture offset published, and whether the next frame starts a new timeline.
    struct Pass {
        var shift: Int64
        /// The tracks whose next frame starts a new timeline (each marked once: pictures and sound alike).
        var discontinuity: Set<Int>
        var last: Int64?
    }

    /// One pass over the file from -ss; true when it reached the end (or -t), false when stopped.
    private func playOnce(_ pass: inout Pass, into report: inout ReplayReport) throws -> Bool {
        var seekTo: Int64?
        reader.skipBefore = captureOffset(for: settings.start)
        if settings.start > 0 { _ = reader.seek(toOffsetNanos: reader.skipBefore) }
        while !stop(), let f = reader.next() {
            let offset = f.record.captureOffsetNanos, media = mediaNanos(of: f)
            let spanMedia = settings.pace == .pts ? media : span.mediaNanos(of: f.record, track: f.track)
            if span.isBeyondSpan(media: spanMedia, offset: offset) { report.beyondSpan += 1; continue }
            // Before -ss, or before the last seek's target: on every track (the file interleaves
            // tracks by capture time, so another track's earlier frames may follow the first one out).
            if media < (seekTo ?? settings.start) { continue }
            if let d = settings.duration, media >= settings.start + d { return true }
            switch clock.wait(toRelease: Double(media) / 1e9, shouldStop: stop) {
            case .stopped: return false
            case .seek(let target):
                seekTo = try seek(to: target, pass: &pass)
                continue
            case .now: break
            }
            var d = f.record.description
            // The first frame out is captured now; every later one at its recorded offset from it.
            if base == nil { base = monotonicNanos() &- UInt64(offset + pass.shift) }
            d.captureNanos = base! &+ UInt64(offset + pass.shift)
            if pass.discontinuity.remove(f.track) != nil { d.flags.insert(.discontinuity) }   // after a loop or a seek
            guard try publish(f, description: d) else { return false }
            report.frames[f.track] += 1
            pass.last = offset
        }
        return !stop()
    }

    /// Performs a seek the clock asked for: to the file's syncpoint before `target` (seconds
    /// of the pace's timeline from the recording's start, whichever pass of a loop is playing),
    /// then forward to the first frame at or after it (frames before it decoded only where
    /// later ones need them). Returns the media time to skip to.
    private func seek(to target: Double, pass: inout Pass) throws -> Int64 {
        let media = max(settings.start, Int64((target * 1e9).rounded()))
        let offset = captureOffset(for: media)
        guard reader.seek(toOffsetNanos: offset) else { throw RecordingError.cannotRead(settings.path, "it cannot seek") }
        reader.skipBefore = offset
        clock.didSeek(to: target)
        pass.discontinuity = allTracks
        return media
    }

    private func publish(_ f: ReadFrame, description: FrameDescription) throws -> Bool {
        let producer = producers[f.track]
        if let audio = f.record.audio {
            guard var slot = try producer.reserve(audio: audio) else { return false }
            f.copy(into: slot)
            slot.description = description
            slot.publish()
            return true
        }
        guard var slot = try producer.reserve(f.record.format) else { return false }
        f.copy(into: slot)
        slot.description = description
        slot.publish()
        return true
    }

    /// Closes the streams without ending them normally (after an error).
    public func abort() {
        closeControls()
        for p in producers { p.finish(failed: true); p.close() }
    }

    /// Stops serving `framesrv ctl`.
    public func closeControls() {
        for c in controls { c.close() }
        controls = []
    }
}
