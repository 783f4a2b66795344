import FrameServer

/// What a playing producer reports to `status` (`framesrv ctl NAME status`, ls, top).
public struct PlaybackStatus: Equatable, Sendable, Encodable {
    public var stream: String
    /// Media time of the last frame published, seconds from the input's start.
    public var position: Double
    /// The input's duration in seconds, nil when unknown (a pipe, a live input).
    public var duration: Double?
    /// Times real time; nil: as fast as the consumers take frames (`max`).
    public var rate: Double?
    public var paused: Bool
    /// Frames published so far.
    public var frames: UInt64
    /// Times a looping input went back to its start (`position` is within the file): the
    /// play now is loop `loops + 1`.
    public var loops: Int
    /// While the producer waits for lossless consumers before its first frame (--wait-for N):
    /// N, and how many are attached; nil once it publishes.
    public var waiting: (wanted: Int, attached: Int)?

    /// A playing producer's figures (`waiting` while it waits for consumers).
    public init(stream: String, position: Double, duration: Double?, rate: Double?, paused: Bool, frames: UInt64,
                waiting: (wanted: Int, attached: Int)? = nil, loops: Int = 0) {
        self.stream = stream; self.position = position; self.duration = duration; self.loops = loops
        self.rate = rate; self.paused = paused; self.frames = frames; self.waiting = waiting
    }

    /// Equal when every field is (`waiting` compared field by field: a tuple is not Equatable).
    public static func == (a: PlaybackStatus, b: PlaybackStatus) -> Bool {
        (a.stream, a.position, a.duration, a.rate, a.paused, a.frames) == (b.stream, b.position, b.duration, b.rate, b.paused, b.frames)
            && a.loops == b.loops
            && a.waiting?.wanted == b.waiting?.wanted && a.waiting?.attached == b.waiting?.attached
    }

    /// `waiting for 2 lossless consumers (1 attached)`, while it waits.
    public var waitingText: String? {
        waiting.map { "waiting for \($0.wanted) lossless consumer\($0.wanted == 1 ? "" : "s") (\($0.attached) attached)" }
    }

    /// `paused` or `playing`.
    public var state: String { paused ? "paused" : "playing" }

    /// `1.00x`, `max`.
    public var rateText: String { rate.map { formatFixed($0, 2) + "x" } ?? "max" }

    /// ` (loop 4)` once a looping input went back to its start, else nothing.
    public var loopText: String { loops > 0 ? " (loop \(loops + 1))" : "" }

    /// `12.3/60.0 paused 1.00x (loop 2)`, or `waitingText`: what ls and top show.
    public var cell: String {
        waitingText ?? "\(formatFixed(position, 1))/\(duration.map { formatFixed($0, 1) } ?? "?") \(state) \(rateText)\(loopText)"
    }

    /// `12.345/60.000 s paused 1.00x (loop 2)`: position, duration, state, rate and loop in one line.
    public var line: String {
        "\(formatFixed(position, 3))/\(duration.map { formatFixed($0, 3) } ?? "?") s \(state) \(rateText)\(loopText)"
            + (waitingText.map { ", " + $0 } ?? "")
    }

    /// One JSON object: stream, state, paused, position, duration (null: unknown), rate
    /// (null: max), frames, loops, and while it waits for consumers waiting_for and attached.
    public var json: String {
        "{\"stream\":\"\(stream)\",\"state\":\"\(state)\",\"paused\":\(paused),\"position\":\(formatFixed(position, 6)),"
            + "\"duration\":\(duration.map { formatFixed($0, 6) } ?? "null"),\"rate\":\(rate.map { "\($0)" } ?? "null"),"
            + "\"frames\":\(frames),\"loops\":\(loops)" + (waiting.map { ",\"waiting_for\":\($0.wanted),\"attached\":\($0.attached)" } ?? "") + "}"
    }

    enum Keys: String, CodingKey { case stream, state, paused, position, duration, rate, frames, loops, waitingFor = "waiting_for", attached, waiting }

    /// The fields of `json`, unknown ones as null.
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(stream, forKey: .stream)
        try c.encode(state, forKey: .state)
        try c.encode(paused, forKey: .paused)
        try c.encode(position, forKey: .position)
        try c.encode(duration, forKey: .duration)
        try c.encode(rate, forKey: .rate)
        try c.encode(frames, forKey: .frames)
        try c.encode(loops, forKey: .loops)
        try c.encodeIfPresent(waiting?.wanted, forKey: .waitingFor)
        try c.encodeIfPresent(waiting?.attached, forKey: .attached)
        try c.encodeIfPresent(waitingText, forKey: .waiting)
    }

    /// Reads `json`'s object back (nil when a field is missing or malformed). Stream names
    /// need no escaping (`validateStreamName`), so a flat scan is enough.
    public init?(json: String) {
        var fields: [String: String] = [:]
        let body = json.trimmingSpaces
        guard body.hasPrefix("{"), body.hasSuffix("}") else { return nil }
        for pair in body.dropFirst().dropLast().split(separator: ",") {
            let kv = pair.split(separator: ":", maxSplits: 1).map { String($0).trimmingSpaces }
            guard kv.count == 2 else { return nil }
            fields[kv[0].trimmingQuotes] = kv[1]
        }
        guard let stream = fields["stream"]?.trimmingQuotes, let position = fields["position"].flatMap(Double.init),
              let paused = fields["paused"].flatMap(Bool.init), let frames = fields["frames"].flatMap(UInt64.init),
              let duration = fields["duration"], let rate = fields["rate"] else { return nil }
        let waiting = fields["waiting_for"].flatMap(Int.init).map { ($0, fields["attached"].flatMap(Int.init) ?? 0) }
        self.init(stream: stream, position: position, duration: Double(duration), rate: Double(rate), paused: paused, frames: frames,
                  waiting: waiting, loops: fields["loops"].flatMap(Int.init) ?? 0)
    }
}

extension String {
    fileprivate var trimmingSpaces: String {
        String(drop { $0 == " " || $0 == "\n" }.reversed().drop { $0 == " " || $0 == "\n" }.reversed())
    }
    fileprivate var trimmingQuotes: String {
        hasPrefix("\"") && hasSuffix("\"") && count >= 2 ? String(dropFirst().dropLast()) : self
    }
}
