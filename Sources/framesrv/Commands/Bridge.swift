import FrameBridge
import FrameServer
import Glibc

/// `framesrv bridge`: streams between hosts over ZeroMQ TCP.
enum BridgeCommand {
    static let name = "bridge"
    static let summary = "carry a stream to another host over ZeroMQ TCP (send, recv; credits, reconnects)"
    static let help = """
    usage: framesrv bridge send --in A (--to tcp://HOST:PORT | --listen tcp://ADDR:PORT) [--live|--lossless] [options]
           framesrv bridge recv --out B (--listen tcp://ADDR:PORT | --from tcp://HOST:PORT) [options]
           framesrv bridge keygen [-o NAME]

    Carries stream A of this host to stream B of another (docs/BRIDGE.md). The sender is an
    ordinary consumer of A; the receiver republishes every frame into its host's shared
    memory as B, bit-identical, with pts, time base, duration, flags, colour, aspect ratio,
    field order, chroma location and source_dropped (capture_ns is the arrival time: the
    sender's clock is another host's). B behaves like any local stream.
    Either side may dial: 'send --to' + 'recv --listen', or 'send --listen' + 'recv --from'
    (the receiver dials out through a firewall).

      --in NAME            send: the stream to carry
      --out NAME           recv: the stream to create
      --to URL             send: dial the receiver at tcp://HOST:PORT
      --from URL           recv: dial the sender at tcp://HOST:PORT
      --listen URL         bind tcp://ADDR:PORT (tcp://*:PORT: every address) and wait for the peer
      --lossless           send: every frame, in order (default): the receiver grants credits,
                           a slow link backpressures A's producer as a slow local consumer does,
                           and frames not yet acknowledged are resent after a reconnect
      --live               send: the newest frame only; skipped frames are counted and B's next
                           frame carries them (source_dropped, discontinuity)
      --codec raw|ffv1|h264  send: the payload: raw planes, bit-identical (default); FFV1,
                           lossless and smaller; or H.264 (libx264, lossy, small: for slow
                           links; lossless mode only: every packet is needed). libavcodec;
                           frames a codec cannot hold go raw; the receiver decodes what comes
      --crf N              --codec h264's constant quality, 0..51 (default 23)
      -b:v RATE            --codec h264's average bit rate in bits/s (k, M suffixes: 2M, 500k),
                           capped as ffmpeg's -maxrate RATE -bufsize RATE would (one second
                           of VBV buffer): for a link of about RATE. Not with --crf
      --window N           frames in flight, 1..64 (default 4): credits the receiver grants
                           (recv) or frames of A the sender holds at most (send)
      --slots N            recv: B's slots, 1..64 (default 8)
      --wait SECONDS       send: give up if A has not appeared by then (default: wait)
      --no-wait            recv: publish at once; by default B publishes (and acknowledges)
                           nothing until its first lossless consumer attaches, as produce -i
                           and replay wait for theirs, so that consumer gets every frame
    \(BridgeSecurityOptions.help)
      --stats-json         print the final figures as one JSON line
      --quiet              no summary line

    Both sides reconnect by themselves after a dropped link or a restart of the other (ZeroMQ
    heartbeats and reconnects, and a session hello). After a gap, B's next frame carries the
    discontinuity flag. When A ends, B ends (its consumers exit 0) and both commands exit 0.
    The receiver serves its link (peer, bytes/s, frames in flight, credits, round-trip time,
    reconnects) as 'framesrv ctl B status', and ls, top and inspect show it.
    """

    static var entry: CommandEntry {
        CommandEntry(name: name, summary: summary, help: help) { arguments in try run(arguments) }
    }

    static func run(_ arguments: [String]) throws -> ExitStatus {
        guard let role = arguments.first else { throw UsageError("say what to do: framesrv bridge send|recv|keygen (see --help)") }
        if role == "keygen" { return try BridgeKeygenCommand.run(Array(arguments.dropFirst())) }
        let o = try BridgeOptions(role: role, parsing: Array(arguments.dropFirst()))
        installStopHandlers()
        switch o.role {
        case .send: return try send(o)
        case .recv: return try receive(o)
        }
    }

    /// CURVE (or, with --insecure, NULL) for this end's socket (Security/BridgeSecurity).
    static func security(_ o: BridgeOptions) throws -> SecureSocket {
        let security = o.role == .send ? try o.security.sender(endpoint: o.endpoint.text)
                                       : try o.security.receiver(endpoint: o.endpoint.text)
        return { socket, context in try security.apply(to: socket, context: context) }
    }

    static func send(_ o: BridgeOptions) throws -> ExitStatus {
        var settings = BridgeSendSettings(stream: o.stream, endpoint: o.endpoint)
        settings.bind = o.bind
        settings.mode = o.mode
        settings.window = o.window
        settings.waitSeconds = o.waitSeconds
        settings.codec = o.codec
        settings.consumerName = ClientName.fit("bridge send \(o.endpoint.text)")
        let sender = try BridgeSender(settings: settings, secure: try security(o))
        let terminal = stderrIsTerminal && !o.quiet
        let report = sender.run(stop: StopSignal.shouldStop) { r in
            guard terminal else { return }
            var line = "\rframes=\(r.frames) bytes=\(r.bytes) resent=\(r.resent) reconnects=\(r.reconnects)"
                + " rtt=\(r.rttMillis.map { formatDouble($0, 2) + "ms" } ?? "-")   "
            line.withUTF8 { _ = try? writeAll(2, UnsafeRawBufferPointer($0)) }
        }
        if terminal { warn("") }
        if o.statsJSON { print(report.json) }
        if let error = report.error { throw BridgeError.stream(error) }
        if !o.quiet {
            print("bridge send: \(o.stream) -> \(o.endpoint.text): \(report.frames) frames, \(report.bytes) bytes, "
                  + "\(report.resent) resent, \(report.skipped) skipped, \(report.reconnects) reconnects")
        }
        if StopSignal.requested, !report.ended { return .success }
        return report.failed ? .failed : .success
    }

    static func receive(_ o: BridgeOptions) throws -> ExitStatus {
        var settings = BridgeReceiveSettings(stream: o.stream, endpoint: o.endpoint)
        settings.bind = o.bind
        settings.window = o.window
        settings.slots = o.slots
        settings.waitForConsumer = !o.noWait
        let receiver = try BridgeReceiver(settings: settings, secure: try security(o))
        let report = try receiver.run(stop: StopSignal.shouldStop)
        if o.statsJSON { print(report.json) }
        if !o.quiet {
            print("bridge recv: \(o.endpoint.text) -> \(o.stream): \(report.frames) frames, \(report.bytes) bytes, "
                  + "\(report.duplicates) duplicates, \(report.malformed) malformed, \(report.sessions) sessions")
        }
        return report.failed ? .failed : .success
    }
}
