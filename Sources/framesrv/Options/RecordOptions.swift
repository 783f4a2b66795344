import FrameRecording
import FrameServer

/// `framesrv record`'s options, parsed and checked from the arguments alone.
struct RecordCommandOptions: CommandOptions {
    var settings: RecordSettings
    /// --snapshot D: keep the last D microseconds in memory, write them on SIGUSR1.
    var snapshotMicros: Int64?
    var snapshotMaxMB = 1024
    /// --name: what `framesrv ctl NAME snapshot` calls the recorder (default: FILE's base name).
    var controlName: String?
    var quiet = false

    init(parsing arguments: [String]) throws(UsageError) {
        var args = Arguments(arguments, command: "record")
        let inputs = try args.value("--in", "-i")
        let output = try args.value("-o", "--output")
        let codecName = try args.value("--codec", "-c:v")
        let crf = try args.double("--crf", range: 0...51)
        let wait = try args.double("--wait", range: 0...1e9)
        let snapshot = try args.value("--snapshot")
        let maxMB = try args.int("--snapshot-max-mb", range: 1...1_000_000)
        let segment = try args.bytes("--segment-size", range: 0...(1 << 50))
        let name = try args.value("--name")
        quiet = args.flag("--quiet", "-q")
        try args.finish()

        guard let inputs else { throw UsageError("missing --in A[,B,...]: the streams to record") }
        let names = inputs.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard !names.contains(""), Set(names).count == names.count else {
            throw UsageError("--in takes distinct stream names separated by commas, not '\(inputs)'")
        }
        guard let output, output != "-" else { throw UsageError("missing -o FILE: the recording to write (a .nut file)") }
        settings = RecordSettings(streams: names, path: output)
        settings.waitSeconds = wait
        settings.codec = try Self.codec(codecName, crf: crf)
        if let segment {
            guard segment == 0 || segment >= Self.leastSegment else {
                throw UsageError("--segment-size must be 0 (one file) or at least 1M, not '\(segment)' bytes")
            }
            guard snapshot == nil else { throw UsageError("--segment-size goes without --snapshot (a snapshot is one file)") }
            settings.segmentBytes = segment == 0 ? nil : segment
        }
        snapshotMicros = try ProduceOptions.time(snapshot, option: "--snapshot", positive: true)
        if let maxMB {
            guard snapshot != nil else { throw UsageError("--snapshot-max-mb goes with --snapshot D") }
            snapshotMaxMB = maxMB
        }
        if snapshot != nil {
            let base = output.split(separator: "/").last.map(String.init) ?? output
            controlName = name ?? (base.contains(".") ? String(base[..<base.lastIndex(of: ".")!]) : base)
        } else if name != nil {
            throw UsageError("--name goes with --snapshot D (it names the recorder for 'framesrv ctl NAME snapshot')")
        }
    }

    /// The smallest --segment-size: NUT writes a syncpoint every 32 KB, and each file repeats the headers.
    static let leastSegment: Int64 = 1 << 20

    static func codec(_ name: String?, crf: Double?) throws(UsageError) -> RecordingCodec {
        switch name ?? "ffv1" {
        case "ffv1":
            guard crf == nil else { throw UsageError("--crf goes with --codec h264 (ffv1 and raw are lossless)") }
            return .ffv1
        case "raw", "rawvideo":
            guard crf == nil else { throw UsageError("--crf goes with --codec h264 (ffv1 and raw are lossless)") }
            return .raw
        case "h264", "libx264": return .h264(crf: crf ?? 18)
        default: throw UsageError("--codec must be ffv1, raw or h264, not '\(name!)'")
        }
    }
}
