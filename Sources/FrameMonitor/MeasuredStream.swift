import FrameControl
import FrameServer
import Glibc

/// A stream snapshot and its measured rate, encoded as the snapshot's fields plus "fps"
/// (null when it could not be measured) and, for a producer that reads a file, "playback":
/// a row of `ls --json` and of `/api/streams`.
public struct MeasuredStream: Encodable, Sendable {
    public let snapshot: StreamSnapshot
    public let fps: Double?
    public let playback: PlaybackStatus?
    /// A bridged stream's link (`framesrv bridge recv`).
    public let link: LinkStatus?

    public init(snapshot: StreamSnapshot, fps: Double?, playback: PlaybackStatus?, link: LinkStatus? = nil) {
        self.link = link
        self.snapshot = snapshot
        self.fps = fps
        self.playback = playback
    }

    enum Keys: String, CodingKey { case fps, playback, link }

    public func encode(to encoder: any Encoder) throws {
        try snapshot.encode(to: encoder)
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(fps, forKey: .fps)
        try container.encodeIfPresent(playback, forKey: .playback)
        try container.encodeIfPresent(link, forKey: .link)
    }

    /// Every stream of `second`, in pipeline order, with the frames per second published since `first`
    /// (nil for a stream that appeared or was restarted meanwhile).
    public static func rows(_ second: TopSample, since first: TopSample) -> [MeasuredStream] {
        let seconds = Double(second.nanos - first.nanos) / 1e9
        return StreamSnapshot.pipelineOrder(second.streams).map { s in
            MeasuredStream(snapshot: s, fps: measuredRate(s.published, since: first.stream(like: s)?.published, seconds: seconds),
                           playback: second.playback[s.name], link: second.links[s.name])
        }
    }

    /// Every stream read twice, 250 ms apart (`ls`): the rows and the warnings of both readings.
    public static func measure(_ dir: RuntimeDirectory?) -> (streams: [MeasuredStream], warnings: [String]) {
        let first = TopSample.take(dir)
        guard !first.streams.isEmpty else { return ([], first.warnings) }
        usleep(250_000)
        let second = TopSample.take(dir)
        return (rows(second, since: first), first.warnings + second.warnings)
    }
}
