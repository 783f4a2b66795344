import FrameControl
import FrameServer
import Glibc

/// One refresh of `top`, as printed and as encoded with --json.
public struct TopReport: Encodable, Sendable {
    public let time: Double
    public let streams: [TopStream]

    /// `streams`: what to show of `sample` (in pipeline order, with the recently ended).
    public init(_ sample: TopSample, streams shown: [StreamSnapshot], previous: TopSample?) {
        time = sample.unixTime
        let seconds = previous.map { Double(sample.nanos - $0.nanos) / 1e9 } ?? 0
        streams = shown.map { s in
            TopStream(s, before: s.vanished ? nil : previous?.stream(like: s), seconds: seconds,
                      playback: s.vanished ? nil : sample.playback[s.name], link: s.vanished ? nil : sample.links[s.name])
        }
    }

    /// Every stream of `sample`, in pipeline order.
    public init(_ sample: TopSample, previous: TopSample?) {
        self.init(sample, streams: StreamSnapshot.pipelineOrder(sample.streams), previous: previous)
    }
}

/// A stream's row: counters from its snapshot, fps measured since the previous refresh.
public struct TopStream: Encodable, Sendable {
    public let name: String
    public let state: String
    public let producerPID: Int32
    public let producerName: String
    public let fps: Double?
    public let format: String?
    /// "video" or "audio" (PROTOCOL.md 4.6).
    public let media: String
    public let slots: Int
    public let slotsInUse: Int
    public let minFreeSlots: UInt64
    public let published: UInt64
    public let dropped: UInt64
    public let nominalRate: Rational?
    /// A producer that reads a file: its position, duration, state and rate (framesrv ctl).
    public let playback: PlaybackStatus?
    /// A bridged stream's link (`framesrv bridge recv`): peer, bytes/s, in flight, credits, RTT, reconnects.
    public let link: LinkStatus?
    /// The stream ended and its files are gone: its last counts, shown for a few seconds.
    public let vanished: Bool
    public let consumers: [TopConsumer]

    public init(_ s: StreamSnapshot, before: StreamSnapshot?, seconds: Double, playback: PlaybackStatus? = nil, link: LinkStatus? = nil) {
        self.playback = playback
        self.link = link
        name = s.name
        state = s.state
        producerPID = s.producerPID
        producerName = s.producerName
        fps = measuredRate(s.published, since: before?.published, seconds: seconds)
        format = s.format
        media = s.media
        slots = s.slots
        slotsInUse = s.slots - s.freeSlots
        minFreeSlots = s.minFreeSlots
        published = s.published
        dropped = s.dropped
        nominalRate = s.nominalRate
        vanished = s.vanished
        consumers = s.consumers.map { c in
            TopConsumer(c, before: before?.consumers.first { $0.index == c.index && $0.pid == c.pid }, seconds: seconds)
        }
    }
}

/// A consumer's row: counters from its snapshot, fps and latency percentiles computed.
public struct TopConsumer: Encodable, Sendable {
    public let index: Int
    public let pid: Int32
    public let name: String
    public let mode: String
    public let state: String
    public let fps: Double?
    public let delivered: UInt64
    public let held: UInt64
    public let holdMillis: Double
    public let lag: UInt64
    public let missed: UInt64
    public let stale: UInt64
    /// Frames the source dropped just before frames this consumer got.
    public let sourceDropped: UInt64
    /// Upper bounds of the percentiles' histogram buckets (absent before the first frame
    /// and for the open last bucket), and the same as shown: "12us", "<400us", ">=100ms" or "-".
    public let latencyP50Micros: UInt64?
    public let latencyP99Micros: UInt64?
    public let latencyP50: String
    public let latencyP99: String

    public init(_ c: ConsumerSnapshot, before: ConsumerSnapshot?, seconds: Double) {
        index = c.index
        pid = c.pid
        name = c.name
        mode = c.mode
        state = c.state
        fps = measuredRate(c.delivered, since: before?.delivered, seconds: seconds)
        delivered = c.delivered
        held = c.held
        holdMillis = c.holdMillis
        lag = c.lag
        missed = c.missed
        stale = c.stale
        sourceDropped = c.sourceDropped
        let p50 = c.latencyPercentileMicros(0.5), p99 = c.latencyPercentileMicros(0.99)
        latencyP50Micros = p50 == ConsumerSnapshot.latencyUnbounded ? nil : p50
        latencyP99Micros = p99 == ConsumerSnapshot.latencyUnbounded ? nil : p99
        latencyP50 = Self.label(p50)
        latencyP99 = Self.label(p99)
    }

    /// A percentile as top shows it: "12us" for the 1 us bucket [12, 13) (under 100 us),
    /// "<400us", "<3ms", "<40ms" for the coarser buckets' upper bounds, ">=100ms" for the
    /// open last bucket, "-" for none.
    public static func label(_ bound: UInt64?) -> String {
        guard let bound else { return "-" }
        guard bound != ConsumerSnapshot.latencyUnbounded else { return ">=\(ConsumerSnapshot.latencyUnboundedFromMicros / 1000)ms" }
        if bound <= 100 { return "\(bound - 1)us" }
        return bound < 1000 ? "<\(bound)us" : "<\(bound / 1000)ms"
    }
}

extension TopReport {
    /// The refresh as one line for a log: local time, then each stream's frames and rate
    /// (`12:01:05 cam 250 frames 25.0 fps | edges 249 frames 24.9 fps, 3 dropped`).
    public var logLine: String {
        var t = time_t(time), parts = tm()
        localtime_r(&t, &parts)
        var clock = [CChar](repeating: 0, count: 16)
        let n = strftime(&clock, clock.count, "%H:%M:%S", &parts)
        let stamp = String(decoding: clock[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let rows = streams.map { s in
            var row = "\(s.name) \(s.published) frames \(s.fps.map { formatFixed($0, 1) } ?? "-") fps"
            if s.dropped > 0 { row += ", \(s.dropped) dropped" }
            if let waiting = s.playback?.waitingText { row += ", " + waiting }
            return row
        }
        return stamp + " " + (rows.isEmpty ? "no streams" : rows.joined(separator: " | "))
    }
}
