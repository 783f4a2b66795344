import Foundation
import FrameServer
import Glibc

/// `framesrv top`: every stream and consumer, refreshed, in the spirit of `pw-top`.
enum TopCommand: Command {
    static let name = "top"
    static let summary = "a refreshing view of every stream and consumer: fps, slots, lag, latency"
    static let help = """
    usage: framesrv top [-d SECONDS] [-n N] [-b | --json]

    One row per stream and an indented row per consumer, refreshed every -d seconds.
    Reads the streams' shared statistics only: top never attaches, holds no slot and
    never slows a pipeline. On a terminal it redraws the screen (rows cut to its width);
    otherwise, or with -b, it prints one plain text block per refresh.

      -d SECONDS   refresh interval (default 1)
      -n N         stop after N refreshes (default: until SIGINT)
      -b           batch mode: plain text blocks separated by a blank line, no escape codes
      --json       one JSON object per refresh and line: {"time": UNIX SECONDS, "streams": [...]},
                   with the columns below ("fps" is absent on the first refresh)

    columns:
      NAME         stream, or consumer (indented)
      STATE        running/ended/dead (stream), attaching/active/closing (consumer)
      PID          producer or consumer process
      FPS          measured between two refreshes: frames published (stream) or delivered
                   (consumer) per second; "-" on the first refresh
      SLOTS        total/in use/minimum free ever
      MODE         lossless or live
      HELD         slots the consumer holds now
      HOLDms       how long its oldest current hold has lasted
      LAG          frames published that the consumer has not been handed yet
      MISS         frames a live consumer skipped (and stale announcements it saw)
      STALE        acquisitions refused because the slot had been recycled
      DROP         frames the producer's live source dropped for want of a free slot
      P50, P99     publish -> acquire latency percentiles from the consumer's histogram of
                   power-of-two buckets: the upper bound of the bucket holding the
                   percentile ("<64us" = under 64 us; ">=16384us" = the open last bucket)
      FORMAT       size, pixel format, matrix/range of the newest frame
    """

    /// How a refresh is shown.
    enum Output { case terminal, text, json }

    static func run(_ o: TopOptions) throws -> Int32 {
        let (interval, count, batch, json) = (o.interval, o.count, o.batch, o.json)
        // Watching must not create the directory: until it appears, there are no streams.
        var dir = try RuntimeDirectory.existing()
        let output: Output = json ? .json : !batch && isatty(1) != 0 ? .terminal : .text

        installStopHandlers()
        if output == .terminal { writeOut(hideCursor) }
        defer { if output == .terminal { writeOut(showCursor + "\n") } }

        var previous: TopSample?
        var refreshes = 0
        var warnings = WarningLog()
        while !StopSignal.requested {
            if dir == nil { dir = try RuntimeDirectory.existing() }
            let sample = TopSample.take(dir)
            warnings.report(sample.warnings)
            let report = TopReport(sample, previous: previous)
            guard show(report, output, directory: dir?.path ?? RuntimeDirectory.defaultPath, interval: interval, first: refreshes == 0) else { break }
            previous = sample
            refreshes += 1
            if let count, refreshes >= count { break }
            pause(seconds: interval)
        }
        return 0
    }

    static let clearScreen = "\u{1B}[H\u{1B}[2J"
    static let hideCursor = "\u{1B}[?25l"
    static let showCursor = "\u{1B}[?25h"

    /// Shows one refresh; false once standard output is gone (a closed pipe).
    static func show(_ report: TopReport, _ output: Output, directory: String, interval: Double,
                     first: Bool) -> Bool {
        switch output {
        case .json:
            guard let line = try? encodeJSON(report) else { return false }
            return writeOut(line + "\n")
        case .text:
            let lines = report.streams.isEmpty ? ["no streams in \(directory)"] : report.table()
            return writeOut((first ? "" : "\n") + lines.joined(separator: "\n") + "\n")
        case .terminal:
            let size = terminalSize()
            var lines = report.table(title: "framesrv top: \(directory), refresh every \(formatDouble(interval, 2)) s")
            if report.streams.isEmpty { lines.append("no streams") }
            let visible = lines.prefix(size.rows).map { line in
                var cut = String(line.prefix(size.columns))
                while cut.last == " " { cut.removeLast() }
                return cut
            }
            // No newline after the last row: it would scroll a full screen by one line.
            return writeOut(clearScreen + visible.joined(separator: "\n"))
        }
    }

    /// Sleeps `seconds` in short steps, returning early on SIGINT/SIGTERM.
    static func pause(seconds: Double) {
        let deadline = monotonicNanos() + UInt64(seconds * 1e9)
        while !StopSignal.requested {
            let now = monotonicNanos()
            guard now < deadline else { return }
            usleep(UInt32(min(deadline - now, 50_000_000) / 1000))
        }
    }

    /// The terminal's rows and columns (80 columns, unlimited rows when it does not say).
    static func terminalSize() -> (rows: Int, columns: Int) {
        var size = winsize()
        guard ioctl(1, UInt(TIOCGWINSZ), &size) == 0 else { return (Int.max, 80) }
        return (size.ws_row > 0 ? Int(size.ws_row) : Int.max, size.ws_col > 0 ? Int(size.ws_col) : 80)
    }

    /// Writes to standard output with write(2), unbuffered, so each refresh appears whole and
    /// at once; false if it failed (nobody reads any more).
    @discardableResult
    static func writeOut(_ text: String) -> Bool {
        var text = text
        return text.withUTF8 { bytes in (try? writeAll(1, UnsafeRawBufferPointer(bytes))) != nil }
    }
}

/// Every stream's snapshot at one moment.
struct TopSample {
    let unixTime: Double
    let nanos: UInt64
    let streams: [StreamSnapshot]
    /// One line for each stream (or consumer entry) skipped because it could not be read.
    let warnings: [String]

    /// `dir` nil: there is no runtime directory yet, so no streams.
    static func take(_ dir: RuntimeDirectory?) -> TopSample {
        let nanos = monotonicNanos()
        let (streams, warnings) = dir.map { StreamSnapshot.scan(in: $0) } ?? ([], [])
        return TopSample(unixTime: Date().timeIntervalSince1970, nanos: nanos, streams: streams, warnings: warnings)
    }

    /// The same stream in this sample: same name and same producer (a restart resets the counters).
    func stream(like s: StreamSnapshot) -> StreamSnapshot? {
        streams.first { $0.name == s.name && $0.producerPID == s.producerPID }
    }
}

/// Prints each monitor warning (a stream skipped as unreadable) once, on standard error.
struct WarningLog {
    private var seen = Set<String>()
    mutating func report(_ warnings: [String]) {
        for w in warnings where seen.insert(w).inserted { warn("warning: \(w)") }
    }
}

/// Events per second of a counter between two readings `seconds` apart; nil without an
/// earlier reading of the same counter.
func measuredRate(_ now: UInt64, since before: UInt64?, seconds: Double) -> Double? {
    guard let before, now >= before, seconds > 0 else { return nil }
    return Double(now - before) / seconds
}

/// One refresh of `top`, as printed and as encoded with --json.
struct TopReport: Encodable {
    let time: Double
    let streams: [TopStream]

    init(_ sample: TopSample, previous: TopSample?) {
        time = sample.unixTime
        let seconds = previous.map { Double(sample.nanos - $0.nanos) / 1e9 } ?? 0
        streams = sample.streams.map { s in TopStream(s, before: previous?.stream(like: s), seconds: seconds) }
    }

    static let widths = [22, 8, 8, 8, 9, 9, 5, 8, 6, 7, 6, 6, 10, 10]

    static func fps(_ fps: Double?) -> String { fps.map { formatDouble($0) } ?? "-" }

    /// The column header and one row per stream and consumer.
    func table(title: String? = nil) -> [String] {
        var lines = title.map { [$0] } ?? []
        func add(_ cells: [String]) {
            var line = row(Self.widths, cells)
            while line.last == " " { line.removeLast() }
            lines.append(line)
        }
        add(["NAME", "STATE", "PID", "FPS", "SLOTS", "MODE", "HELD", "HOLDms", "LAG", "MISS", "STALE", "DROP",
             "P50", "P99", "FORMAT"])
        for s in streams {
            add([s.name, s.state, "\(s.producerPID)", Self.fps(s.fps), "\(s.slots)/\(s.slotsInUse)/\(s.minFreeSlots)",
                 "", "", "", "", "", "", "\(s.dropped)", "", "", s.format ?? "-"])
            for c in s.consumers {
                add(["  " + c.name, c.state, "\(c.pid)", Self.fps(c.fps), "", c.mode, "\(c.held)", formatDouble(c.holdMillis),
                     "\(c.lag)", "\(c.missed)", "\(c.stale)", "", c.latencyP50, c.latencyP99])
            }
        }
        return lines
    }
}

/// A stream's row: counters from its snapshot, fps measured since the previous refresh.
struct TopStream: Encodable {
    let name: String
    let state: String
    let producerPID: Int32
    let fps: Double?
    let format: String?
    let slots: Int
    let slotsInUse: Int
    let minFreeSlots: UInt64
    let published: UInt64
    let dropped: UInt64
    let nominalRate: Rational?
    let consumers: [TopConsumer]

    init(_ s: StreamSnapshot, before: StreamSnapshot?, seconds: Double) {
        name = s.name
        state = s.state
        producerPID = s.producerPID
        fps = measuredRate(s.published, since: before?.published, seconds: seconds)
        format = s.format
        slots = s.slots
        slotsInUse = s.slots - s.freeSlots
        minFreeSlots = s.minFreeSlots
        published = s.published
        dropped = s.dropped
        nominalRate = s.nominalRate
        consumers = s.consumers.map { c in
            TopConsumer(c, before: before?.consumers.first { $0.index == c.index && $0.pid == c.pid }, seconds: seconds)
        }
    }
}

/// A consumer's row: counters from its snapshot, fps and latency percentiles computed.
struct TopConsumer: Encodable {
    let index: Int
    let pid: Int32
    let name: String
    let mode: String
    let state: String
    let fps: Double?
    let delivered: UInt64
    let held: UInt64
    let holdMillis: Double
    let lag: UInt64
    let missed: UInt64
    let stale: UInt64
    /// Upper bounds of the percentiles' histogram buckets (absent before the first frame
    /// and for the open last bucket), and the same as shown: "<64us", ">=16384us" or "-".
    let latencyP50Micros: UInt64?
    let latencyP99Micros: UInt64?
    let latencyP50: String
    let latencyP99: String

    init(_ c: ConsumerSnapshot, before: ConsumerSnapshot?, seconds: Double) {
        index = c.index
        pid = c.pid
        name = c.name
        mode = c.mode
        state = c.state
        fps = measuredRate(c.delivered, since: before?.delivered, seconds: seconds)
        delivered = c.delivered
        held = c.held
        holdMillis = c.holdMillis
        lag = c.lag
        missed = c.missed
        stale = c.stale
        let p50 = c.latencyPercentileMicros(0.5), p99 = c.latencyPercentileMicros(0.99)
        latencyP50Micros = p50 == ConsumerSnapshot.latencyUnbounded ? nil : p50
        latencyP99Micros = p99 == ConsumerSnapshot.latencyUnbounded ? nil : p99
        latencyP50 = Self.label(p50)
        latencyP99 = Self.label(p99)
    }

    /// "<64us" for a bucket's upper bound, ">=16384us" for the open last bucket, "-" for none.
    static func label(_ bound: UInt64?) -> String {
        guard let bound else { return "-" }
        guard bound == ConsumerSnapshot.latencyUnbounded else { return "<\(bound)us" }
        return ">=\(ConsumerSnapshot.latencyUnboundedFromMicros)us"
    }
}
