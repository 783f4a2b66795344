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
                           it (size, frame rate, aspect ratio, colour space, range; 4:2:0 is tagged
                           420jpeg: frames carry no chroma location), the planes written from the
                           slots in place: 'framesrv sink --in A --y4m - | ffplay -'. y4m carries
                           \(PackedVideoWriter.y4mFormats.joined(separator: ", "));
                           other formats are an error (use --raw or --record, or produce --pix-fmt)
      --raw FILE|-         write the planes tightly packed, frame after frame (ffmpeg's -f rawvideo);
                           prints the ffmpeg options that read it back on stderr once
      --record FILE        encode with libavcodec into a .mp4, .mov, .mkv or .nut file (the container
                           from the extension). Frame rate and timestamps are the stream's. The pixel
                           format is the stream's when the encoder takes it, else the encoder's best
                           match (converted with libswscale: the stream's colour matrix and range).
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
      -f FMT               --record's container, overriding the extension: any libavformat muxer
                           (mp4, mov, matroska, nut, ...)

    When the size or pixel format changes mid-stream, --y4m, --raw and --record keep the first
    frame's: later frames are scaled and converted to it with libswscale.

    Options:
      --lossless           every frame, in order; the producer waits for this consumer (default)
      --live               the newest frame only; never slows the producer, counts misses
      --wait SECONDS       give up if the stream has not appeared by then (default: wait forever)
      --frames N           stop after N frames
      --verify             check every byte of every frame against the test pattern (with --null)
      --hold-us A[-B]      hold each frame A (to B, random) microseconds before releasing it
      --seq-log FILE       append one line per event: 'attach PID', 'frame SEQ', 'corrupt SEQ', 'gone PID'
      --stats-json         print the final statistics as one JSON line
      --no-reattach        exit with an error when the producer dies instead of waiting for it
      --name NAME          what this consumer is called in 'framesrv inspect' (default: sink)
      --rcvhwm N           ZeroMQ receive high-water mark in messages (default 1000)
      --quiet              no summary line, no progress line, no read-back hint

    On a terminal, a status line (frame= fps= [size=] time= [bitrate=] speed=) is refreshed
    on stderr twice a second, as ffmpeg does.
    """

    static func run(_ args: inout Arguments) throws -> Int32 {
        let input = try args.value("--in", "-i")
        let null = args.flag("--null")
        let framemd5 = try args.value("--framemd5")
        let y4m = try args.value("--y4m")
        let raw = try args.value("--raw")
        let record = try args.value("--record")
        let container = try args.value("-f", "--format")
        let codec = try args.value("-c:v", "-vcodec", "--codec")
        let bitRateText = try args.value("-b:v", "--bitrate")
        let crf = try args.double("--crf", range: 0...63)
        let gop = try args.int("-g", "--gop", range: 1...1_000_000)
        let preset = try args.value("--preset")
        let live = args.flag("--live")
        let lossless = args.flag("--lossless")
        let wait = try args.double("--wait", range: 0...1e9)
        let frames = try args.int("--frames", range: 1...Int.max)
        let verify = args.flag("--verify")
        let hold = try parseHold(try args.value("--hold-us"))
        let seqLog = try args.value("--seq-log")
        let statsJSON = args.flag("--stats-json")
        let noReattach = args.flag("--no-reattach")
        let name = try args.value("--name") ?? "sink"
        let rcvhwm = try args.int("--rcvhwm", range: 1...1_000_000) ?? 1000
        let quiet = args.flag("--quiet", "-q")
        try args.finish()

        guard let input else { throw UsageError("missing --in NAME: the stream to read") }
        let outputs = [framemd5, y4m, raw, record].compactMap { $0 }
        guard null || !outputs.isEmpty else {
            throw UsageError("say where frames go: --null, --framemd5 FILE|-, --y4m FILE|-, --raw FILE|- or --record FILE")
        }
        guard !null || outputs.isEmpty else { throw UsageError("--null discards frames: it goes with no other output") }
        guard outputs.filter({ $0 == "-" }).count <= 1 else { throw UsageError("only one output can go to standard output (-)") }
        guard record != "-" else { throw UsageError("--record needs a file name (for a pipe: --y4m - or --raw -)") }
        guard outputs.isEmpty || !verify else { throw UsageError("--verify goes with --null") }
        guard !(live && lossless) else { throw UsageError("choose one of --live and --lossless") }
        var recordOptions = RecordOptions()
        if record == nil {
            let given = [("-f", container), ("-c:v", codec), ("-b:v", bitRateText), ("--preset", preset)].filter { $0.1 != nil }.map(\.0)
                + (crf != nil ? ["--crf"] : []) + (gop != nil ? ["-g"] : [])
            if let first = given.first { throw UsageError("\(first) goes with --record FILE") }
        } else {
            recordOptions.container = container
            if let codec { recordOptions.codec = codec }
            recordOptions.bitRate = try bitRateText.map { t throws(UsageError) in try parseBitRate(t) }
            recordOptions.crf = crf
            recordOptions.gop = gop
            recordOptions.preset = preset
        }
        // The recorder first: its checks (container, encoder, settings, path) fail before any other file is truncated.
        let recorder = try record.map { path throws(MediaOutputError) in try Recorder(path: path, options: recordOptions) }
        let stop = { stopRequested != 0 }
        let y4mWriter = try y4m.map { path throws(MediaOutputError) in try PackedVideoWriter(path: path, kind: .y4m, shouldStop: stop) }
        let rawWriter = try raw.map { path throws(MediaOutputError) in try PackedVideoWriter(path: path, kind: .raw, shouldStop: stop) }
        let md5Writer = try framemd5.map { path throws(MediaError) in try FrameMD5Writer(path: path) }

        var logFD: Int32 = -1
        if let seqLog {
            logFD = open(seqLog, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            guard logFD >= 0 else { throw FrameServerError.system("open", path: seqLog, .current) }
        }
        defer { if logFD >= 0 { close(logFD) } }
        // One write(2) per line: a sink killed with SIGKILL leaves a log that is complete up to its death.
        func log(_ line: String) {
            guard logFD >= 0 else { return }
            var l = line + "\n"
            l.withUTF8 { _ = write(logFD, $0.baseAddress, $0.count) }
        }

        var options = ConsumerOptions(mode: live ? .live : .lossless)
        options.waitSeconds = wait
        options.reattach = !noReattach
        options.name = name
        options.receiveHighWaterMark = Int32(rcvhwm)
        installStopHandlers()
        let consumer = try Consumer(stream: input, options: options)
        consumer.shouldStop = { stopRequested != 0 }
        consumer.onEvent = { event in
            switch event {
            case .attached(let pid):
                log("attach \(pid)")
            case .producerGone(let pid):
                log("gone \(pid)")
                warn("producer of '\(input)' (pid \(pid)) exited without ending the stream; waiting for it to come back")
            }
        }

        var stats = SinkStatistics()
        var rng = SystemRandomNumberGenerator()
        var frameRateRead = false
        var frameRate: Double?
        var clock = MediaClock()
        var progress = Progress(enabled: stderrIsTerminal && !quiet)
        let start = monotonicNanos()
        do {
            while stopRequested == 0, frames.map({ stats.received < $0 }) ?? true, let frame = try consumer.next() {
                stats.record(frame)
                if !frameRateRead {
                    frameRateRead = true
                    // ffmpeg's framemd5 time base is 1/frame rate: the producer's nominal rate.
                    let rate = (try? StreamSnapshot.read(input, in: consumer.directory)).map(\.nominalRate)
                    frameRate = rate.flatMap { $0 > 0 ? $0 : nil }
                    md5Writer?.frameRate = frameRate
                    y4mWriter?.frameRate = frameRate
                    rawWriter?.frameRate = frameRate
                    recorder?.frameRate = frameRate
                }
                try md5Writer?.write(frame)
                try y4mWriter?.write(frame)
                if let rawWriter {
                    let first = rawWriter.frames == 0
                    try rawWriter.write(frame)
                    if first, !quiet, let options = rawWriter.readBackOptions {
                        warn("raw: read it back with: ffmpeg \(options) -i \(raw == "-" ? "-" : raw!)")
                    }
                }
                try recorder?.write(frame)
                if verify, !TestPattern.verify(frame) {
                    stats.corrupt += 1
                    log("corrupt \(frame.sequence)")
                }
                log("frame \(frame.sequence)")
                clock.record(frame.header.description, frameRate: frameRate)
                if let hold {
                    let us = hold.lowerBound == hold.upperBound ? hold.lowerBound : Int.random(in: hold, using: &rng)
                    if us > 0 { usleep(UInt32(us)) }
                }
                frame.release()
                progress.update(frames: stats.received, mediaSeconds: clock.seconds, bytes: recorder?.bytesWritten)
            }
        } catch {
            // Keep what was written: complete the recording and the checksums before reporting.
            try? recorder?.finish()
            try? md5Writer?.flush()
            progress.finish(frames: stats.received, mediaSeconds: clock.seconds, bytes: recorder?.bytesWritten)
            throw error
        }
        try recorder?.finish()
        try md5Writer?.flush()
        progress.finish(frames: stats.received, mediaSeconds: clock.seconds, bytes: recorder?.bytesWritten)
        stats.missed = consumer.missed
        stats.seconds = Double(monotonicNanos() - start) / 1e9
        // With frames or checksums on standard output, statistics go to standard error.
        let toStderr = outputs.contains("-")
        if statsJSON {
            let line = stats.json(stream: input, mode: options.mode)
            if toStderr { warn(line) } else { print(line) }
        }
        if !quiet {
            let line = "sink: \(input) (\(options.mode.rawValue)): \(stats.summary)"
            if toStderr { warn(line) } else { print(line) }
            if let recorder, let record {
                let what = recorder.outputDescription.map { " (\($0))" } ?? ""
                let line = "record: \(record)\(what): \(recorder.frames) frames, \(recorder.bytesWritten) bytes"
                    + (recorder.convertedFrames > 0 ? ", \(recorder.convertedFrames) converted" : "")
                if toStderr { warn(line) } else { print(line) }
            }
            for (writer, path) in [(y4mWriter, y4m), (rawWriter, raw)] {
                guard let writer, let path, writer.convertedFrames > 0 else { continue }
                warn("\(path): \(writer.convertedFrames) frames converted to the first frame's size and format")
            }
        }
        return stats.corrupt == 0 ? 0 : 3
    }

    /// `2M`, `800k`, `1.5M`, `500000`: bits per second.
    static func parseBitRate(_ text: String) throws(UsageError) -> Int64 {
        var t = Substring(text)
        var scale = 1.0
        if let last = t.last, let s = ["k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9][last] {
            scale = s
            t = t.dropLast()
        }
        guard let v = Double(t), v.isFinite, v > 0, v * scale >= 1, v * scale <= 1e11 else {
            throw UsageError("-b:v must be a bit rate such as 2M, 800k or 500000, not '\(text)'")
        }
        return Int64((v * scale).rounded())
    }

    static func parseHold(_ text: String?) throws(UsageError) -> ClosedRange<Int>? {
        guard let text else { return nil }
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let a = Int(parts[0]), let b = Int(parts.last!), a >= 0, b >= a, b <= 10_000_000 else {
            throw UsageError("--hold-us takes MICROSECONDS or MIN-MAX (for example 0-2000), not '\(text)'")
        }
        return a...b
    }
}

/// What a sink counts: frames, sequence range, misses, corruption, latency.
struct SinkStatistics {
    var received = 0
    var first: UInt64 = 0
    var last: UInt64 = 0
    var corrupt = 0
    var missed: UInt64 = 0
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
            + "latency p50 \(formatDouble(percentileMicros(0.5))) us p99 \(formatDouble(percentileMicros(0.99))) us, "
            + "\(formatDouble(Double(received) / max(seconds, 1e-9), 0)) fps"
    }

    func json(stream: String, mode: DeliveryMode) -> String {
        "{\"stream\":\"\(stream)\",\"mode\":\"\(mode.rawValue)\",\"received\":\(received),\"first\":\(first),\"last\":\(last),"
            + "\"missed\":\(missed),\"corrupt\":\(corrupt),\"seconds\":\(seconds),"
            + "\"latency_p50_us\":\(percentileMicros(0.5)),\"latency_p99_us\":\(percentileMicros(0.99))}"
    }
}
