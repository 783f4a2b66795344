import FrameServer

/// What a replay paces by (`framesrv replay --pace`).
public enum ReplayPace: String, Sendable, CaseIterable {
    /// The frames' media time (pts), as ffmpeg plays a file: a recording of `produce -i`, which
    /// decoded faster than real time, lasts its media's duration. The default.
    case pts
    /// The recorded capture times: the moments the frames reached the recorder.
    case capture
}

/// A recording's frames on the media timeline (pts), for replay's pacing, -ss, -t and seeks.
///
/// A frame's media time is its pts (in its time base) less its clock's first pts, plus the
/// capture offset of the frame that pts belongs to. A clock is the tracks that one producer
/// published (a movie's pictures and sound: their pts share the file's timeline), so they
/// keep their pts' offsets, as a player syncs them; tracks of different producers each run by
/// their own pts and start as they were captured. A clock's first pts is the smallest of its
/// tracks' first pts. A frame without a pts is at its capture offset. All in nanoseconds; a
/// pts whose nanoseconds overflow counts as none.
///
/// **The span.** A recorder writes frames in the order they arrive, so the last readable frame
/// record says how long the recording is, whether or not the file was finished: a record more
/// than `spanSlack` past the last one (on either timeline) is damage, not a frame, and a replay
/// skips and counts it (`isBeyondSpan`) instead of waiting for it.
public struct MediaTimeline: Sendable {
    /// A track's first frame: its pts in nanoseconds and its capture offset.
    struct Origin: Sendable { var ptsNanos: Int64; var offset: Int64 }

    /// How far past the last frame record another may lie (tracks interleave in the file).
    public static let spanSlack: Int64 = 60_000_000_000

    private var origins: [Int: Origin] = [:]
    private var trackStarted: Set<Int> = []
    /// Every frame's media time, capture offset and length, in file order.
    private var frames: [(media: Int64, offset: Int64, length: Int64)] = []
    /// The latest media time and capture offset a frame of the recording can have.
    private var mediaLimit: Int64 = .max, offsetLimit: Int64 = .max
    /// The end of the last frame in the span (its media time plus its duration), nanoseconds.
    public private(set) var durationNanos: Int64 = 0
    /// The capture offset of the last frame in the span.
    public private(set) var lastOffsetNanos: Int64 = 0

    /// Each track's clock (the first track of the same producer); a track not in it is its own.
    private var clocks: [Int: Int] = [:]

    /// Builds the timeline from every frame record, in file order; `clocks[track]` names the
    /// track's producer (tracks of one producer share their pts' timeline), nil: its own.
    init(clocks: [String?] = [], records: (_ body: (Int, FrameRecord) -> Void) -> Void) {
        for (track, clock) in clocks.enumerated() {
            self.clocks[track] = clock.flatMap { c in clocks.firstIndex { $0 == c } } ?? track
        }
        // First every track's first pts (a clock's origin needs all of its tracks'), then each frame's media time.
        var read: [(track: Int, pts: Int64?, offset: Int64, length: Int64)] = []
        records { track, record in
            let pts = Self.nanos(record.description.pts, record.description.timeBase)
            if let pts, !trackStarted.contains(track) {
                trackStarted.insert(track)
                let clock = self.clocks[track] ?? track
                if pts < origins[clock]?.ptsNanos ?? .max { origins[clock] = Origin(ptsNanos: pts, offset: record.captureOffsetNanos) }
            }
            let length = Self.nanos(record.description.duration, record.description.timeBase) ?? 0
            read.append((track, pts, record.captureOffsetNanos, max(0, length)))
        }
        frames = read.map { (media(pts: $0.pts, offset: $0.offset, track: $0.track), $0.offset, $0.length) }
        guard let last = frames.last else { return }
        mediaLimit = last.media.addingReportingOverflow(Self.spanSlack).partialValue
        offsetLimit = last.offset.addingReportingOverflow(Self.spanSlack).partialValue
        frames.removeAll { $0.media > mediaLimit || $0.offset > offsetLimit }
        for f in frames {
            durationNanos = max(durationNanos, f.media.addingReportingOverflow(f.length).partialValue)
            lastOffsetNanos = max(lastOffsetNanos, f.offset)
        }
    }

    /// Whether a frame at this media time and capture offset lies past the recording's span
    /// (a damaged record: skip it).
    public func isBeyondSpan(media: Int64, offset: Int64) -> Bool { media > mediaLimit || offset > offsetLimit }

    /// The frame's media time, nanoseconds.
    public func mediaNanos(of record: FrameRecord, track: Int) -> Int64 {
        media(pts: Self.nanos(record.description.pts, record.description.timeBase), offset: record.captureOffsetNanos, track: track)
    }

    /// The media time of a frame of `track` with this pts (ns) and capture offset.
    private func media(pts: Int64?, offset: Int64, track: Int) -> Int64 {
        guard let origin = origins[clocks[track] ?? track], let pts else { return offset }
        let (fromFirst, o1) = pts.subtractingReportingOverflow(origin.ptsNanos)
        let (media, o2) = origin.offset.addingReportingOverflow(fromFirst)
        return o1 || o2 ? offset : media
    }

    /// The capture offset to seek the file to for media time `media`: the earliest capture
    /// offset among the frames at or after it (nil: none is).
    public func captureOffset(atOrAfter media: Int64) -> Int64? {
        frames.lazy.filter { $0.media >= media }.map(\.offset).min()
    }

    /// `value` time-base units in nanoseconds; nil for no value, a bad time base or an overflow.
    static func nanos(_ value: Int64?, _ timeBase: Rational) -> Int64? {
        guard let value, timeBase.num > 0, timeBase.den > 0 else { return nil }
        let perUnit = Int64(timeBase.num) * 1_000_000_000
        // The quotient must fit Int64 (dividingFullWidth traps otherwise): checked roughly first.
        guard (Double(value) * Double(perUnit) / Double(timeBase.den)).magnitude < 9e18 else { return nil }
        return Int64(timeBase.den).dividingFullWidth(value.multipliedFullWidth(by: perUnit)).quotient
    }
}
