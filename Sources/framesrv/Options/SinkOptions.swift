import FrameMedia
import FrameServer

/// `framesrv sink`'s options, parsed and checked from the arguments alone.
struct SinkOptions: CommandOptions {
    var input: String
    var null = false
    var framemd5: String?
    var y4m: String?
    var raw: String?
    var record: String?
    /// --wav FILE|-: an audio stream's samples in a WAV file.
    var wav: String?
    var mediaFileOptions = MediaFileOptions()
    /// --audio NAME: the audio stream recorded beside --in's pictures (with --record).
    var audio: String?
    var consumerOptions = ConsumerOptions()
    /// --frames, --verify, --hold-us.
    var settings = SinkSettings()
    var seqLog: String?
    var statsJSON = false
    var quiet = false

    /// The outputs given (paths, `-` for standard output).
    var outputs: [String] { [framemd5, y4m, raw, record, wav].compactMap { $0 } }

    init(parsing arguments: [String]) throws(UsageError) {
        var args = Arguments(arguments, command: "sink")
        let input = try args.value("--in", "-i")
        null = args.flag("--null")
        framemd5 = try args.value("--framemd5")
        y4m = try args.value("--y4m")
        raw = try args.value("--raw")
        wav = try args.value("--wav")
        record = try args.value("--record")
        let recording = try RecordArguments(&args)
        let live = args.flag("--live")
        let lossless = args.flag("--lossless")
        consumerOptions.waitSeconds = try args.double("--wait", range: 0...1e9)
        consumerOptions.waitPastEnd = consumerOptions.waitSeconds != nil
        settings.frames = try args.int("--frames", range: 1...Int.max)
        settings.verify = args.flag("--verify")
        settings.hold = try Self.parseHold(try args.value("--hold-us"))
        seqLog = try args.value("--seq-log")
        statsJSON = args.flag("--stats-json")
        settings.latencyWarmup = try args.int("--warmup", range: 0...1_000_000) ?? 0
        consumerOptions.reattach = !args.flag("--no-reattach")
        consumerOptions.name = try args.value("--name").map { ClientName.fit($0) } ?? ClientName.sink([("framemd5", framemd5), ("y4m", y4m), ("raw", raw), ("record", record), ("wav", wav)].compactMap { k, p in p.map { (k, $0) } })
        consumerOptions.receiveHighWaterMark = Int32(try args.int("--rcvhwm", range: 1...1_000_000) ?? 1000)
        consumerOptions.pollMicros = try args.int("--poll-us", range: 0...1_000_000) ?? 0
        quiet = args.flag("--quiet", "-q")
        try args.finish()
        // An audio stream goes to --framemd5 or --null; the picture outputs take video only
        // (a consumer of the other kind is refused in one line at attach).
        let pictures = y4m != nil || record != nil || settings.verify
        guard !(pictures && wav != nil) else { throw UsageError("--wav takes an audio stream; --y4m, --record and --verify take pictures") }
        consumerOptions.media = pictures ? .video : wav != nil ? .audio : nil

        guard let input else { throw UsageError("missing --in NAME: the stream to read") }
        self.input = input
        guard null || !outputs.isEmpty else {
            throw UsageError("say where frames go: --null, --framemd5 FILE|-, --y4m FILE|-, --raw FILE|-, --record FILE or --wav FILE|-")
        }
        guard !null || outputs.isEmpty else { throw UsageError("--null discards frames: it goes with no other output") }
        guard outputs.filter({ $0 == "-" }).count <= 1 else { throw UsageError("only one output can go to standard output (-)") }
        guard record != "-" else { throw UsageError("--record needs a file name (for a pipe: --y4m - or --raw -)") }
        guard outputs.isEmpty || !settings.verify else { throw UsageError("--verify goes with --null") }
        guard !(live && lossless) else { throw UsageError("choose one of --live and --lossless") }
        consumerOptions.mode = live ? .live : .lossless
        mediaFileOptions = try recording.mediaFileOptions(recording: record != nil)
        audio = recording.audio
    }

    /// `2M`, `800k`, `1.5M`, `500000`: bits per second.
    static func parseBitRate(_ text: String, option: String = "-b:v") throws(UsageError) -> Int64 {
        var t = Substring(text)
        var scale = 1.0
        if let last = t.last, let s = ["k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9][last] {
            scale = s
            t = t.dropLast()
        }
        guard let v = Double(t), v.isFinite, v > 0, v * scale >= 1, v * scale <= 1e11 else {
            throw UsageError("\(option) must be a bit rate such as 2M, 800k or 500000, not '\(text)'")
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

    /// --record's encoder settings as given (-f, -c:v, -b:v, --crf, -g, --preset, -pix_fmt, -fps_mode).
    struct RecordArguments {
        let container, codec, bitRate: String?
        let crf: Double?
        let gop: Int?
        let preset, pixelFormat, fpsMode: String?
        /// --audio NAME, -c:a, -b:a: the recording's sound.
        let audio, audioCodec, audioBitRate: String?

        init(_ args: inout Arguments) throws(UsageError) {
            container = try args.value("-f", "--format")
            codec = try args.value("-c:v", "-vcodec", "--codec")
            bitRate = try args.value("-b:v", "--bitrate")
            crf = try args.double("--crf", range: 0...63)
            gop = try args.int("-g", "--gop", range: 1...1_000_000)
            preset = try args.value("--preset")
            pixelFormat = try args.value("-pix_fmt", "--pix-fmt")
            fpsMode = try args.value("-fps_mode", "--fps-mode")
            audio = try args.value("--audio")
            audioCodec = try args.value("-c:a", "-acodec")
            audioBitRate = try args.value("-b:a")
        }

        /// The media file's options; without --record (`recording` false) any of them is a usage error.
        func mediaFileOptions(recording: Bool) throws(UsageError) -> MediaFileOptions {
            var options = MediaFileOptions()
            guard recording else {
                let given = [("-f", container), ("-c:v", codec), ("-b:v", bitRate), ("--preset", preset),
                             ("-pix_fmt", pixelFormat), ("-fps_mode", fpsMode), ("--audio", audio), ("-c:a", audioCodec),
                             ("-b:a", audioBitRate)].filter { $0.1 != nil }.map(\.0)
                    + (crf != nil ? ["--crf"] : []) + (gop != nil ? ["-g"] : [])
                if let first = given.first { throw UsageError("\(first) goes with --record FILE") }
                return options
            }
            options.container = container
            if let codec { options.codec = codec }
            options.bitRate = try bitRate.map { t throws(UsageError) in try SinkOptions.parseBitRate(t) }
            options.crf = crf
            options.gop = gop
            options.preset = preset
            options.pixelFormat = pixelFormat
            guard audio != nil || (audioCodec == nil && audioBitRate == nil) else { throw UsageError("-c:a and -b:a go with --audio NAME") }
            options.audioCodec = audioCodec
            options.audioBitRate = try audioBitRate.map { t throws(UsageError) in try SinkOptions.parseBitRate(t, option: "-b:a") }
            if let fpsMode {
                guard let mode = FrameRateMode(rawValue: fpsMode) else {
                    throw UsageError("-fps_mode takes passthrough or cfr, not '\(fpsMode)'")
                }
                options.frameRateMode = mode
            }
            return options
        }
    }
}
