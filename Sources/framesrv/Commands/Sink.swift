import FrameMedia
import FrameServer
import Glibc

/// `framesrv sink`: consumes a stream.
enum SinkCommand: Command {
    static let name = "sink"
    static let summary = "consume a stream (--null: count, verify and print statistics; --framemd5: checksums)"
    static let help = """
    usage: framesrv sink --in NAME --null [options]
           framesrv sink --in NAME --framemd5 FILE|- [options]

    Attaches to stream NAME (waiting for it to appear), reads every frame in place and
    releases it. Exits 0 after the end of the stream.

      --in NAME            the stream to read
      --null               discard frames; count them and print statistics
      --framemd5 FILE|-    write what 'ffmpeg -i INPUT -map 0:v:0 -f framemd5' writes for these
                           frames (- for standard output; the summary line then goes to stderr)
      --lossless           every frame, in order; the producer waits for this consumer (default)
      --live               the newest frame only; never slows the producer, counts misses
      --wait SECONDS       give up if the stream has not appeared by then (default: wait forever)
      --frames N           stop after N frames
      --verify             check every byte of every frame against the test pattern
      --hold-us A[-B]      hold each frame A (to B, random) microseconds before releasing it
      --seq-log FILE       append one line per event: 'attach PID', 'frame SEQ', 'corrupt SEQ', 'gone PID'
      --stats-json         print the final statistics as one JSON line
      --no-reattach        exit with an error when the producer dies instead of waiting for it
      --name NAME          what this consumer is called in 'framesrv inspect' (default: sink)
      --rcvhwm N           ZeroMQ receive high-water mark in messages (default 1000)
      --quiet              no summary line
    """

    static func run(_ args: inout Arguments) throws -> Int32 {
        let input = try args.value("--in", "-i")
        let null = args.flag("--null")
        let framemd5 = try args.value("--framemd5")
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
        guard null != (framemd5 != nil) else {
            throw UsageError("say where frames go: --null or --framemd5 FILE|- (more sinks come with the filter and sink issue)")
        }
        guard framemd5 == nil || !verify else { throw UsageError("--verify goes with --null") }
        let md5Writer = try framemd5.map { path throws(MediaError) in try FrameMD5Writer(path: path) }
        guard !(live && lossless) else { throw UsageError("choose one of --live and --lossless") }

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
        let start = monotonicNanos()
        while stopRequested == 0, frames.map({ stats.received < $0 }) ?? true, let frame = try consumer.next() {
            stats.record(frame)
            if let md5Writer {
                if !frameRateRead {
                    frameRateRead = true
                    // ffmpeg's framemd5 time base is 1/frame rate: the producer's nominal rate.
                    let rate = (try? StreamSnapshot.read(input, in: consumer.directory)).map(\.nominalRate)
                    md5Writer.frameRate = rate.flatMap { $0 > 0 ? $0 : nil }
                }
                try md5Writer.write(frame)
            }
            if verify, !TestPattern.verify(frame) {
                stats.corrupt += 1
                log("corrupt \(frame.sequence)")
            }
            log("frame \(frame.sequence)")
            if let hold {
                let us = hold.lowerBound == hold.upperBound ? hold.lowerBound : Int.random(in: hold, using: &rng)
                if us > 0 { usleep(UInt32(us)) }
            }
            frame.release()
        }
        try md5Writer?.flush()
        stats.missed = consumer.missed
        stats.seconds = Double(monotonicNanos() - start) / 1e9
        // With checksums on standard output, statistics go to standard error.
        let toStderr = framemd5 == "-"
        if statsJSON {
            let line = stats.json(stream: input, mode: options.mode)
            if toStderr { warn(line) } else { print(line) }
        }
        if !quiet {
            let line = "sink: \(input) (\(options.mode.rawValue)): \(stats.summary)"
            if toStderr { warn(line) } else { print(line) }
        }
        return stats.corrupt == 0 ? 0 : 3
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
