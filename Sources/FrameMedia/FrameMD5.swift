import CFFmpeg
import FrameServer
import Glibc

/// Writes what `ffmpeg -i INPUT -map 0:v:0 -f framemd5 -` writes for the frames of a stream:
/// the framehash header, then one line per frame with timestamps in ffmpeg's output time
/// base and the MD5 of the tightly packed planes (row bytes only, in plane order).
///
/// ffmpeg's output time base is the inverse of the input's (guessed) frame rate (ffmpeg 5.1:
/// the encoder's time base is `av_inv_q` of the buffersink's frame rate). framesrv's frame
/// header carries no frame rate: it is the stream's exact nominal rate when the caller passes
/// it (`frameRate`, the producer's `av_guess_frame_rate` as `rate_num/rate_den`), else the
/// first frame's duration x time base.
/// Timestamps are then mapped the way ffmpeg's variable-frame-rate sync does (`-vsync vfr`,
/// the default for framemd5). Exact for constant-frame-rate inputs; variable-frame-rate
/// inputs may differ in the timestamp columns.
public final class FrameMD5Writer {
    /// The file, or nil for standard output.
    private let descriptor: FileDescriptor?
    private let path: String
    private let shouldStop: (() -> Bool)?
    private var outputTimeBase: Rational?
    private var syncPts: Int64 = 0
    private var buffer: [UInt8] = []
    /// Converts an audio stream's samples to s16, as ffmpeg's framemd5 wants them.
    private var audioConverter: AudioSampleConverter?
    private let md5: OpaquePointer
    /// Frame lines written (frames ffmpeg's sync would drop are not written).
    public private(set) var frames = 0

    /// The stream's exact nominal frame rate (set it before the first frame; see above).
    public var frameRate: Rational?

    /// Writes to `path`, or to standard output for `-`. `frameRate`: the stream's nominal rate.
    /// `shouldStop` true ends a write blocked on a reader that does not read with `.interrupted`.
    public init(path: String, frameRate: Rational? = nil, shouldStop: (() -> Bool)? = nil) throws(MediaOutputError) {
        self.path = path
        self.frameRate = frameRate
        self.shouldStop = shouldStop
        descriptor = try openOutput(path)
        guard let ctx = av_md5_alloc() else { throw .ffmpeg("av_md5_alloc", "out of memory") }
        md5 = ctx
    }

    deinit {
        av_free(UnsafeMutableRawPointer(md5))
    }

    /// `Lavf59.27.100`: the libavformat that writes ffmpeg's `#software` line.
    public static var libavformatIdent: String {
        let v = avformat_version()
        return "Lavf\(v >> 16).\((v >> 8) & 0xFF).\(v & 0xFF)"
    }

    /// Appends the line for `frame` (and the header, before the first frame).
    public func write(_ frame: borrowing Frame) throws(MediaOutputError) {
        let header = frame.header
        if header.media == .audio { return try writeAudio(frame) }
        guard let format = header.format else {
            throw .pixelFormat("framemd5", header.pixelFormatName, PixelFormat.allCases.map(\.name).joined(separator: ", "))
        }
        let d = header.description
        let tb = outputTimeBase ?? Self.rateTimeBase(frameRate) ?? Self.outputTimeBase(d)
        if outputTimeBase == nil {
            outputTimeBase = tb
            try writeHeader(format, sampleAspectRatio: d.sampleAspectRatio, timeBase: tb)
        }
        guard let (pts, lineDuration) = nextTimestamp(d, timeBase: tb) else { return }
        let (hex, size) = Self.digest(frame, format, md5: md5)
        try emit("0, \(pad(String(pts), 10)), \(pad(String(pts), 10)), \(pad(String(lineDuration), 8)), "
                 + "\(pad(String(size), 8)), \(hex)\n")
        frames += 1
        // Each frame's line goes out now: a failing output (a full disk, /dev/full) is an
        // error at the first frame, not after 64 KB of buffered lines.
        try flush()
    }

    /// The header ffmpeg's framemd5 muxer writes before the first frame.
    private func writeHeader(_ format: FrameFormat, sampleAspectRatio sar: Rational, timeBase tb: Rational) throws(MediaOutputError) {
        try emit("""
            #format: frame checksums
            #version: 2
            #hash: MD5
            #software: \(Self.libavformatIdent)
            #tb 0: \(tb.num)/\(tb.den)
            #media_type 0: video
            #codec_id 0: rawvideo
            #dimensions 0: \(format.width)x\(format.height)
            #sar 0: \(sar.num)/\(sar.den)
            #stream#, dts,        pts, duration,     size, hash

            """)
    }

    /// The frame's pts and duration in the output time base `tb`, by ffmpeg's VFR sync
    /// (fftools/ffmpeg.c do_video_out): the frame's time, nudged off exact midpoints, is the
    /// next output pts unless it is within 0.6 frames of it; nil for a frame more than 0.6
    /// frames in the past (dropped, as ffmpeg drops it).
    private func nextTimestamp(_ d: FrameDescription, timeBase tb: Rational) -> (pts: Int64, duration: Int64)? {
        var duration: Double = 1
        if d.duration > 0, d.timeBase.den > 0 {
            let frameDuration = (Double(d.duration) * Double(d.timeBase.num) * Double(tb.den)
                                 / (Double(d.timeBase.den) * Double(tb.num))).rounded(.toNearestOrEven)
            if frameDuration > 0 { duration = frameDuration }
        }
        let lineDuration = Int64(duration)
        if let pts = d.pts, d.timeBase.den > 0 {
            var syncIpts = Double(pts) * Double(d.timeBase.num) * Double(tb.den) / (Double(d.timeBase.den) * Double(tb.num))
            syncIpts += (syncIpts > 0 ? 1 : syncIpts < 0 ? -1 : 0) / Double(1 << 17)
            var delta0 = syncIpts - Double(syncPts)
            let delta = delta0 + duration
            if delta0 < 0, delta > 0 {
                syncIpts = Double(syncPts)
                duration += delta0
                delta0 = 0
            }
            if delta <= -0.6 { return nil }
            if delta > 0.6 { syncPts = Int64(syncIpts.rounded(.toNearestOrEven)) }
        }
        defer { syncPts += 1 }
        return (syncPts, lineDuration)
    }

    /// The MD5 of the frame's tightly packed planes (lowercase hex) and their size in bytes.
    private static func digest(_ frame: borrowing Frame, _ format: FrameFormat, md5: OpaquePointer) -> (String, Int) {
        av_md5_init(md5)
        var size = 0
        for i in format.pixelFormat.planes.indices {
            let plane = frame.plane(i)
            let rowBytes = format.rowBytes(plane: i), stride = frame.header.stride(plane: i)
            for y in 0..<format.rows(plane: i) {
                av_md5_update(md5, plane.baseAddress!.assumingMemoryBound(to: UInt8.self) + y * stride, Int(rowBytes))
            }
            size += rowBytes * format.rows(plane: i)
        }
        return (finalHex(md5), size)
    }

    /// The digest of what `md5` was fed, as lowercase hex.
    private static func finalHex(_ md5: OpaquePointer) -> String {
        var digest = [UInt8](repeating: 0, count: 16)
        av_md5_final(md5, &digest)
        return digest.map { b in
            let s = String(b, radix: 16)
            return b < 16 ? "0" + s : s
        }.joined()
    }

    /// An audio frame's lines (PROTOCOL.md 4.6): what ffmpeg's framemd5 writes for an audio
    /// stream, whose default codec is pcm_s16le: the samples converted to packed s16 as
    /// ffmpeg converts them (`AudioSampleConverter`), pts and duration in 1/sample_rate.
    private func writeAudio(_ frame: borrowing Frame) throws(MediaOutputError) {
        guard let format = frame.header.audioFormat else { return }
        let converter: AudioSampleConverter
        if let existing = audioConverter { converter = existing } else {
            converter = try AudioSampleConverter(to: .s16)
            audioConverter = converter
            try emit("""
                #format: frame checksums
                #version: 2
                #hash: MD5
                #software: \(Self.libavformatIdent)
                #tb 0: 1/\(format.sampleRate)
                #media_type 0: audio
                #codec_id 0: pcm_s16le
                #sample_rate 0: \(format.sampleRate)
                #channel_layout_name 0: \(AudioSampleConverter.layoutName(format.layout))
                #stream#, dts,        pts, duration,     size, hash

                """)
        }
        let d = frame.header.description
        var pts = d.pts.map { av_rescale_q($0, AVRational(num: d.timeBase.num, den: d.timeBase.den), AVRational(num: 1, den: Int32(format.sampleRate))) } ?? syncPts
        try converter.convert(frame) { bytes, samples throws(MediaOutputError) in
            av_md5_init(md5)
            av_md5_update(md5, bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count)
            try emit("0, \(pad(String(pts), 10)), \(pad(String(pts), 10)), \(pad(String(samples), 8)), "
                     + "\(pad(String(bytes.count), 8)), \(Self.finalHex(md5))\n")
            pts += Int64(samples)
            frames += 1
        }
        syncPts = pts
        try flush()
    }

    /// Writes what is buffered (each `write` does; call it at the end too).
    public func flush() throws(MediaOutputError) {
        let failure: Errno? = buffer.withUnsafeBytes { bytes in
            do throws(Errno) { try writeAll(outputNumber(descriptor), bytes, shouldStop: shouldStop) } catch { return error }
            return nil
        }
        // Interrupted: a stop signal while the reader does not read (signals do not restart calls).
        // The lines are dropped then, or `finish()` would block on that reader again, for good.
        if failure == .interrupted { buffer.removeAll(); throw .interrupted(path) }
        if let failure { throw .io(path, failure) }
        buffer.removeAll(keepingCapacity: true)
    }

    private func emit(_ text: String) throws(MediaOutputError) {
        buffer.append(contentsOf: text.utf8)
        if buffer.count >= 1 << 16 { try flush() }
    }

    private func pad(_ s: String, _ width: Int) -> String {
        s.count >= width ? s : String(repeating: " ", count: width - s.count) + s
    }

    /// 1/`rate`, exactly (`rate_den/rate_num`); nil when the rate is unknown.
    static func rateTimeBase(_ rate: Rational?) -> Rational? {
        guard let rate, rate.num > 0, rate.den > 0 else { return nil }
        return Rational(rate.den, rate.num)
    }

    /// 1/frame rate, from the first frame's duration; the frame's own time base without one.
    static func outputTimeBase(_ d: FrameDescription) -> Rational {
        guard d.duration > 0, d.timeBase.num > 0, d.timeBase.den > 0 else { return d.timeBase }
        var num: Int32 = 0, den: Int32 = 0
        _ = av_reduce(&num, &den, d.duration * Int64(d.timeBase.num), Int64(d.timeBase.den), Int64(Int32.max))
        return Rational(num, den)
    }
}
