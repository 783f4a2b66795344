import CFFmpeg
import FrameServer

extension MediaDecoder {
    /// The input's duration in seconds (libavformat's), nil when unknown (a pipe, a device).
    public var duration: Double? {
        guard let d = formatContext?.pointee.duration, d != cffmpeg_nopts(), d > 0 else { return nil }
        return Double(d) / Double(AV_TIME_BASE)
    }

    /// Whether `seek(to:)` can work: a file (not a pipe, not a device).
    public var canSeek: Bool {
        guard let pb = formatContext?.pointee.pb else { return false }
        return pb.pointee.seekable != 0
    }

    /// A frame's media time: seconds from the input's start (pts in seconds + `origin`).
    public func mediaTime(of description: FrameDescription) -> Double? {
        seconds(of: description).map { $0 + origin }
    }

    /// As fftools seeks for `-ss`: to the keyframe before `timestamp` (microseconds, with
    /// the start time), a little earlier when the stream has B-frames (DTS-based seeking).
    static func seekFile(_ ctx: UnsafeMutablePointer<AVFormatContext>, streamIndex: Int32, to timestamp: Int64) -> Int32 {
        var seekTo = timestamp
        let delay = streamIndex >= 0 ? ctx.pointee.streams[Int(streamIndex)]!.pointee.codecpar!.pointee.video_delay : 0
        if ctx.pointee.iformat.pointee.flags & AVFMT_SEEK_TO_PTS == 0, delay != 0 {
            seekTo -= 3 * Int64(AV_TIME_BASE) / 23
        }
        return avformat_seek_file(ctx, -1, Int64.min, seekTo, seekTo, 0)
    }
}
