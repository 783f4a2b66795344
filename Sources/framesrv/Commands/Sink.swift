import FrameMedia
import FrameServer
import Glibc

/// `framesrv sink`: consumes a stream.
enum SinkCommand: Command {
    static let name = "sink"
    static let summary = "consume a stream (--null: count and verify; --framemd5, --y4m, --raw: write it; --record: encode it)"
    static let help = """
    usage: framesrv sink --in NAME --null [options]
           framesrv sink --in NAME [--framemd5 FILE|-] [--y4m FILE|-] [--raw FILE|-] [--record FILE] [--wav FILE|-] [options]

    Attaches to stream NAME (waiting for it to appear), reads every frame in place and
    releases it. Exits 0 after the end of the stream, and on SIGINT/SIGTERM (files are
    completed first). The outputs below can be combined; at most one writes to standard output.

      --in NAME            the stream to read
      --null               discard frames; count them and print statistics
      --framemd5 FILE|-    an audio stream (produce's --audio-out): what 'ffmpeg -i INPUT -map 0:a:0
                           -f framemd5' writes (samples as s16, ffmpeg's conversion). A video stream:
                           what 'ffmpeg -i INPUT -map 0:v:0 -f framemd5' writes for these
                           frames (- for standard output; the summary line then goes to stderr)
      --y4m FILE|-         write a YUV4MPEG2 stream, its header as ffmpeg's yuv4mpegpipe muxer writes
                           it (size, exact frame rate, interlacing from the field order, aspect
                           ratio, colour space, range; 4:2:0 tagged by chroma location: 420mpeg2,
                           420paldv or 420jpeg), the planes written from the slots in place:
                           'framesrv sink --in A --y4m - | ffplay -'. y4m carries
                           \(PackedVideoWriter.y4mFormats.joined(separator: ", "));
                           other formats are an error (use --raw or --record, or produce --pix-fmt)
      --raw FILE|-         write the planes tightly packed, frame after frame (ffmpeg's -f rawvideo);
                           prints the ffmpeg options that read it back on stderr once
      --wav FILE|-         an audio stream's samples as a WAV file (PCM of the stream's own sample
                           format, packed: fltp is written as 32-bit float), as 'ffmpeg -i F
                           -map 0:a -c:a pcm_f32le out.wav' keeps them. --raw FILE|- of an audio
                           stream writes the same samples bare (as ffmpeg's -f f32le, -f s16le)
      --record FILE        encode with libavcodec into a .mp4, .mov, .mkv or .nut file (the container
                           from the extension). Every frame keeps its own timestamp, in the stream's
                           time base (variable frame rates kept; -fps_mode cfr resamples). The pixel
                           format: -pix_fmt's; H.264/H.265 default to 4:2:0 (yuv420p, yuv420p10le
                           for deeper input), which every player plays, with a note on stderr when
                           that drops chroma; other encoders (ffv1...) keep the stream's when they
                           take it, else take their best match. Conversions use libswscale with the
                           stream's colour matrix and range, as ffmpeg does.
                           Crash safe: MP4/MOV are fragmented (movflags=+frag_keyframe+empty_moov
                           +delay_moov+default_base_moof: a fragment at each keyframe and at least
                           every 0.5 s), Matroska closes a cluster every 0.5 s, and every packet is
                           flushed to the file, so a recorder killed with SIGKILL leaves a file FFmpeg
                           reads up to the last fragment or cluster. SIGINT, SIGTERM and the end of
                           the stream drain the encoder and write the trailer (index)
      -c:v CODEC           --record's encoder (default libx264; ffv1 for lossless)
      -b:v RATE            --record's bit rate in bits/s (k, M suffixes: 2M, 800k)
      --crf N              --record's constant quality (encoders with a crf option; libx264: 0-51)
      -g N                 --record's keyframe interval in frames
      --preset NAME        --record's encoder preset (libx264: ultrafast ... medium ... placebo)
      -pix_fmt FMT         --record's pixel format (ffmpeg -pix_fmts lists them), when the default
                           above is not the one: -pix_fmt yuv444p keeps RGB's chroma in H.264
      -fps_mode MODE       --record's timestamps: passthrough (default: each frame's own) or cfr
                           (frames duplicated and dropped to the stream's nominal rate, as ffmpeg)
      -f FMT               --record's container, overriding the extension: any libavformat muxer
                           (mp4, mov, matroska, nut, ...)
      --audio NAME         --record's sound: the audio stream NAME (produce's --audio-out, e.g.
                           film-audio), read losslessly on its own thread, encoded beside the
                           pictures and interleaved by timestamp, so sound and pictures stay in sync
                           through any chain that keeps pts. The recording's header waits for its
                           first audio frame (said after 2 s)
      -c:a CODEC           --audio's encoder (default: aac, FFmpeg's own, for MP4/MOV; flac for
                           Matroska and NUT)
      -b:a RATE            --audio's bit rate in bits/s (k, M suffixes: 128k)

    When the size or pixel format changes mid-stream, --y4m, --raw and --record keep the first
    frame's: later frames are scaled and converted to it with libswscale.

    Options:
      --lossless           every frame, in order; the producer waits for this consumer (default)
      --live               the newest frame only; never slows the producer, counts misses
      --poll-us N          busy-poll up to N us per frame before sleeping (0..1000000, default
                           0): trades a core for wake latency; on a paced stream the window is
                           centred on when the next frame is due. With 0 it still spins on a
                           stream faster than 20,000 frames/s, up to twice its frame interval
      --wait SECONDS       give up if the stream has not appeared by then (default: wait forever,
                           saying so once on a terminal); also waits past a stream that already
                           ended (without --wait that is one error line: its frames went to nobody)
      --frames N           stop after N frames
      --verify             check every byte of every frame against the test pattern (with --null)
      --hold-us A[-B]      hold each frame A (to B, random) microseconds before releasing it
      --seq-log FILE       append one line per event: 'attach PID', 'frame SEQ', 'corrupt SEQ', 'gone PID'
      --stats-json         print the final statistics as one JSON line (its latency percentiles
                           come from the first 1,048,576 frames: 8 MiB, kept for the whole run)
      --warmup N           leave the first N frames out of the latency percentiles (a benchmark's
                           warm-up: a consumer's first frames pay for first-touch faults, cold code)
      --no-reattach        exit with an error when the producer dies instead of waiting for it
      --name NAME          what this consumer is called in ls/top/inspect (default: its
                           role, 'sink record FILE', 'sink framemd5 FILE', 'sink null', ...)
      --rcvhwm N           ZeroMQ receive high-water mark in messages (default 1000)
      --quiet              no summary line, no progress line, no read-back hint

    On a terminal, a status line (frame= fps= [size=] time= [bitrate=] speed=) is refreshed
    on stderr twice a second, as ffmpeg does.
    """

    static func run(_ o: SinkOptions) throws -> ExitStatus {
        // The media file first: its checks (container, encoder, settings, path) fail before any other file is truncated.
        let outputs = try SinkOutputs(framemd5: o.framemd5, y4m: o.y4m, raw: o.raw, record: o.record, wav: o.wav,
                                      mediaFileOptions: o.mediaFileOptions) { StopSignal.requested }
        let log = try SequenceLog(path: o.seqLog)
        installStopHandlers()
        let session = SinkSession(consumer: try Consumer(stream: o.input, options: o.consumerOptions), outputs: outputs,
                                  log: log, settings: o.settings) { StopSignal.requested }
        if let name = o.audio {
            var options = o.consumerOptions
            options.name = ClientName.fit("sink record audio")
            session.audio = try AudioFeed(stream: name, options: options) { StopSignal.requested }
        }
        say(o, session)
        var progress = Progress(enabled: stderrIsTerminal && !o.quiet)
        if progress.enabled { session.onProgress = { progress.update(frames: $0, mediaSeconds: $1, bytes: $2) } }
        let report: SinkReport
        do {
            report = try session.run()
        } catch {
            // The outputs are complete (what was written is kept); the status line ends before the error.
            progress.finish(frames: session.statistics.received, mediaSeconds: session.clock.seconds, bytes: outputs.bytesRecorded)
            throw error
        }
        progress.finish(frames: report.statistics.received, mediaSeconds: session.clock.seconds, bytes: outputs.bytesRecorded)
        self.report(o, report.statistics, outputs)
        if let pid = report.producerGone {
            // Stopped while the stream's producer was gone without ending it: the stream did not end.
            throw CommandError.producerExited(stream: o.input, pid: pid)
        }
        if report.sourceFailed {
            throw CommandError.sinkInputFailed(stream: o.input, received: report.statistics.received)
        }
        return report.statistics.corrupt == 0 ? .success : .corruptFrames
    }

    /// What the session says while it runs: waiting, a producer gone, the outputs' notes.
    static func say(_ o: SinkOptions, _ session: SinkSession) {
        session.onAudioWait = { if !o.quiet { warn($0) } }
        session.onWaiting = { if stderrIsTerminal, !o.quiet { warn(waitingLine(o.input)) } }
        session.onProducerGone = { pid in
            // Without reattaching, the error that ends the sink is the one line said.
            guard o.consumerOptions.reattach else { return }
            warn("producer of '\(o.input)' (pid \(pid)) exited without ending the stream; waiting for it to come back")
        }
        let outputs = session.outputs
        session.onFirstFrame = {
            guard !o.quiet else { return }
            for note in outputs.mediaFile?.notes ?? [] { warn("note: " + note) }
            if let raw = o.raw, let readBack = outputs.raw?.readBackOptions { warn("raw: read it back with: ffmpeg \(readBack) -i \(raw)") }
        }
    }

    /// Said once on a terminal while a consumer waits for its stream to appear.
    static func waitingLine(_ stream: String) -> String { "waiting for stream '\(stream)' (Ctrl-C to stop)" }

    /// The statistics and summary lines (to standard error when an output is standard output).
    static func report(_ o: SinkOptions, _ stats: SinkStatistics, _ outputs: SinkOutputs) {
        let toStderr = o.outputs.contains("-")
        func say(_ line: String) { if toStderr { warn(line) } else { print(line) } }
        if o.statsJSON { say(stats.json(stream: o.input, mode: o.consumerOptions.mode)) }
        guard !o.quiet else { return }
        say("sink: \(o.input) (\(o.consumerOptions.mode.rawValue)): \(stats.summary)")
        if let mediaFile = outputs.mediaFile, let record = o.record {
            let what = mediaFile.outputDescription.map { " (\($0))" } ?? ""
            say("record: \(record)\(what): \(mediaFile.frames) frames, \(mediaFile.bytesWritten) bytes"
                + (mediaFile.convertedFrames > 0 ? ", \(mediaFile.convertedFrames) converted" : "")
                + (o.mediaFileOptions.frameRateMode == .cfr ? ", \(mediaFile.duplicated) duplicated, \(mediaFile.dropped) dropped" : ""))
        }
        for (writer, path) in [(outputs.y4m, o.y4m), (outputs.raw, o.raw)] {
            guard let writer, let path, writer.convertedFrames > 0 else { continue }
            warn("\(path): \(writer.convertedFrames) frames converted to the first frame's size and format")
        }
    }
}
