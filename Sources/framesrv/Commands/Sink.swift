import FrameMedia
import FrameServer
import Glibc

/// `framesrv sink`: consumes a stream.
enum SinkCommand: Command {
    static let name = "sink"
    static let summary = "consume a stream (--null: count and verify; --framemd5, --y4m, --raw: write it; --record: encode it)"
    static let help = """
    usage: framesrv sink --in NAME --null [options]
           framesrv sink --in NAME [--framemd5 FILE|-] [--y4m FILE|-] [--raw FILE|-] [--record FILE] [options]

    Attaches to stream NAME (waiting for it to appear), reads every frame in place and
    releases it. Exits 0 after the end of the stream, and on SIGINT/SIGTERM (files are
    completed first). The outputs below can be combined; at most one writes to standard output.

      --in NAME            the stream to read
      --null               discard frames; count them and print statistics
      --framemd5 FILE|-    write what 'ffmpeg -i INPUT -map 0:v:0 -f framemd5' writes for these
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

    When the size or pixel format changes mid-stream, --y4m, --raw and --record keep the first
    frame's: later frames are scaled and converted to it with libswscale.

    Options:
      --lossless           every frame, in order; the producer waits for this consumer (default)
      --live               the newest frame only; never slows the producer, counts misses
      --poll-us N          busy-poll up to N us per frame before sleeping (0..1000000, default
                           0): trades a core for wake latency; on a paced stream the window is
                           centred on when the next frame is due
      --wait SECONDS       give up if the stream has not appeared by then (default: wait forever,
                           saying so once on a terminal); also waits past a stream that already
                           ended (without --wait that is one error line: its frames went to nobody)
      --frames N           stop after N frames
      --verify             check every byte of every frame against the test pattern (with --null)
      --hold-us A[-B]      hold each frame A (to B, random) microseconds before releasing it
      --seq-log FILE       append one line per event: 'attach PID', 'frame SEQ', 'corrupt SEQ', 'gone PID'
      --stats-json         print the final statistics as one JSON line
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
        let outputs = try SinkOutputs(framemd5: o.framemd5, y4m: o.y4m, raw: o.raw, record: o.record,
                                      mediaFileOptions: o.mediaFileOptions) { StopSignal.requested }
        let log = try SequenceLog(path: o.seqLog)
        installStopHandlers()
        let consumer = try Consumer(stream: o.input, options: o.consumerOptions)
        consumer.shouldStop = StopSignal.shouldStop
        var producerGone: Int32?
        consumer.onEvent = { event in
            switch event {
            case .waiting:
                if stderrIsTerminal, !o.quiet { warn(waitingLine(o.input)) }
            case .attached(let pid):
                log.write("attach \(pid)")
                producerGone = nil
            case .producerGone(let pid):
                log.write("gone \(pid)")
                producerGone = pid
                // Without reattaching, the error that ends the sink is the one line said.
                if o.consumerOptions.reattach {
                    warn("producer of '\(o.input)' (pid \(pid)) exited without ending the stream; waiting for it to come back")
                }
            }
        }
        var run = SinkRun(options: o, outputs: outputs, log: log)
        do {
            try run.consume(consumer)
        } catch {
            // Keep what was written: complete the recording and the checksums before reporting.
            try? outputs.finish()
            run.progress.finish(frames: run.stats.received, mediaSeconds: run.clock.seconds, bytes: outputs.bytesRecorded)
            throw error
        }
        try outputs.finish()
        run.progress.finish(frames: run.stats.received, mediaSeconds: run.clock.seconds, bytes: outputs.bytesRecorded)
        run.stats.missed = consumer.missed
        report(o, run.stats, outputs)
        if let pid = producerGone {
            // Stopped while the stream's producer was gone without ending it: the stream did not end.
            throw CommandError.producerExited(stream: o.input, pid: pid)
        }
        if consumer.sourceFailed {
            throw CommandError.sinkInputFailed(stream: o.input, received: run.stats.received)
        }
        return run.stats.corrupt == 0 ? .success : .corruptFrames
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

/// What a sink counts: frames, sequence range, misses, corruption, latency.
struct SinkStatistics {
    var received = 0
    var first: UInt64 = 0
    var last: UInt64 = 0
    var corrupt = 0
    var missed: UInt64 = 0
    /// Frames the live source upstream dropped before frames this sink received
    /// (`fs_frame.source_dropped`), and the frames that carried the discontinuity flag.
    var droppedAtSource: UInt64 = 0
    var discontinuities = 0
    var seconds = 0.0
    /// Latency samples in ns; the first million are kept (8 MB), enough for percentiles.
    private var latencies: [UInt64] = {
        var a: [UInt64] = []
        a.reserveCapacity(1 << 20)
        return a
    }()

    mutating func record(_ frame: borrowing Frame) {
        received += 1
        if first == 0 { first = frame.sequence }
        last = frame.sequence
        if frame.header.flags.contains(.discontinuity) {
            discontinuities += 1
            droppedAtSource += UInt64(frame.header.sourceDropped)
        }
        if latencies.count < latencies.capacity { latencies.append(frame.latencyNanos) }
    }

    func percentileMicros(_ p: Double) -> Double {
        guard !latencies.isEmpty else { return 0 }
        let sorted = latencies.sorted()
        let i = min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))
        return Double(sorted[i]) / 1000
    }

    var summary: String {
        "received \(received) frames (first \(first), last \(last)), missed \(missed), corrupt \(corrupt), "
            + "dropped at source \(droppedAtSource) (\(discontinuities) discontinuit\(discontinuities == 1 ? "y" : "ies")), "
            + "latency p50 \(formatDouble(percentileMicros(0.5))) us p99 \(formatDouble(percentileMicros(0.99))) us, "
            + "\(formatDouble(Double(received) / max(seconds, 1e-9), 0)) fps"
    }

    func json(stream: String, mode: DeliveryMode) -> String {
        "{\"stream\":\"\(stream)\",\"mode\":\"\(mode.rawValue)\",\"received\":\(received),\"first\":\(first),\"last\":\(last),"
            + "\"missed\":\(missed),\"corrupt\":\(corrupt),\"dropped_at_source\":\(droppedAtSource),"
            + "\"discontinuities\":\(discontinuities),\"seconds\":\(seconds),"
            + "\"latency_p50_us\":\(percentileMicros(0.5)),\"latency_p99_us\":\(percentileMicros(0.99))}"
    }
}

/// --seq-log FILE: one write(2) per line, so a sink killed with SIGKILL leaves a log that is
/// complete up to its death.
final class SequenceLog {
    private let descriptor: FileDescriptor?
    init(path: String?) throws {
        guard let path else { descriptor = nil; return }
        do { descriptor = try .open(path, O_WRONLY | O_CREAT | O_APPEND, mode: 0o644) } catch {
            throw SystemCallError("open", path: path, error)
        }
    }
    /// Appends `line` (built only when there is a log: the null sink pays nothing per frame).
    func write(_ line: @autoclosure () -> String) {
        guard descriptor != nil else { return }
        var l = line() + "\n"
        l.withUTF8 { bytes in _ = try? descriptor?.writeAll(UnsafeRawBufferPointer(bytes)) }
    }
}

/// One sink's pass over its stream: every frame to the outputs, verified, logged, held and counted.
struct SinkRun {
    let options: SinkOptions
    let outputs: SinkOutputs
    let log: SequenceLog
    var stats = SinkStatistics()
    var clock = MediaClock()
    var progress: Progress
    private var frameRate: Rational?
    private var rng = SystemRandomNumberGenerator()

    init(options: SinkOptions, outputs: SinkOutputs, log: SequenceLog) {
        self.options = options
        self.outputs = outputs
        self.log = log
        progress = Progress(enabled: stderrIsTerminal && !options.quiet)
    }

    mutating func consume(_ consumer: Consumer) throws {
        let start = monotonicNanos()
        defer { stats.seconds = Double(monotonicNanos() - start) / 1e9 }
        while !StopSignal.requested, options.frames.map({ stats.received < $0 }) ?? true, let frame = try consumer.next() {
            stats.record(frame)
            if stats.received == 1 {
                // ffmpeg's framemd5 time base is 1/frame rate: the producer's exact nominal rate.
                frameRate = consumer.nominalRate
                outputs.frameRate = frameRate
            }
            let firstRaw = outputs.raw?.frames == 0
            try outputs.write(frame)
            if stats.received == 1, !options.quiet { for note in outputs.mediaFile?.notes ?? [] { warn("note: " + note) } }
            if firstRaw, !options.quiet, let raw = options.raw, let readBack = outputs.raw?.readBackOptions {
                warn("raw: read it back with: ffmpeg \(readBack) -i \(raw)")
            }
            if options.verify, !TestPattern.verify(frame) {
                stats.corrupt += 1
                log.write("corrupt \(frame.sequence)")
            }
            log.write("frame \(frame.sequence)")
            if progress.enabled { clock.record(frame.header.description, frameRate: frameRate?.doubleValue) }
            hold()
            frame.release()
            progress.update(frames: stats.received, mediaSeconds: clock.seconds, bytes: outputs.bytesRecorded)
        }
    }

    /// --hold-us A[-B]: keeps the frame that long before releasing it.
    private mutating func hold() {
        guard let hold = options.hold else { return }
        let us = hold.lowerBound == hold.upperBound ? hold.lowerBound : Int.random(in: hold, using: &rng)
        if us > 0 { usleep(UInt32(us)) }
    }
}
