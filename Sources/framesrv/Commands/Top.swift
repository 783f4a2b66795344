import FoundationEssentials
import FrameMedia
import FrameMonitor
import FrameServer
import Glibc

/// `framesrv top`: every stream and consumer, refreshed, in the spirit of `pw-top`.
enum TopCommand: Command {
    static let name = "top"
    static let summary = "a refreshing view of every stream and consumer: fps, slots, lag, latency"
    static let help = """
    usage: framesrv top [-d SECONDS] [-n N] [-w COLUMNS] [-b | --json]

    One row per stream and an indented row per consumer, refreshed every -d seconds.
    Reads the streams' shared statistics only: top never attaches, holds no slot and
    never slows a pipeline. On a terminal it redraws the screen; otherwise, or with -b,
    it prints one plain text block per refresh. Rows fit the terminal's width (or -w, or
    $COLUMNS): the least useful columns are left out first (MINFREE, STALE, HOLDms, PID, P50, ...),
    and NAME, STATE, FPS, LAG, DROP and HELD (who lags, at what rate) stay longest.

      -d SECONDS   refresh interval (default 1)
      -n N         stop after N refreshes (default: until SIGINT)
      -w COLUMNS   the width rows fit (default: the terminal's, $COLUMNS, or no limit)
      -b           batch mode: plain text blocks separated by a blank line, no escape codes
      --json       one JSON object per refresh and line: {"time": UNIX SECONDS, "streams": [...]},
                   with the columns below ("fps" is absent on the first refresh)

    columns (the same in ls and inspect):
    \(MonitorColumn.legend)
    """

    /// How a refresh is shown.
    enum Output { case terminal, text, json }

    static func run(_ o: TopOptions) throws -> ExitStatus {
        let (interval, count, batch, json) = (o.interval, o.count, o.batch, o.json)
        // Watching must not create the directory: until it appears, there are no streams.
        var dir = try RuntimeDirectory.existing()
        let output: Output = json ? .json : !batch && isatty(1) != 0 ? .terminal : .text

        installStopHandlers()
        if output == .terminal { writeOut(hideCursor) }
        defer { if output == .terminal { writeOut(showCursor + "\n") } }

        var previous: TopSample?
        var recent = RecentStreams()
        var refreshes = 0
        var warnings = WarningLog()
        while !StopSignal.requested {
            if dir == nil { dir = try RuntimeDirectory.existing() }
            let sample = TopSample.take(dir)
            warnings.report(sample.warnings)
            let report = TopReport(sample, streams: recent.update(sample.streams, nanos: sample.nanos), previous: previous)
            let width = MonitorTable.outputWidth(o.width, terminal: output == .terminal)
            guard show(report, output, width: width, directory: dir?.path ?? RuntimeDirectory.defaultPath,
                       interval: interval, first: refreshes == 0) else { break }
            previous = sample
            refreshes += 1
            if let count, refreshes >= count { break }
            pause(seconds: interval)
        }
        return .success
    }

    static let clearScreen = "\u{1B}[H\u{1B}[2J"
    static let hideCursor = "\u{1B}[?25l"
    static let showCursor = "\u{1B}[?25h"

    /// Shows one refresh; false once standard output is gone (a closed pipe).
    static func show(_ report: TopReport, _ output: Output, width: Int?, directory: String, interval: Double,
                     first: Bool) -> Bool {
        switch output {
        case .json:
            guard let line = try? encodeJSON(report) else { return false }
            return writeOut(line + "\n")
        case .text:
            let lines = report.streams.isEmpty ? ["no streams in \(directory)"] : report.table(width: width)
            return writeOut((first ? "" : "\n") + lines.joined(separator: "\n") + "\n")
        case .terminal:
            let size = terminalSize()
            let title = String("framesrv top: \(directory), refresh every \(formatDouble(interval, 2)) s".prefix(size.columns))
            var lines = [title] + report.table(width: min(width ?? size.columns, size.columns), escapes: true)
            if report.streams.isEmpty { lines.append("no streams") }
            let visible = lines.prefix(size.rows)
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

/// Prints each monitor warning (a stream skipped as unreadable) once, on standard error.
struct WarningLog {
    private var seen = Set<String>()
    mutating func report(_ warnings: [String]) {
        for w in warnings where seen.insert(w).inserted { warn("warning: \(w)") }
    }
}

/// How top prints a refresh as a table.
extension TopReport {
    static let columns: [MonitorColumn] = [.name, .state, .playback, .link, .pid, .fps, .frames, .slots, .minFree, .mode, .held, .holdMillis,
                                           .lag, .miss, .stale, .drop, .p50, .p99, .format, .colour]

    static func fps(_ fps: Double?) -> String { fps.map { formatDouble($0) } ?? "-" }

    /// `title`, the column header and one row per stream and consumer, every column.
    func table(title: String? = nil) -> [String] { (title.map { [$0] } ?? []) + table(width: nil) }

    /// The column header and one row per stream and consumer, fitted to `width`.
    func table(width: Int?, escapes: Bool = false) -> [String] {
        var table = MonitorTable(Self.columns)
        for s in streams {
            table.add([s.name, s.state, s.playback?.cell ?? "", s.link?.cell ?? "", "\(s.producerPID)", Self.fps(s.fps), "\(s.published)", "\(s.slotsInUse)/\(s.slots)",
                       "\(s.minFreeSlots)", "", "", "", "", "", "", "\(s.dropped)", "", ""] + MonitorTable.formatCells(s.format),
                      dim: s.vanished)
            for c in s.consumers {
                table.add(["  " + c.name, c.state, "", "", "\(c.pid)", Self.fps(c.fps), "\(c.delivered)", "", "", c.mode, "\(c.held)",
                           formatDouble(c.holdMillis), "\(c.lag)", "\(c.missed)", "\(c.stale)", "\(c.sourceDropped)", c.latencyP50, c.latencyP99],
                          dim: s.vanished)
            }
        }
        return table.lines(width: width, escapes: escapes)
    }
}
