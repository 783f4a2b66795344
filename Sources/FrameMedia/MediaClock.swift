import FrameServer

/// The media time a run of frames covers, from their timestamps (pts x time base, plus the
/// last frame's duration), or from their count and a frame rate when they carry none.
public struct MediaClock: Sendable {
    private var firstPts: Int64?
    /// The media time the frames seen cover, in seconds.
    public private(set) var seconds = 0.0
    /// Frames seen.
    public private(set) var frames = 0

    public init() {}

    /// Counts `d`'s frame and extends the media time to its end.
    public mutating func record(_ d: FrameDescription, frameRate: Double?) {
        frames += 1
        let tb = d.timeBase.den > 0 && d.timeBase.num > 0 ? Double(d.timeBase.num) / Double(d.timeBase.den) : 0
        if let pts = d.pts, tb > 0 {
            if firstPts == nil { firstPts = pts }
            let end = Double(pts - firstPts!) * tb + Double(max(0, d.duration)) * tb
            seconds = max(seconds, end)
        } else if let frameRate, frameRate > 0 {
            seconds = Double(frames) / frameRate
        }
    }
}
