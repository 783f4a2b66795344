import FoundationEssentials
import FrameControl
import FrameMedia
import FrameMonitor
import FrameServer
import Glibc

/// `framesrv ls`: every stream in the runtime directory.
enum ListCommand: Command {
    static let name = "ls"
    static let summary = "list the streams in the runtime directory"
    static let help = """
    usage: framesrv ls [-w COLUMNS] [--json]

    One line per stream, in pipeline order (sources first), with the columns of 'framesrv
    top' (see its --help): NAME, STATE, PLAY (a playing file's position and state), PID, FPS (measured over 250 ms), FRAMES (published),
    SLOTS (in use/total), CONS (consumers), DROP, RATE (nominal), FORMAT, COLOUR.
      -w COLUMNS   the width rows fit (default: the terminal's, $COLUMNS, or no limit);
                   the least useful columns are left out first
      --json       one JSON array of stream snapshots, each with its measured "fps"
    """

    static func run(_ o: ListOptions) throws -> ExitStatus {
        let json = o.json
        // Listing must not create the directory: none is a directory without streams.
        let dir = try RuntimeDirectory.existing()
        let streams = measure(dir)
        if json {
            print(try encodeJSON(streams))
            return .success
        }
        if streams.isEmpty {
            print("no streams in \(dir?.path ?? RuntimeDirectory.defaultPath)")
            return .success
        }
        var table = MonitorTable([.name, .state, .playback, .link, .pid, .fps, .frames, .slots, .consumers, .drop, .rate, .format, .colour])
        for m in streams {
            let s = m.snapshot
            table.add([s.name, s.state, m.playback?.cell ?? "-", m.link?.cell ?? "-", "\(s.producerPID)", TopReport.fps(m.fps), "\(s.published)", "\(s.slots - s.freeSlots)/\(s.slots)",
                       "\(s.consumers.count)", "\(s.dropped)", s.nominalRate.map { "\($0)" } ?? "max"] + MonitorTable.formatCells(s.format))
        }
        for line in table.lines(width: MonitorTable.outputWidth(o.width, terminal: isatty(1) != 0)) { print(line) }
        return .success
    }

    /// Every stream read twice, 250 ms apart (FrameMonitor's rows), its warnings on standard error.
    static func measure(_ dir: RuntimeDirectory?) -> [MeasuredStream] {
        let (streams, warnings) = MeasuredStream.measure(dir)
        var log = WarningLog()
        log.report(warnings)
        return streams
    }
}

/// `framesrv inspect STREAM`: everything about one stream.
enum InspectCommand: Command {
    static let name = "inspect"
    static let summary = "show one stream: slots, consumers, counters"
    static let help = """
    usage: framesrv inspect STREAM [--json | --snapshot FILE.png]
           framesrv inspect [options] -- STREAM    (a name starting with '-', which produce and
                                                   filter no longer create)

    Reads the stream's shared statistics without attaching (holds no slot, never slows
    the pipeline): producer, pool, per-slot table (state, sequence, holders, age) and
    per-consumer table (mode, delivered, missed, lag, held slots, hold time, latency).
      --json             one JSON object
      --snapshot FILE    write the newest frame as a PNG (converted to RGB with the
                         stream's own colour matrix and range): attaches briefly as a live
                         consumer, holds that one frame while encoding, never slows the stream
      --wait SECONDS     with --snapshot: how long to wait for a frame (default 5)
    """

    static func run(_ o: InspectOptions) throws -> ExitStatus {
        let (json, name) = (o.json, o.stream)
        try validateStreamName(name)
        if let snapshot = o.snapshot {
            return try writeSnapshot(of: name, to: snapshot, waitSeconds: o.wait)
        }
        guard let dir = try RuntimeDirectory.existing() else {   // not created by looking
            throw InspectionError.noStream(name, directory: RuntimeDirectory.defaultPath)
        }
        let (s, problems) = try StreamSnapshot.inspect(name, in: dir)
        var warnings = WarningLog()
        warnings.report(problems)
        if json {
            print(try encodeJSON(s))
            return .success
        }
        print("stream \(s.name): \(s.state), producer '\(s.producerName)' pid \(s.producerPID)\(s.liveSource ? ", live source" : "")")
        print("  format \(s.format ?? "-"), epoch \(s.epoch), \(s.slots) slots of \(s.slotBytes) bytes"
              + (s.device.map { " on CUDA device \($0)" } ?? ""))
        print("  frames \(s.published) published (last seq \(s.lastSequence)), drop \(s.dropped), "
              + "slots \(s.slots - s.freeSlots)/\(s.slots) in use (min free ever \(s.minFreeSlots)), waited \(formatDouble(s.blockedMillis)) ms, "
              + "reclaimed consumers \(s.reclaimedConsumers)")
        if s.state == "running", case .json(let text)? = try? ControlClient.send(.status, to: name, directory: dir, timeout: 0.5) {
            if let link = LinkStatus(json: text) { print("  link: \(link.line)") }
            else if let playback = PlaybackStatus(json: text) { print("  playback: \(playback.line)") }
        }
        print("  slots:")
        let widths = [4, 6, 19, 10, 7, 10]
        print(row(widths, ["", "SLOT", "STATE", "SEQ", "EPOCH", "AGE ms", "HOLDERS"]))
        for t in s.slotTable {
            let holders = t.holders.isEmpty ? "-" : t.holders.map(String.init).joined(separator: ",")
            print(row(widths, ["", "\(t.index)", t.slotState.label, "\(t.sequence)", "\(t.epoch)", formatDouble(t.ageMillis), holders]))
        }
        print("  consumers:")
        if s.consumers.isEmpty { print("    none") }
        for c in s.consumers { print(describe(c)) }
        return .success
    }
}

extension InspectCommand {
    /// A consumer's line, in the words of top's columns: `#0 sink record out.mp4 pid 42
    /// lossless active: frames 120, miss 0, stale 0, lag 2, held 1 (slot 3) for 4.1 ms, ...`.
    static func describe(_ c: ConsumerSnapshot) -> String {
        let slots = c.heldSlots.isEmpty ? "" : " (slot\(c.heldSlots.count == 1 ? "" : "s") \(c.heldSlotsText))"
        let held = c.held == 0 ? "held 0" : "held \(c.held)\(slots) for \(formatDouble(c.holdMillis)) ms"
        let p50 = TopConsumer.label(c.latencyPercentileMicros(0.5)), p99 = TopConsumer.label(c.latencyPercentileMicros(0.99))
        return "    #\(c.index) \(c.name) pid \(c.pid) \(c.mode) \(c.state): frames \(c.delivered), miss \(c.missed), "
            + "stale \(c.stale), dropped at source \(c.sourceDropped), lag \(c.lag), \(held), latency p50 \(p50) p99 \(p99) mean \(formatDouble(c.meanLatencyMicros)) us"
    }

    /// Takes the newest frame as a live consumer (one slot, for as long as the encode takes)
    /// and writes it as a PNG.
    static func writeSnapshot(of stream: String, to path: String, waitSeconds: Double) throws -> ExitStatus {
        var options = ConsumerOptions(mode: .live)
        options.waitSeconds = waitSeconds
        options.reattach = false
        options.name = "snapshot"
        let consumer = try Consumer(stream: stream, options: options)
        let deadline = monotonicNanos() + UInt64(waitSeconds * 1e9)
        consumer.shouldStop = { monotonicNanos() > deadline }
        guard let frame = try consumer.next() else {
            throw InspectionError.noFrame(stream, waitedSeconds: waitSeconds)
        }
        let h = frame.header
        let what = "frame \(frame.sequence) (\(h.width)x\(h.height) \(h.pixelFormatName))"
        try StillImage.writePNG(frame, to: path)
        frame.release()
        print("inspect: wrote \(what) of '\(stream)' to \(path)")
        return .success
    }
}

/// `framesrv clean`: remove what dead producers left behind.
enum CleanCommand: Command {
    static let name = "clean"
    static let summary = "remove the files of streams whose producer is gone"
    static let help = """
    usage: framesrv clean

    Removes control segments, pools, sockets and lock files of every stream in the
    runtime directory whose producer no longer runs. Running streams are untouched.
    """

    static func run(_ o: CleanOptions) throws -> ExitStatus {
        let dir = try RuntimeDirectory.existing()   // not created: none is nothing to clean
        let removed = dir?.removeOrphans() ?? []
        for f in removed { print("removed \(f)") }
        if removed.isEmpty { print("nothing to clean in \(dir?.path ?? RuntimeDirectory.defaultPath)") }
        return .success
    }
}
