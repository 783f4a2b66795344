import FrameRecording
import FrameServer

/// `framesrv replay`'s options, parsed and checked from the arguments alone.
struct ReplayCommandOptions: CommandOptions {
    var settings: ReplaySettings
    var quiet = false

    init(parsing arguments: [String]) throws(UsageError) {
        var args = Arguments(arguments, command: "replay")
        let prefix = try args.value("--out", "--prefix")
        let rate = try args.value("--rate")
        let loop = args.flag("--loop")
        let start = try args.value("-ss")
        let duration = try args.value("-t")
        let noWait = args.flag("--no-wait")
        let paused = args.flag("--paused")
        let slots = try args.int("--slots", range: 1...64)
        let pace = try args.value("--pace")
        quiet = args.flag("--quiet", "-q")
        let files = args.positionals()
        try args.finish()

        guard files.count == 1, let path = files.first, path != "-" else {
            throw UsageError(files.isEmpty ? "missing FILE: the recording to replay" : "replay takes one FILE, not \(files.count)")
        }
        settings = ReplaySettings(path: path)
        if let prefix {
            guard !prefix.hasPrefix("-") else { throw UsageError("--out prefix '\(prefix)' starts with '-': choose another") }
            settings.prefix = prefix
        }
        settings.rate = try Self.rate(rate)
        settings.loop = loop
        settings.start = (try ProduceOptions.time(start, option: "-ss", positive: false) ?? 0) * 1000
        settings.duration = try ProduceOptions.time(duration, option: "-t", positive: true).map { $0 * 1000 }
        settings.waitForConsumers = !noWait
        settings.paused = paused
        if let slots { settings.slots = slots }
        if let pace {
            guard let p = ReplayPace(rawValue: pace) else { throw UsageError("--pace must be pts or capture, not '\(pace)'") }
            settings.pace = p
        }
    }

    /// --rate X (0.01 to 100 times real time) or max.
    static func rate(_ text: String?) throws(UsageError) -> Double? {
        guard let text else { return 1 }
        if text == "max" { return nil }
        guard let r = Double(text), r.isFinite, r >= 0.01, r <= 100 else {
            throw UsageError("--rate must be a number from 0.01 to 100 (times real time) or max, not '\(text)'")
        }
        return r
    }
}
