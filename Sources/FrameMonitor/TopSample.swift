import FoundationEssentials
import FrameControl
import Glibc
import FrameServer

/// Every stream's snapshot at one moment: what `top`, `ls` and `framesrv web` read.
public struct TopSample: Sendable {
    public let unixTime: Double
    public let nanos: UInt64
    public let streams: [StreamSnapshot]
    /// One line for each stream (or consumer entry) skipped because it could not be read.
    public let warnings: [String]
    /// What the running producers that read a file say of their playback, by stream name.
    public var playback: [String: PlaybackStatus] = [:]
    /// What bridged streams (`framesrv bridge recv`) say of their link, by stream name.
    public var links: [String: LinkStatus] = [:]

    public init(unixTime: Double, nanos: UInt64, streams: [StreamSnapshot], warnings: [String],
                playback: [String: PlaybackStatus] = [:], links: [String: LinkStatus] = [:]) {
        self.links = links
        self.unixTime = unixTime
        self.nanos = nanos
        self.streams = streams
        self.warnings = warnings
        self.playback = playback
    }

    /// `dir` nil: there is no runtime directory yet, so no streams.
    public static func take(_ dir: RuntimeDirectory?) -> TopSample {
        let nanos = monotonicNanos()
        let (streams, warnings) = dir.map { StreamSnapshot.scan(in: $0) } ?? ([], [])
        var playback: [String: PlaybackStatus] = [:], links: [String: LinkStatus] = [:]
        if let dir {
            // One `status` per stream with a control socket: a playback's or a link's.
            for s in streams where s.state == "running" {
                guard access(dir.controlSocketPath(s.name), F_OK) == 0,
                      case .json(let text)? = try? ControlClient.send(.status, to: s.name, directory: dir, timeout: 0.5) else { continue }
                if let link = LinkStatus(json: text) { links[s.name] = link } else { playback[s.name] = PlaybackStatus(json: text) }
            }
        }
        return TopSample(unixTime: Date().timeIntervalSince1970, nanos: nanos, streams: streams, warnings: warnings,
                         playback: playback, links: links)
    }

    /// The same stream in this sample: same name and same producer (a restart resets the counters).
    public func stream(like s: StreamSnapshot) -> StreamSnapshot? {
        streams.first { $0.name == s.name && $0.producerPID == s.producerPID }
    }
}

/// Events per second of a counter between two readings `seconds` apart; nil without an
/// earlier reading of the same counter.
public func measuredRate(_ now: UInt64, since before: UInt64?, seconds: Double) -> Double? {
    guard let before, now >= before, seconds > 0 else { return nil }
    return Double(now - before) / seconds
}

/// `value` as the monitors print it with --json: sorted keys, one line.
public func encodeJSON<T: Encodable>(_ value: T) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}
