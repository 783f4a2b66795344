import CFFmpeg
import FrameMedia
import FrameServer
import Glibc

/// How `framesrv record` stores frames.
public enum RecordingCodec: Sendable, Equatable {
    /// FFV1 (lossless, every frame a keyframe); formats FFV1 cannot hold go raw.
    case ffv1
    /// The planes as they are (ffmpeg's rawvideo).
    case raw
    /// libx264 at constant quality `crf` (lossy; small files).
    case h264(crf: Double)
    /// libx264 at an average bit rate (bits/s, ffmpeg's `-b:v`), capped by a VBV of one
    /// second (`-maxrate` = `-bufsize` = the rate): for a link of about that rate.
    case h264Bitrate(Int)

    var codecID: AVCodecID {
        switch self {
        case .ffv1: AV_CODEC_ID_FFV1
        case .raw: AV_CODEC_ID_RAWVIDEO
        case .h264, .h264Bitrate: AV_CODEC_ID_H264
        }
    }

    /// H.264 (constant quality or bit rate).
    public var isH264: Bool { codecID == AV_CODEC_ID_H264 }

    public var name: String {
        switch self {
        case .ffv1: "ffv1"
        case .raw: "raw"
        case .h264(let crf): "h264 (crf \(crf))"
        case .h264Bitrate(let rate): "h264 (\(rate) bit/s)"
        }
    }
}

func ffmpegMessage(_ code: Int32) -> String {
    var buf = [CChar](repeating: 0, count: 256)
    av_strerror(code, &buf, buf.count)
    return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// An encoded frame ready for the muxer: the packet (owned) and its record.
struct EncodedFrame: @unchecked Sendable {
    var packet: UnsafeMutablePointer<AVPacket>?
    /// Its record (the capture offset is set by the writer, from `captureNanos`).
    var record: FrameRecord
    let key: Bool
    /// The frame's capture time (CLOCK_MONOTONIC ns, as the producer stamped it).
    var captureNanos: UInt64 { record.description.captureNanos }
}

/// One track's encoder: turns frames (in their slots) into packets, reopening itself when
/// the size or pixel format changes (FFV1 at level 1 and H.264 in-band carry their
/// parameters in every keyframe). Used from one thread.
final class TrackEncoder {
    let codec: RecordingCodec
    private var context: UnsafeMutablePointer<AVCodecContext>?
    private var format: FrameFormat?
    private var frame: UnsafeMutablePointer<AVFrame>? = av_frame_alloc()
    /// Records of the frames sent to the encoder, in order (no B-frames: packets come out in order).
    private var pending: [FrameRecord] = []
    /// Frames that went raw because the codec does not hold them.
    private(set) var rawFallbacks = 0
    /// Whether the track is raw in the container (decided by its first frame: when the codec
    /// cannot hold it, every frame of the track goes raw, so ffmpeg reads them all).
    private(set) var containerRaw: Bool?

    /// The stream's nominal rate (H.264's rate control and level; the pts given are frame counts).
    var rate: Rational?

    init(codec: RecordingCodec) {
        self.codec = codec
        av_log_set_level(AV_LOG_FATAL)   // failures are reported as one error line by the caller
    }

    deinit {
        avcodec_free_context(&context)
        av_frame_free(&frame)
    }

    /// Whether this track's codec stores `format` itself (else its frames are stored raw).
    static func codecTakes(_ codec: RecordingCodec, _ format: PixelFormat) -> Bool {
        guard codec != .raw, let enc = encoder(codec) else { return false }
        let av = av_get_pix_fmt(format.name)
        guard var p = enc.pointee.pix_fmts else { return true }
        while p.pointee != AV_PIX_FMT_NONE {
            if p.pointee == av { return true }
            p += 1
        }
        return false
    }

    /// Whether FFV1 holds this frame bit for bit: 10-bit formats keep 10 bits of each 16-bit
    /// sample, so a frame with higher bits set (not valid 10-bit video) goes raw instead.
    static func fitsCodec(_ codec: RecordingCodec, _ frame: borrowing Frame, _ format: FrameFormat) -> Bool {
        guard codec == .ffv1, [.yuv420p10le, .yuv422p10le, .yuv444p10le].contains(format.pixelFormat) else { return true }
        var high: UInt16 = 0
        for i in format.pixelFormat.planes.indices {
            let plane = frame.plane(i), stride = frame.header.stride(plane: i), samples = format.rowBytes(plane: i) / 2
            for y in 0..<format.rows(plane: i) {
                let row = UnsafeRawBufferPointer(rebasing: plane[(y * stride)..<(y * stride + samples * 2)])
                for x in 0..<samples { high |= row.loadUnaligned(fromByteOffset: x * 2, as: UInt16.self) }
            }
        }
        return UInt16(littleEndian: high) < 1024
    }

    static func encoder(_ codec: RecordingCodec) -> UnsafePointer<AVCodec>? {
        if codec.isH264 { return avcodec_find_encoder_by_name("libx264") ?? avcodec_find_encoder(AV_CODEC_ID_H264) }
        return avcodec_find_encoder(codec.codecID)
    }

    /// Encodes `frame`; returns the packets ready (zero or more, in order).
    func encode(_ frame: borrowing Frame, record: FrameRecord) throws(RecordingError) -> [EncodedFrame] {
        if let audio = record.audio {   // sound: PCM, whatever the video codec (docs/RECORDING.md)
            var r = record
            r.packing = .raw
            return [EncodedFrame(packet: try AudioPCM.pack(frame, audio), record: r, key: true)]
        }
        let stored = Self.codecTakes(codec, record.format.pixelFormat) && Self.fitsCodec(codec, frame, record.format)
        if containerRaw == nil { containerRaw = !stored }
        guard stored, containerRaw == false else {
            if codec != .raw { rawFallbacks += 1 }
            var r = record
            r.packing = .raw
            return try [EncodedFrame(packet: Self.packRaw(frame, r.format), record: r, key: true)]
        }
        var out: [EncodedFrame] = []
        if format != record.format { out = try reopen(record.format, record.description) }
        guard let c = context, let f = self.frame else { return out }
        fill(f, frame, record)
        pending.append(record)
        let r = avcodec_send_frame(c, f)
        guard r >= 0 else { throw .ffmpeg("avcodec_send_frame", ffmpegMessage(r)) }
        return try out + drain()
    }

    /// The encoder's extradata (FFV1 level 3's parameters), for the stream header.
    var extradata: [UInt8] {
        guard let c = context, let d = c.pointee.extradata, c.pointee.extradata_size > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: d, count: Int(c.pointee.extradata_size)))
    }
    /// The encoder was reopened for a new format: its packets carry its extradata (every one,
    /// so that a reader that seeks past the change has it).
    private var newExtradata = false

    /// Drains the encoder at the end: the packets still inside it.
    func flush() throws(RecordingError) -> [EncodedFrame] {
        guard let c = context else { return [] }
        _ = avcodec_send_frame(c, nil)
        return try drain()
    }

    private func drain() throws(RecordingError) -> [EncodedFrame] {
        guard let c = context else { return [] }
        var out: [EncodedFrame] = []
        while true {
            guard let p = av_packet_alloc() else { throw .ffmpeg("av_packet_alloc", "out of memory") }
            let r = avcodec_receive_packet(c, p)
            if r < 0 {
                var q: UnsafeMutablePointer<AVPacket>? = p
                av_packet_free(&q)
                if r == cffmpeg_eagain() || r == cffmpeg_eof() { return out }
                throw .ffmpeg("avcodec_receive_packet", ffmpegMessage(r))
            }
            guard !pending.isEmpty else { continue }
            if newExtradata, !extradata.isEmpty, let side = av_packet_new_side_data(p, AV_PKT_DATA_NEW_EXTRADATA, extradata.count) {
                for (i, b) in extradata.enumerated() { side[i] = b }
            }
            out.append(EncodedFrame(packet: p, record: pending.removeFirst(), key: p.pointee.flags & AV_PKT_FLAG_KEY != 0))
        }
    }

    /// Points the AVFrame at the slot's planes (libavcodec copies what it keeps).
    private func fill(_ f: UnsafeMutablePointer<AVFrame>, _ frame: borrowing Frame, _ record: FrameRecord) {
        let fmt = record.format
        f.pointee.width = Int32(fmt.width)
        f.pointee.height = Int32(fmt.height)
        f.pointee.format = av_get_pix_fmt(fmt.pixelFormat.name).rawValue
        withUnsafeMutableBytes(of: &f.pointee.data) { d in
            withUnsafeMutableBytes(of: &f.pointee.linesize) { l in
                let data = d.bindMemory(to: UnsafeMutablePointer<UInt8>?.self), lines = l.bindMemory(to: Int32.self)
                for i in fmt.pixelFormat.planes.indices {
                    data[i] = UnsafeMutablePointer(mutating: frame.plane(i).baseAddress!.assumingMemoryBound(to: UInt8.self))
                    lines[i] = Int32(frame.header.stride(plane: i))
                }
            }
        }
        cffmpeg_frame_use_data(f)
        f.pointee.pts = Int64(sentFrames)
        sentFrames += 1
        f.pointee.pict_type = AV_PICTURE_TYPE_NONE
    }
    private var sentFrames = 0

    /// Opens the encoder for `format` (again, after a size or format change); returns the
    /// packets the previous encoder still held (H.264's lookahead).
    private func reopen(_ format: FrameFormat, _ d: FrameDescription) throws(RecordingError) -> [EncodedFrame] {
        let held = try flush()
        avcodec_free_context(&context)
        pending.removeAll()
        guard let enc = Self.encoder(codec), let c = avcodec_alloc_context3(enc) else {
            throw .ffmpeg("avcodec_find_encoder", "no \(codec.name) encoder in this FFmpeg")
        }
        context = c
        c.pointee.width = Int32(format.width)
        c.pointee.height = Int32(format.height)
        c.pointee.pix_fmt = av_get_pix_fmt(format.pixelFormat.name)
        let rate = self.rate.flatMap { $0.num > 0 && $0.den > 0 ? $0 : nil } ?? Rational(30, 1)
        c.pointee.time_base = AVRational(num: rate.den, den: rate.num)
        c.pointee.framerate = AVRational(num: rate.num, den: rate.den)
        c.pointee.color_range = AVColorRange(rawValue: d.color.range)
        c.pointee.colorspace = AVColorSpace(rawValue: d.color.matrix)
        c.pointee.color_primaries = AVColorPrimaries(rawValue: d.color.primaries)
        c.pointee.color_trc = AVColorTransferCharacteristic(rawValue: d.color.transfer)
        c.pointee.max_b_frames = 0
        configure(c)
        let r = avcodec_open2(c, enc, nil)
        guard r >= 0 else { throw .ffmpeg("avcodec_open2 (\(codec.name), \(format))", ffmpegMessage(r)) }
        newExtradata = self.format != nil
        self.format = format
        return held
    }

    private func configure(_ c: UnsafeMutablePointer<AVCodecContext>) {
        switch codec {
        case .ffv1:
            // Level 3, every frame a keyframe (each packet decodes alone: seek, truncation),
            // slices encoded on every core, each with a CRC (damage is detected, not shown).
            // Its parameters are in the extradata (the stream header; after a size or
            // format change, new extradata in the first packet's side data).
            c.pointee.gop_size = 1
            c.pointee.level = 3
            c.pointee.thread_count = 0
            c.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER)
            if let priv = c.pointee.priv_data {
                av_opt_set(priv, "slices", "16", 0)
                av_opt_set(priv, "slicecrc", "1", 0)
            }
        case .h264(let crf):
            c.pointee.thread_count = 0
            c.pointee.gop_size = 50
            if let priv = c.pointee.priv_data {
                av_opt_set(priv, "crf", "\(crf)", 0)
                av_opt_set(priv, "preset", "veryfast", 0)
            }
        case .h264Bitrate(let rate):
            c.pointee.thread_count = 0
            c.pointee.gop_size = 50
            c.pointee.bit_rate = Int64(rate)
            c.pointee.rc_max_rate = Int64(rate)
            c.pointee.rc_buffer_size = Int32(clamping: rate)
            if let priv = c.pointee.priv_data { av_opt_set(priv, "preset", "veryfast", 0) }
        case .raw:
            break
        }
    }

    /// The frame's planes tightly packed (ffmpeg's rawvideo layout), in a new packet.
    static func packRaw(_ frame: borrowing Frame, _ format: FrameFormat) throws(RecordingError) -> UnsafeMutablePointer<AVPacket> {
        let planes = format.pixelFormat.planes.indices
        let size = planes.reduce(0) { $0 + format.rowBytes(plane: $1) * format.rows(plane: $1) }
        guard let p = av_packet_alloc() else { throw .ffmpeg("av_packet_alloc", "out of memory") }
        guard av_new_packet(p, Int32(size)) >= 0 else {
            var q: UnsafeMutablePointer<AVPacket>? = p
            av_packet_free(&q)
            throw .ffmpeg("av_new_packet", "out of memory")
        }
        var at = p.pointee.data!
        for i in planes {
            let src = frame.plane(i).baseAddress!, stride = frame.header.stride(plane: i), row = format.rowBytes(plane: i)
            for y in 0..<format.rows(plane: i) {
                memcpy(at, src + y * stride, row)
                at += row
            }
        }
        p.pointee.flags |= AV_PKT_FLAG_KEY
        return p
    }
}
