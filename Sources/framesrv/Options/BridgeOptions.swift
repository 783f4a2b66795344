import FrameBridge
import FrameRecording
import FrameServer

/// `framesrv bridge send|recv`'s options, parsed and checked from the arguments alone.
struct BridgeOptions {
    enum Role: String { case send, recv }
    var role: Role
    /// send: A; recv: B.
    var stream: String
    var endpoint: BridgeEndpoint
    /// Bind (send --listen, recv --listen) or connect (send --to, recv --from).
    var bind: Bool
    var mode: DeliveryMode = .lossless
    /// send --codec ffv1: lossless compression (nil: raw planes).
    var codec: RecordingCodec?
    var window = 4
    var slots = 8
    var waitSeconds: Double?
    var statsJSON = false
    var noWait = false
    var quiet = false
    var security: BridgeSecurityOptions

    init(role text: String, parsing arguments: [String]) throws(UsageError) {
        guard let role = Role(rawValue: text) else {
            throw UsageError("unknown 'framesrv bridge' role '\(text)': send, recv or keygen")
        }
        self.role = role
        var args = Arguments(arguments, command: "bridge \(text)")
        let input = try args.value("--in", "-i")
        let output = try args.newStreamName("--out", "-o")
        let to = try args.value("--to")
        let from = try args.value("--from")
        let listen = try args.value("--listen")
        let live = args.flag("--live"), lossless = args.flag("--lossless")
        let codec = try args.value("--codec", "-c:v")
        let crf = try args.double("--crf", range: 0...51)
        let bitRateText = try args.value("-b:v", "--bitrate")
        window = try args.int("--window", range: 1...64) ?? 4
        slots = try args.int("--slots", range: 1...64) ?? 8
        waitSeconds = try args.double("--wait", range: 0...1e9)
        statsJSON = args.flag("--stats-json")
        noWait = args.flag("--no-wait")
        quiet = args.flag("--quiet", "-q")
        security = try BridgeSecurityOptions(&args, role: text)
        try args.finish()

        guard !(live && lossless) else { throw UsageError("choose one of --live and --lossless") }
        mode = live ? .live : .lossless
        guard !(noWait && role == .send) else { throw UsageError("--no-wait goes with 'bridge recv'") }
        switch codec {
        case nil, "raw": break
        case "ffv1":
            guard role == .send else { throw UsageError("--codec goes with 'bridge send' (the receiver decodes what comes)") }
            self.codec = .ffv1
        case "h264":
            guard role == .send else { throw UsageError("--codec goes with 'bridge send' (the receiver decodes what comes)") }
            guard !live else { throw UsageError("--codec h264 needs every packet (each frame predicts from the last): use --lossless, or --codec ffv1 with --live") }
            guard crf == nil || bitRateText == nil else { throw UsageError("choose one of --crf (constant quality) and -b:v (bit rate)") }
            if let bitRateText {
                let rate = try SinkOptions.parseBitRate(bitRateText)
                guard rate >= 1000, rate <= Int64(Int32.max) else { throw UsageError("-b:v must be 1k..2G bits/s, not '\(bitRateText)'") }
                self.codec = .h264Bitrate(Int(rate))
            } else {
                self.codec = .h264(crf: crf ?? 23)
            }
        default:
            throw UsageError("--codec takes raw (bit-identical), ffv1 (lossless) or h264 (lossy, --crf N or -b:v RATE), not '\(codec!)'")
        }
        guard crf == nil || codec == "h264" else { throw UsageError("--crf goes with --codec h264") }
        guard bitRateText == nil || codec == "h264" else {
            throw UsageError("-b:v goes with --codec h264 (raw and ffv1 are lossless: their size is the picture's)")
        }
        let (stream, dial) = try Self.roleOptions(role, input: input, output: output, to: to, from: from, listen: listen,
                                                  live: live || lossless)
        self.stream = stream
        bind = dial == nil
        do { endpoint = try BridgeEndpoint(dial ?? listen!) } catch { throw UsageError(error.description) }
        if bind, endpoint.host != "*", endpoint.host.contains("*") { throw UsageError("--listen takes tcp://ADDRESS:PORT or tcp://*:PORT") }
    }

    /// The stream and the endpoint to dial (nil: `--listen`'s, bound), checked per role.
    private static func roleOptions(_ role: Role, input: String?, output: String?, to: String?, from: String?, listen: String?,
                                    live: Bool) throws(UsageError) -> (String, String?) {
        switch role {
        case .send:
            guard let input else { throw UsageError("missing --in NAME: the stream to send") }
            guard output == nil, from == nil else { throw UsageError("--out and --from go with 'bridge recv'") }
            guard (to == nil) != (listen == nil) else { throw UsageError("say where to send: --to tcp://HOST:PORT or --listen tcp://ADDR:PORT") }
            return (input, to)
        case .recv:
            guard let output else { throw UsageError("missing --out NAME: the stream to create") }
            guard input == nil, to == nil else { throw UsageError("--in and --to go with 'bridge send'") }
            guard !live else { throw UsageError("--live and --lossless are the sender's choice ('bridge send')") }
            guard (from == nil) != (listen == nil) else { throw UsageError("say where frames come from: --listen tcp://ADDR:PORT or --from tcp://HOST:PORT") }
            return (output, from)
        }
    }
}
