import FrameBridge
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
        if let codec, codec != "raw" {
            throw UsageError("--codec \(codec): this build sends raw frames only (--codec raw)")
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
