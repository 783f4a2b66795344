import FrameControl
import FrameMedia
import FrameRecording
import FrameServer
import Glibc

/// `framesrv record`: records streams into one file.
enum RecordCommand: Command {
    static let name = "record"
    static let summary = "record streams, pictures and sound, into one lossless file (NUT: FFV1 or raw, PCM; every header field kept)"
    static let help = """
    usage: framesrv record --in A[,B,...] -o FILE [--codec ffv1|raw|h264] [--crf N] [--wait S]
                          [--segment-size SIZE]
           framesrv record --in A[,B,...] -o FILE --snapshot D [--snapshot-max-mb M] [--name NAME]

    Records every frame of streams A, B, ... (a lossless consumer each, so nothing is
    dropped) into one NUT file that ffprobe, ffplay and ffmpeg read: one video or audio
    stream per recorded stream, named as it (title), with its exact nominal rate. Every
    frame's header goes with it (pts and time base, duration, capture time, sequence, epoch,
    key flag, colour, aspect ratio, field order, chroma location, discontinuity,
    source_dropped, size and pixel format; for sound: sample format, rate, channels, channel
    order and mask, nb_samples): 'framesrv replay FILE' restores all of it.
    docs/RECORDING.md describes the file. A size or format change is recorded as it happened.

    Sound (an audio stream among --in, such as produce -i movie.mp4 --out film's film-audio:
    record --in film,film-audio) is stored losslessly as PCM of its own sample type (pcm_f32le
    for fltp, pcm_s16le for s16, ...; planar frames interleaved, restored planar), whatever
    --codec says; replay keeps it in sync with the pictures.

      --in A[,B,...]       the streams to record (each waited for)
      -o FILE              the recording (NUT; .nut is the usual extension)
      --codec C            the pictures' codec (sound is PCM): ffv1 (default: lossless, every
                           frame a keyframe; pixel formats FFV1 does not hold, such as rgb24
                           and nv12, are stored raw, with a note), raw (the planes as they
                           are), or h264 (libx264, lossy, small)
      --crf N              --codec h264's constant quality (0-51, default 18)
      --wait SECONDS       give up when a stream has not appeared by then
      --segment-size SIZE  start a new file once one holds SIZE bytes (K, M, G: powers of
                           1024; default 1G; 0: one file, however long). The files are FILE,
                           then FILE with a number before its extension (rec.nut, rec.001.nut,
                           rec.002.nut, ...); each is a whole NUT file, and 'framesrv replay
                           FILE' plays them as one. A new file starts at a keyframe of the
                           first video track. Why: the muxer keeps an index entry in memory per
                           32 KB written (or per larger frame) until its file closes, about
                           7 MB per GiB: one file for days would grow without end
      --snapshot D         snapshot mode: keep the last D (seconds, or [HH:]MM:SS) of every
                           stream in memory and write them when SIGUSR1 or 'framesrv ctl NAME
                           snapshot' arrives, to FILE with a counter before its extension
                           (rec.nut: rec-1.nut, rec-2.nut, ...); recording goes on after
                           each. One at a time: a request while one is being written is
                           refused, and said. The memory bound is stated at start
                           (frames x bytes per frame, raw) and refused above --snapshot-max-mb
      --snapshot-max-mb M  the snapshot ring's largest allowed bound, in MB (default 1024)
      --name NAME          with --snapshot: what framesrv ctl calls this recorder (default: FILE's
                           base name without its extension: rec for rec.nut)
      --quiet              no summary line

    Crash safe: each frame is flushed to the file as it is written, so a recorder killed with
    SIGKILL leaves a file that replays up to its last frame. SIGINT, SIGTERM and the end of
    every stream complete the file (index written).
    """

    static func run(_ o: RecordCommandOptions) throws -> ExitStatus {
        installStopHandlers()
        if let micros = o.snapshotMicros { return try runSnapshots(o, windowNanos: micros * 1000) }
        let recorder = StreamRecorder(settings: o.settings, stop: StopSignal.shouldStop)
        guard let report = try recorder.run() else { return .interrupted }   // stopped before the first frames: nothing written
        if !o.quiet { summarise(o.settings.path, report) }
        return .success
    }

    static func summarise(_ path: String, _ report: RecordReport) {
        for (i, t) in report.tracks.enumerated() where report.rawFallbacks[i] > 0 {
            warn("record: '\(t.name)': \(report.rawFallbacks[i]) frames stored raw (\(t.codec.name) does not hold their pixel format)")
        }
        let what = report.tracks.enumerated().map { "\($0.element.name) \(report.frames[$0.offset])" }.joined(separator: ", ")
        let files = report.files.count > 1 ? " in \(report.files.count) files (\(path) to \(report.files.last!))" : ""
        print("record: \(path): \(report.frames.reduce(0, +)) frames (\(what)), \(report.bytes) bytes\(files)")
    }

    /// --snapshot: the ring, written at each SIGUSR1, until the streams end or a stop.
    static func runSnapshots(_ o: RecordCommandOptions, windowNanos: Int64) throws -> ExitStatus {
        SnapshotTrigger.install()
        var control: ControlServer?
        if let name = o.controlName {
            switch SnapshotTrigger.serve(name) {
            case .success(let server): control = server
            case .failure(let error): warn("record: no 'framesrv ctl \(name) snapshot' (\(error)); SIGUSR1 still works")
            }
        }
        defer { control?.close() }
        let recorder = StreamRecorder(settings: o.settings, stop: StopSignal.shouldStop)
        let written = try recorder.runSnapshots(windowNanos: windowNanos, onBound: { bound in
            guard bound.megabytes <= o.snapshotMaxMB else {
                throw RecordingError.snapshotTooLarge(bound.megabytes, o.snapshotMaxMB, bound.description)
            }
            if !o.quiet {
                let ctl = control.map { "framesrv ctl \($0.stream) snapshot or " } ?? ""
                warn("record: snapshot mode, memory bound \(bound) (\(ctl)kill -USR1 \(getpid()) writes a snapshot)")
            }
        }, onWritten: { path, frames in
            if !o.quiet {
                print("record: snapshot \(path): \(frames.reduce(0, +)) frames (\(frames.map(String.init).joined(separator: ", ")))")
                fflush(nil)   // said as it happens, also into a pipe or file (nil: every output stream)
            }
            let refused = SnapshotTrigger.takeRefusedSignals()
            if refused > 0 { warn("record: \(refused) SIGUSR1 refused while a snapshot was being written") }
        })
        if !o.quiet { print("record: \(written) snapshot\(written == 1 ? "" : "s") written") }
        return .success
    }
}
