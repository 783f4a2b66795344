/// A bridged stream's link (`framesrv bridge recv` serves it on the stream's control socket
/// as `status`; ls, top and inspect show it).
public struct LinkStatus: Equatable, Sendable, Encodable {
    public var stream: String
    /// The sender's address as the receiver sees it (`?` before the first session).
    public var peer: String
    /// Payload bytes per second over the last second.
    public var bytesPerSecond: Double
    /// Frames sent but not yet acknowledged, as the receiver knows them (granted minus free).
    public var inFlight: Int
    /// Credits the receiver grants (frames the sender may have in flight).
    public var credits: Int
    /// Round-trip time in milliseconds (ping/pong), nil before the first measure.
    public var rttMillis: Double?
    /// Sessions resumed or replaced after the first (link drops, restarts).
    public var reconnects: Int
    /// Frames the sender skipped (live) or the receiver saw missing.
    public var skipped: UInt64
    /// Frames published on this side.
    public var frames: UInt64

    public init(stream: String, peer: String, bytesPerSecond: Double, inFlight: Int, credits: Int,
                rttMillis: Double?, reconnects: Int, skipped: UInt64, frames: UInt64) {
        self.stream = stream; self.peer = peer; self.bytesPerSecond = bytesPerSecond; self.inFlight = inFlight
        self.credits = credits; self.rttMillis = rttMillis; self.reconnects = reconnects; self.skipped = skipped
        self.frames = frames
    }

    /// `10.0.0.2 12.3MB/s 2/4 0.4ms r1`: what ls and top show in LINK (peer, bytes/s,
    /// in flight/credits, round trip, reconnects, and skipped frames when there are any).
    public var cell: String {
        "\(peer) \(Self.rate(bytesPerSecond)) \(inFlight)/\(credits) "
            + "\(rttMillis.map { Self.fixed($0, 1) + "ms" } ?? "-") r\(reconnects)" + (skipped > 0 ? " skip \(skipped)" : "")
    }

    /// Every figure in words: what `inspect` shows.
    public var line: String {
        "bridged from \(peer), \(Self.rate(bytesPerSecond)), \(inFlight) in flight of \(credits) credits, "
            + "round trip \(rttMillis.map { Self.fixed($0, 2) + " ms" } ?? "-"), \(reconnects) reconnects, \(skipped) skipped, \(frames) frames"
    }

    /// One JSON object with every field (`"link":true` tells it from a playback status).
    public var json: String {
        "{\"link\":true,\"stream\":\"\(stream)\",\"peer\":\"\(peer)\",\"bytes_per_second\":\(Self.fixed(bytesPerSecond, 0)),"
            + "\"in_flight\":\(inFlight),\"credits\":\(credits),\"rtt_ms\":\(rttMillis.map { Self.fixed($0, 3) } ?? "null"),"
            + "\"reconnects\":\(reconnects),\"skipped\":\(skipped),\"frames\":\(frames)}"
    }

    /// Reads `json` back; nil when it is not a link status. Names and addresses need no
    /// escaping (stream names are validated; addresses are IP:port), so a flat scan is enough.
    public init?(json: String) {
        let body = json.filter { $0 != " " && $0 != "\n" }
        guard body.hasPrefix("{"), body.hasSuffix("}") else { return nil }
        var f: [String: String] = [:]
        for pair in body.dropFirst().dropLast().split(separator: ",") {
            guard let colon = pair.firstIndex(of: ":") else { return nil }
            f[Self.unquoted(pair[..<colon])] = Self.unquoted(pair[pair.index(after: colon)...])
        }
        guard f["link"] == "true", let stream = f["stream"], let peer = f["peer"],
              let bps = f["bytes_per_second"].flatMap(Double.init), let inFlight = f["in_flight"].flatMap(Int.init),
              let credits = f["credits"].flatMap(Int.init), let rtt = f["rtt_ms"], let reconnects = f["reconnects"].flatMap(Int.init),
              let skipped = f["skipped"].flatMap(UInt64.init), let frames = f["frames"].flatMap(UInt64.init) else { return nil }
        self.init(stream: stream, peer: peer, bytesPerSecond: bps, inFlight: inFlight, credits: credits,
                  rttMillis: Double(rtt), reconnects: reconnects, skipped: skipped, frames: frames)
    }

    enum CodingKeys: String, CodingKey {
        case stream, peer, bytesPerSecond = "bytes_per_second", inFlight = "in_flight", credits, rttMillis = "rtt_ms"
        case reconnects, skipped, frames
    }

    private static func unquoted(_ s: Substring) -> String {
        s.hasPrefix("\"") && s.hasSuffix("\"") && s.count >= 2 ? String(s.dropFirst().dropLast()) : String(s)
    }

    static func rate(_ bps: Double) -> String {
        if bps >= 1e9 { return fixed(bps / 1e9, 2) + "GB/s" }
        if bps >= 1e6 { return fixed(bps / 1e6, 1) + "MB/s" }
        return fixed(bps / 1e3, 1) + "kB/s"
    }

    static func fixed(_ x: Double, _ digits: Int) -> String { formatFixed(x, digits) }
}

/// `x` with `digits` decimals, without Foundation (status lines and their JSON).
public func formatFixed(_ x: Double, _ digits: Int) -> String {
    guard x.isFinite else { return "0" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let scaled = (abs(x) * scale).rounded()
    let whole = Int64(scaled / scale)
    var fraction = String(Int64(scaled - Double(whole) * scale))
    while fraction.count < digits { fraction = "0" + fraction }
    return (x < 0 && scaled > 0 ? "-" : "") + "\(whole)" + (digits > 0 ? "." + fraction : "")
}

/// `v` rounded to `decimals` decimals, as Swift prints a Double (no trailing zeros, no ".0"
/// with 0 decimals): the figures of the CLI's lines and of the benchmarks' reports.
package func formatDouble(_ v: Double, _ decimals: Int = 1) -> String {
    var p: Double = 1
    for _ in 0..<decimals { p *= 10 }
    let r = (v * p).rounded() / p
    var s = "\(r)"
    if decimals == 0, s.hasSuffix(".0") { s.removeLast(2) }
    return s
}
