import CFFmpeg
import FrameServer

/// `-fps_mode`: how a recording's timestamps follow the frames' (ffmpeg's option of that name).
public enum FrameRateMode: String, Sendable, CaseIterable {
    /// Every frame with its own timestamp, in its own time base (variable frame rate kept).
    case passthrough
    /// Frames duplicated and dropped onto the nominal rate's grid, as ffmpeg's `-fps_mode cfr`.
    case cfr
}

/// ffmpeg's constant-frame-rate sync (`-fps_mode cfr`, fftools' `do_video_out` in FFmpeg 5.1):
/// for each input frame, how many output frames on the rate's grid it becomes, and how many of
/// those repeat the previous frame (a gap before it) rather than show it.
///
/// Times are in output frame periods (the encoder's time base, 1/rate).
struct ConstantRateSync {
    /// The next output frame's pts (ffmpeg's `sync_opts`); nil before the first frame.
    private(set) var next: Int64?
    /// The previous-frame repeats of the last three frames (their median repeats the last frame at the end).
    private var lastRepeats = [0, 0, 0]

    /// What one frame at `time` (`sync_ipts`), lasting `duration` periods, becomes: `total`
    /// output frames from pts `firstPts`, the first `previous` of them copies of the previous frame.
    /// The first frame lands on its own time rounded to the grid.
    mutating func frame(at time: Double, duration: Double) -> (previous: Int, total: Int, firstPts: Int64) {
        let next = self.next ?? Int64(time.rounded(.toNearestOrEven))
        var delta0 = time - Double(next)
        let delta = delta0 + duration
        // A frame a little early (it overlaps the previous one) is clipped onto the grid.
        if delta0 < 0, delta > 0 { delta0 = 0 }
        var previous = 0, total = 1
        if delta < -1.1 {
            total = 0
        } else if delta > 1.1 {
            total = Int(Float(delta).rounded(.toNearestOrEven))
            if delta0 > 1.1 { previous = Int(Float(delta0 - 0.6).rounded(.toNearestOrEven)) }
        }
        previous = min(previous, total)
        lastRepeats = [previous, lastRepeats[0], lastRepeats[1]]
        self.next = next + Int64(total)
        return (previous, total, next)
    }

    /// At the end of the stream: how many more copies of the last frame (ffmpeg's median of
    /// the last three frames' repeats), from pts `firstPts`.
    mutating func end() -> (total: Int, firstPts: Int64) {
        guard let next else { return (0, 0) }
        let sorted = lastRepeats.sorted()
        self.next = next + Int64(sorted[1])
        return (sorted[1], next)
    }

    /// A frame's time in periods of `outputTimeBase`, as ffmpeg computes `sync_ipts`: with up to
    /// 16 extra bits of precision, nudged off exact midpoints by 2^-17.
    static func syncTime(_ pts: Int64, _ timeBase: AVRational, _ outputTimeBase: AVRational) -> Double {
        var tb = outputTimeBase
        let extraBits = min(max(29 - Int32(av_log2(UInt32(tb.den))), 0), 16)
        tb.den <<= extraBits
        var t = Double(av_rescale_q(pts, timeBase, tb)) / Double(1 << extraBits)
        t += (t > 0 ? 1 : t < 0 ? -1 : 0) / Double(1 << 17)
        return t
    }
}

/// Timestamps a recording can rely on: each frame's pts, rescaled into one time base (the
/// first frame's), strictly increasing. A producer that restarts its timestamps (a new
/// producer of the stream) continues after the last frame instead of going back.
struct MediaFileClock {
    /// The time base of `pts` results: the first frame's, or 1/rate when it has none.
    let timeBase: AVRational
    /// One frame at the nominal rate, in `timeBase` (the duration of a frame that states none).
    let frameDuration: Int64
    private var last: Int64?
    private var next: Int64 = 0
    private var offset: Int64 = 0

    init(timeBase: AVRational, rate: AVRational) {
        self.timeBase = timeBase
        frameDuration = max(1, av_rescale_q(1, AVRational(num: rate.den, den: rate.num), timeBase))
    }

    /// The frame's pts and duration in `timeBase` (a frame without a pts follows the last one).
    mutating func stamp(_ d: FrameDescription) -> (pts: Int64, duration: Int64) {
        var duration = frameDuration
        var pts = next
        let valid = d.timeBase.num > 0 && d.timeBase.den > 0
        if valid, d.duration > 0 { duration = max(1, av_rescale_q(d.duration, d.timeBase.av, timeBase)) }
        if valid, let p = d.pts { pts = av_rescale_q(p, d.timeBase.av, timeBase) + offset }
        if let last, pts <= last {
            offset += next - pts
            pts = next
        }
        last = pts
        next = pts + duration
        return (pts, duration)
    }
}
