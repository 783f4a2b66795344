import FrameControl
import FrameMedia
import FrameServer

/// `framesrv produce`'s options, parsed and checked from the arguments alone.
struct ProduceOptions: CommandOptions {
    /// With -i: what to decode and how.
    struct Media {
        var input: String
        var format: String?
        var threads = 0
        /// -ss, -t, --loop, --strict.
        var inputOptions = MediaInputOptions()
        /// -re (1) or --readrate X.
        var readrate: Double?
        /// --paused: start paused (framesrv ctl resumes, steps or seeks).
        var paused = false
        /// --pix-fmt / --size: convert with libswscale.
        var pixelFormat: PixelFormat?
        var size: (Int, Int)?
        var copy = false
        /// The audio stream's name (--audio-out, default NAME-audio); nil with -an.
        var audioOut: String?
        /// --hwaccel cuda / --memory cuda: a CUDA stream on this device, decoded by NVDEC (`nvdec`)
        /// or on the CPU and uploaded.
        var cuda: (device: Int, nvdec: Bool)?
        var converter: FrameConverter? {
            pixelFormat != nil || size != nil ? FrameConverter(pixelFormat: pixelFormat, size: size) : nil
        }
    }

    var out: String
    /// nil: the built-in test pattern (`pattern`).
    var media: Media?
    var pattern = PatternPlan(pixelFormat: .yuv420p, width: 640, height: 360, rate: Rational(30, 1), frames: nil)
    var frames: Int?
    /// nil: the path's default (`PublishPath.defaultSlots`).
    var slots: Int?
    var liveSource = false
    var waitFor = 0
    /// --linger S: with --wait-for, how long to wait for a consumer once every one has left
    /// before ending the stream (infinity: -1, for ever).
    var linger = 5.0
    /// --no-wait: a file producer publishes at once, even to nobody.
    var noWait = false
    var sendHighWaterMark = 1000
    var stallTimeout: Double?
    var statsJSON: String?
    var quiet = false
    /// What monitors show for this producer (--name; default `produce FILE` or `produce pattern`).
    var name = ""

    /// --linger's value: -1 is for ever, any other negative value is refused.
    static func linger(_ given: Double?) throws(UsageError) -> Double {
        guard let given else { return 5 }
        if given == -1 { return .infinity }
        guard given >= 0 else { throw UsageError("--linger takes seconds (0 or more), or -1 for ever") }
        return given
    }

    init(parsing arguments: [String]) throws(UsageError) {
        var args = Arguments(arguments, command: "produce")
        let wantsPattern = args.flag("--pattern")
        var m = MediaArguments()
        m.input = try args.value("--input", "-i")
        m.format = try args.value("-f", "--format")
        m.threads = try args.int("--threads", range: 0...256) ?? 0
        let out = try args.newStreamName("--out", "-o")
        let sizeText = try args.value("--size", "-s")
        let fmtText = try args.value("--pix-fmt", "-pix_fmt")
        m.start = try args.value("-ss")
        m.duration = try args.value("-t")
        m.loops = try args.int("--loop", "-stream_loop", range: -1...Int(Int32.max)) ?? 0
        m.realTime = args.flag("-re", "--re")
        m.readrate = try args.double("--readrate", range: 0.001...1000)
        let rateText = try args.value("--rate", "-r")
        frames = try args.int("--frames", "-frames", range: 1...Int(Int32.max))
        slots = try args.int("--slots", range: 1...64)
        liveSource = args.flag("--live-source")
        m.copy = args.flag("--copy")
        let waitForGiven = try args.int("--wait-for", range: 0...63)
        waitFor = waitForGiven ?? 0
        noWait = args.flag("--no-wait")
        linger = try Self.linger(try args.double("--linger", range: -1...86_400))
        let fill = try args.value("--fill")
        sendHighWaterMark = try args.int("--sndhwm", range: 1...1_000_000) ?? 1000
        let changes = try Self.parseSizeChanges(try args.value("--size-change-at"))
        stallTimeout = try args.double("--stall-timeout", range: 0.001...86_400)
        statsJSON = try args.value("--stats-json")
        quiet = args.flag("--quiet", "-q")
        m.strict = args.flag("--strict")
        let name = try args.value("--name")
        m.paused = args.flag("--paused")
        m.noAudio = args.flag("-an", "--no-audio")
        m.audioOut = try args.newStreamName("--audio-out")
        m.map = try args.value("-map", "--map")
        m.hwaccel = try args.value("--hwaccel", "-hwaccel")
        m.hwaccelDevice = try args.int("--hwaccel-device", "-hwaccel_device", range: 0...63)
        m.memory = try args.value("--memory")
        try args.finish()

        guard wantsPattern != (m.input != nil) else {
            throw UsageError("say what to produce: -i INPUT (a media file, - for standard input) or --pattern")
        }
        guard let out else { throw UsageError("missing --out NAME: the stream to create") }
        guard !(noWait && (waitForGiven ?? 0) > 0) else { throw UsageError("--no-wait and --wait-for N are one choice: --no-wait is --wait-for 0") }
        self.out = out
        self.name = name.map { ClientName.fit($0) } ?? ClientName.producer(input: m.input)
        let size = try sizeText.map { t throws(UsageError) in try parseSize(t, option: "--size") }
        let pixelFormat = try fmtText.map { t throws(UsageError) in try Self.pixelFormat(t) }
        if let input = m.input {
            guard rateText == nil, fill == nil, changes.isEmpty else {
                throw UsageError("--rate, --fill and --size-change-at go with --pattern")
            }
            var chosen = try m.media(input, pixelFormat: pixelFormat, size: size)
            chosen.cuda = try m.cudaOutput(converting: pixelFormat != nil || size != nil)
            chosen.inputOptions.cudaDevice = chosen.cuda.flatMap { $0.nvdec ? $0.device : nil }
            chosen.audioOut = try m.audioStream(out: out)
            chosen.inputOptions.audio = chosen.audioOut != nil
            chosen.inputOptions.audioStream = try m.audioStreamNumber()
            media = chosen
            return
        }
        try m.refuseWithoutInput()
        let (w, h) = size ?? (640, 360)
        pattern = PatternPlan(pixelFormat: pixelFormat ?? .yuv420p, width: w, height: h,
                              rate: try Self.rate(rateText ?? "30"), frames: frames)
        (pattern.paintOnce, pattern.sizeChanges) = (try Self.paintOnce(fill), changes)
    }

    /// The options that go with -i INPUT only, as given.
    struct MediaArguments {
        var input, format: String?
        var threads = 0
        var start, duration: String?
        var loops = 0
        var realTime = false
        var readrate: Double?
        var copy = false
        var strict = false
        var paused = false
        var noAudio = false
        var audioOut: String?
        /// -map 0:a:N: which audio stream.
        var map: String?
        /// --hwaccel cuda, --hwaccel-device N, --memory host|cuda.
        var hwaccel, memory: String?
        var hwaccelDevice: Int?

        /// A CUDA stream's device and decoder, nil for a host stream.
        func cudaOutput(converting: Bool) throws(UsageError) -> (device: Int, nvdec: Bool)? {
            guard hwaccel == nil || hwaccel == "cuda" else { throw UsageError("--hwaccel takes cuda (NVDEC), not '\(hwaccel!)'") }
            guard memory == nil || memory == "cuda" || memory == "host" else {
                throw UsageError("--memory takes host or cuda, not '\(memory!)'")
            }
            guard hwaccel != nil || memory == "cuda" else {
                guard hwaccelDevice == nil else { throw UsageError("--hwaccel-device N goes with --hwaccel cuda or --memory cuda") }
                return nil
            }
            guard memory != "host" else {
                throw UsageError("--hwaccel cuda keeps the frames on the GPU (a CUDA stream): --memory host is framesrv-cuda download's work")
            }
            guard !converting, !copy else {
                throw UsageError("--pix-fmt, --size and --copy convert host frames; a CUDA stream carries the decoder's frames "
                                 + "(convert on the GPU with a filter, or on a host copy: framesrv-cuda download)")
            }
            return (hwaccelDevice ?? 0, hwaccel != nil)
        }

        /// `-map 0:a:N` (or `0:a`, the first): the audio stream's number; other maps are refused.
        func audioStreamNumber() throws(UsageError) -> Int? {
            guard let map else { return nil }
            let parts = map.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count >= 2, parts.count <= 3, parts[0] == "0", parts[1] == "a",
                  let n = parts.count == 3 ? Int(parts[2]) : 0, (0...1023).contains(n) else {
                throw UsageError("-map takes 0:a:N (the input's Nth audio stream, from 0) for the sound; the pictures are the first video stream, not '\(map)'")
            }
            guard !noAudio else { throw UsageError("-an and -map 0:a:N are one choice: -an publishes no audio") }
            return n
        }

        /// The audio stream's name: --audio-out, else NAME-audio; nil with -an.
        func audioStream(out: String) throws(UsageError) -> String? {
            guard !noAudio else {
                guard audioOut == nil else { throw UsageError("-an and --audio-out NAME are one choice: -an publishes no audio") }
                return nil
            }
            let name = audioOut ?? out + "-audio"
            guard name != out else { throw UsageError("--audio-out \(name) is the video stream's name (--out); choose another") }
            do { try validateStreamName(name) } catch {
                throw UsageError("the audio stream's name: \(error.description); give --audio-out NAME, or -an")
            }
            return name
        }

        /// -i's options checked against each other, with --pix-fmt / --size for the converter.
        func media(_ input: String, pixelFormat: PixelFormat?, size: (Int, Int)?) throws(UsageError) -> Media {
            guard !(realTime && readrate != nil) else { throw UsageError("-re and --readrate X are one choice: -re is --readrate 1") }
            var media = Media(input: input, format: format, threads: threads,
                              inputOptions: MediaInputOptions(loops: loops, strict: strict),
                              readrate: realTime ? 1 : readrate, pixelFormat: pixelFormat, size: size, copy: copy)
            media.inputOptions.start = try ProduceOptions.time(start, option: "-ss", positive: false)
            media.inputOptions.duration = try ProduceOptions.time(duration, option: "-t", positive: true)
            media.inputOptions.audioZeroCopy = !copy
            media.paused = paused
            return media
        }

        /// With --pattern: any of them is a usage error.
        func refuseWithoutInput() throws(UsageError) {
            guard format == nil else { throw UsageError("-f FMT goes with -i INPUT") }
            guard !strict else { throw UsageError("--strict goes with -i INPUT") }
            guard !copy else { throw UsageError("--copy goes with -i INPUT") }
            guard !paused else { throw UsageError("--paused goes with -i INPUT") }
            guard !noAudio, audioOut == nil, map == nil else { throw UsageError("-an, -map and --audio-out go with -i INPUT") }
            guard hwaccel == nil, hwaccelDevice == nil, memory == nil else {
                throw UsageError("--hwaccel, --hwaccel-device and --memory go with -i INPUT")
            }
            guard start == nil, duration == nil, loops == 0, !realTime, readrate == nil else {
                throw UsageError("-ss, -t, --loop, -re and --readrate go with -i INPUT")
            }
        }
    }

    static func pixelFormat(_ text: String) throws(UsageError) -> PixelFormat {
        guard let f = PixelFormat(name: text) else {
            throw UsageError("unknown pixel format '\(text)'; known: \(PixelFormat.allCases.map(\.name).joined(separator: ", "))")
        }
        return f
    }

    /// `--rate max|N|N/D|decimal`: nil for max; an integer or N/D exactly (reduced), a
    /// decimal as FFmpeg's `av_d2q(x, 1001000)` (29.97 -> 2997/100). 0.001 to 1000000 fps.
    static func rate(_ text: String) throws(UsageError) -> Rational? {
        guard text != "max" else { return nil }
        let problem = UsageError("--rate must be frames per second (N, N/D or a decimal, 0.001 to 1000000) or 'max', not '\(text)'")
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        var rate: Rational?
        if parts.count == 2 {
            guard let n = UInt64(parts[0]), let d = UInt64(parts[1]), n > 0, d > 0 else { throw problem }
            rate = Rational(reducing: n, d)
        } else if let n = UInt64(text) {
            rate = n > 0 ? Rational(reducing: n, 1) : nil
        } else if text.allSatisfy({ $0.isNumber || $0 == "." }), let fps = Double(text) {
            rate = Rational(framesPerSecond: fps)
        }
        guard let rate, rate.doubleValue >= 0.001, rate.doubleValue <= 1_000_000 else { throw problem }
        return rate
    }

    static func paintOnce(_ text: String?) throws(UsageError) -> Bool {
        guard let text else { return false }
        guard text == "once" || text == "every" else { throw UsageError("--fill must be 'once' or 'every', not '\(text)'") }
        return text == "once"
    }

    /// -ss / -t in microseconds (ffmpeg's syntax).
    static func time(_ text: String?, option: String, positive: Bool) throws(UsageError) -> Int64? {
        guard let text else { return nil }
        guard let t = MediaInputOptions.parseTime(text), positive ? t > 0 : t >= 0 else {
            throw UsageError("\(option) must be a\(positive ? " positive" : "") time (seconds, or [HH:]MM:SS[.xxx]), not '\(text)'")
        }
        guard TimeBound.checked(t) != nil else { throw UsageError("\(option) \(text): \(TimeBound.refusal)") }
        return t
    }

    static func parseSizeChanges(_ text: String?) throws(UsageError) -> [(frame: UInt64, width: Int, height: Int)] {
        guard let text else { return [] }
        var out: [(frame: UInt64, width: Int, height: Int)] = []
        for item in text.split(separator: ",") {
            let parts = item.split(separator: ":")
            guard parts.count == 2, let k = UInt64(parts[0]), k >= 1 else {
                throw UsageError("--size-change-at takes FRAME:WxH[,FRAME:WxH...], not '\(text)'")
            }
            let (w, h) = try parseSize(String(parts[1]), option: "--size-change-at")
            out.append((k, w, h))
        }
        return out.sorted { $0.frame < $1.frame }
    }
}
