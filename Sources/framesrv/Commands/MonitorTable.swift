import FoundationEssentials
import FrameServer

/// The columns `ls` and `top` share: one header means one thing in both (and in `inspect`).
/// `rank` says how useful a column is: when a row does not fit, the lowest goes first.
struct MonitorColumn {
    let header: String
    let rank: Int

    // Kept longest: the columns that say who lags and at what rate (name, state, fps, lag,
    // drops, holds); then what plays and the counters; latency, format and the rest go first.
    static let name = MonitorColumn(header: "NAME", rank: .max)
    static let state = MonitorColumn(header: "STATE", rank: 20)
    static let fps = MonitorColumn(header: "FPS", rank: 19)
    static let lag = MonitorColumn(header: "LAG", rank: 18)
    static let drop = MonitorColumn(header: "DROP", rank: 17)
    static let held = MonitorColumn(header: "HELD", rank: 16)
    static let playback = MonitorColumn(header: "PLAY", rank: 15)
    /// A bridged stream's link: peer, bytes/s, in flight/credits, round-trip time, reconnects.
    static let link = MonitorColumn(header: "LINK", rank: 15)
    static let miss = MonitorColumn(header: "MISS", rank: 14)
    static let consumers = MonitorColumn(header: "CONS", rank: 13)
    static let frames = MonitorColumn(header: "FRAMES", rank: 12)
    static let p99 = MonitorColumn(header: "P99", rank: 11)
    static let format = MonitorColumn(header: "FORMAT", rank: 10)
    static let slots = MonitorColumn(header: "SLOTS", rank: 9)
    static let mode = MonitorColumn(header: "MODE", rank: 8)
    static let rate = MonitorColumn(header: "RATE", rank: 7)
    static let colour = MonitorColumn(header: "COLOUR", rank: 6)
    static let p50 = MonitorColumn(header: "P50", rank: 5)
    static let pid = MonitorColumn(header: "PID", rank: 4)
    static let holdMillis = MonitorColumn(header: "HOLDms", rank: 2)
    static let stale = MonitorColumn(header: "STALE", rank: 1)
    static let minFree = MonitorColumn(header: "MINFREE", rank: 0)

    /// What every header means, for `--help`.
    static let legend = """
      NAME         stream, or consumer (indented): its role ('filter blur=4 -> soft',
                   'sink record out.mp4') or the name it set (--name); streams in
                   pipeline order, sources first
      STATE        running/ended/dead (stream), attaching/active/closing (consumer);
                   a stream that ended stays listed (dimmed on a terminal) for 5 s
      PLAY         a producer that reads a file (framesrv ctl): position/duration in
                   seconds, playing or paused, and its rate ("max": as fast as consumers
                   take frames), as its control socket says (asked for 500 ms at most)
      PID          producer or consumer process
      FPS          measured between two readings: frames published (stream) or delivered
                   (consumer) per second; "-" before the second reading
      FRAMES       frames published (stream) or delivered (consumer) in all
      SLOTS        slots in use/total
      MINFREE      fewest slots ever free after the producer took one
      CONS         consumers attached
      MODE         lossless or live
      HELD         slots the consumer holds now
      HOLDms       how long its oldest current hold has lasted
      LAG          frames published that the consumer has not been handed yet
      MISS         frames a consumer will never get (a live consumer's skips)
      STALE        acquisitions refused because the slot had been recycled
      DROP         stream: frames its live source dropped for want of a free slot;
                   consumer: those that fell just before frames it got ("dropped at
                   source": the frame after a drop carries the discontinuity flag)
      P50, P99     publish -> acquire latency percentiles from the consumer's histogram:
                   to the microsecond under 100 us ("12us" = 12 to 13 us), then the upper
                   bound of a coarser bucket ("<400us", "<3ms", "<40ms"); ">=100ms" beyond
      RATE         nominal frame rate ("max": unpaced)
      FORMAT       size and pixel format of the newest frame (audio: rate and sample format)
      COLOUR       its colour matrix/range (audio: channel layout)
    """
}

/// Rows under `MonitorColumn` headers, laid out to a width: each column as wide as its
/// widest cell, two spaces apart, the least useful columns dropped until a row fits, and
/// as a last resort each row cut at the width.
struct MonitorTable {
    let columns: [MonitorColumn]
    private(set) var rows: [(cells: [String], dim: Bool)] = []

    init(_ columns: [MonitorColumn]) { self.columns = columns }

    mutating func add(_ cells: [String], dim: Bool = false) { rows.append((cells, dim)) }

    /// The header and the rows; `width` nil: every column; `escapes`: dimmed rows in SGR 2.
    func lines(width: Int?, escapes: Bool = false) -> [String] {
        let all = [columns.map(\.header)] + rows.map(\.cells)
        let widths = columns.indices.map { i in all.map { $0.indices.contains(i) ? $0[i].count : 0 }.max() ?? 0 }
        var shown = Array(columns.indices)
        func total() -> Int { shown.reduce(0) { $0 + widths[$1] } + 2 * max(0, shown.count - 1) }
        if let width {
            var dropped: [Int] = []
            while total() > width, let least = shown.filter({ columns[$0].rank != .max }).min(by: { columns[$0].rank < columns[$1].rank }) {
                shown.removeAll { $0 == least }
                dropped.append(least)
            }
            // Room left: the most useful of the dropped columns that still fit come back.
            for i in dropped.reversed() where total() + widths[i] + 2 <= width { shown = (shown + [i]).sorted() }
        }
        return ([(cells: columns.map(\.header), dim: false)] + rows).map { r in
            var line = ""
            for (n, i) in shown.enumerated() {
                let cell = r.cells.indices.contains(i) ? r.cells[i] : ""
                line += n == shown.count - 1 ? cell : cell.padding(widths[i] + 2)
            }
            while line.last == " " { line.removeLast() }
            if let width, line.count > width { line = String(line.prefix(width)) }
            return escapes && r.dim ? "\u{1B}[2m" + line + "\u{1B}[0m" : line
        }
    }

    /// The width to lay out for on standard output: the terminal's, else `-w`/$COLUMNS,
    /// else none (a file or pipe gets every column).
    static func outputWidth(_ given: Int?, terminal: Bool) -> Int? {
        if let given { return given }
        if terminal { return TopCommand.terminalSize().columns }
        return ProcessInfo.processInfo.environment["COLUMNS"].flatMap { Int($0) }.flatMap { $0 > 0 ? $0 : nil }
    }

    /// A format as `StreamSnapshot.format` has it ("640x360 yuv420p bt709/tv") in its
    /// FORMAT and COLOUR cells.
    static func formatCells(_ format: String?) -> [String] {
        guard let format else { return ["-", "-"] }
        let parts = format.split(separator: " ", maxSplits: 2).map(String.init)
        return parts.count == 3 ? [parts[0] + " " + parts[1], parts[2]] : [format, "-"]
    }
}
