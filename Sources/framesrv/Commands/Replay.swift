import FrameMedia
import FrameRecording
import FrameServer
import Glibc

/// `framesrv replay`: republishes a recording's streams.
enum ReplayCommand: Command {
    static let name = "replay"
    static let summary = "republish every stream of a recording (framesrv record), in sync, paced by its media time (pts)"
    static let help = """
    usage: framesrv replay FILE [--out PREFIX] [--rate X|max] [--pace pts|capture] [--loop] [-ss T] [-t D]
                           [--paused] [--no-wait]

    Republishes every stream recorded in FILE under its recorded name (or PREFIX + name),
    FILE's later files included (a recording of several: rec.nut, rec.001.nut, ...),
    paced by the frames' media time (pts), as ffmpeg plays a file: all streams on one clock,
    each starting at its recorded moment relative to the others, so they stay in sync. A
    recording of `produce -i` (decoded faster than real time) lasts its media's duration.
    --pace capture paces by the recorded capture times instead. Frames are bit-identical to the recorded
    ones, and pts, time base, duration, key flag, colour, aspect ratio, field order, chroma
    location, discontinuity, source_dropped and the nominal rate are restored; capture_ns is
    the replay's start plus the recorded offset. Sequence numbers are the replay's own.
    A recorded audio stream is republished as an audio stream, its samples and header
    (sample format, rate, channels, layout, nb_samples, pts, duration, flags) as recorded,
    on the same clock as the pictures: streams one producer published (a movie's film and
    film-audio) keep their pts' offsets, so sound stays in sync with its pictures.

      --out PREFIX         publish stream NAME as PREFIX + NAME
      --rate X|max         X times real time (0.01 to 100, default 1), or max: as fast as the
                           consumers take frames
      --pace pts|capture   the timeline to play by (and that -ss, -t, seek and status use):
                           pts, the media time (default), or capture, the moments the
                           frames reached the recorder (a live capture's own rhythm)
      --loop               play again from the start at the end, until stopped (the first frame
                           of each pass is marked as a discontinuity)
      -ss T                start T (seconds, or [HH:]MM:SS[.xxx]) after the first recorded frame
      -t D                 stop after D (of the --pace timeline); with --loop, each pass plays
                           -ss to -ss + D, and the passes go on until stopped (as ffplay's -loop)
      --paused             start paused: framesrv ctl NAME resume, step N or seek T
      --no-wait            publish at once; by default each stream waits for its first lossless
                           consumer, so it gets every frame from the first
      --slots N            slots per stream (default 8)
      --quiet              no summary line

    Run-time control: every replayed stream has a control socket (NAME.control in the runtime
    directory), all driving one clock, so the streams stay in sync:
    framesrv ctl NAME pause|resume|toggle|seek T|rate X|step [N]|status [--json]. A seek goes to
    the first frame at or after T (seconds of the --pace timeline from the first recorded
    frame, whichever pass of --loop plays) on every stream and marks each stream's first frame
    as a discontinuity. Sound follows the clock as pictures do, never resampled: pause holds
    it, seek moves it with the pictures, rate X releases its frames X times as fast (samples
    and pts unchanged, nothing dropped or inserted), step N counts its frames with the
    pictures'. On a terminal, keys too: space pause/resume, right/left arrow seek +/-5 s,
    + and - double and halve the rate, '.' step one frame; and a progress line (position/
    duration, state, rate, frames) on stderr. A truncated or damaged file plays up to where
    it can be read; what was skipped is said.
    """

    static func run(_ o: ReplayCommandOptions) throws -> ExitStatus {
        installStopHandlers()
        let replayer = try Replayer(settings: o.settings, stop: StopSignal.shouldStop)
        try replayer.createStreams()
        // Controls work from the moment the streams exist (--paused, then step or seek).
        if let why = replayer.serveControls() { warn(why) }
        let waited = replayer.waitForConsumers { name in
            if !o.quiet { warn("'\(name)': waiting for its first lossless consumer before publishing (--no-wait: publish at once; Ctrl-C to stop)") }
        }
        guard waited else { replayer.abort(); return .interrupted }
        let status = replayer.statusReporter(stream: replayer.streamNames[0])
        let keys = o.quiet ? nil : PlaybackKeys(clock: replayer.clock, duration: replayer.duration, status: status)
        let report: ReplayReport
        do { report = try replayer.run() } catch {
            keys?.stop()
            replayer.abort()
            throw error
        }
        keys?.stop()
        say(o, report)
        return .success
    }

    static func say(_ o: ReplayCommandOptions, _ r: ReplayReport) {
        // A file named by a read error below is said once, there.
        let unreadable = r.fileErrors + (r.readError.map { [$0] } ?? [])
        for file in r.cutFiles where !unreadable.contains(where: { $0.path == file }) {
            warn("replay: \(file): the file ends without its index (the recorder was killed, or the file was cut): played the frames it holds")
        }
        if let stop = r.segmentsStop { warn("replay: \(stop)") }
        for why in r.fileErrors {
            warn("replay: reading stopped early in \(why): the file is cut or damaged; played what came before, then the next file")
        }
        if let why = r.readError {
            warn("replay: reading stopped early in \(why): the file is truncated or damaged; played what came before")
        }
        if r.skippedPackets > 0 || r.decodeErrors > 0 || r.beyondSpan > 0 {
            warn("replay: \(o.settings.path): skipped \(r.skippedPackets) packets without a frame record, \(r.beyondSpan) whose record lies past the recording's end, and \(r.decodeErrors) frames that did not decode")
        }
        guard !o.quiet else { return }
        let what = zip(r.streams, r.frames).map { "\($0) \($1)" }.joined(separator: ", ")
        print("replay: \(o.settings.path): published \(r.frames.reduce(0, +)) frames (\(what))" + (r.loops > 0 ? ", \(r.loops + 1) passes" : ""))
    }
}
