import CFFmpeg
import FoundationEssentials
import FrameMedia
import FrameServer

/// One recorded stream as the file's header declares it.
public struct TrackSpec: Sendable {
    /// The stream's name when it was recorded (what replay republishes it as).
    public var name: String
    /// The stream's exact nominal rate, when it had one.
    public var rate: Rational?
    /// The first frame's format (the track's declared size and pixel format).
    public var format: FrameFormat
    /// The first frame's description (the track's declared colour, aspect ratio, fields).
    public var description: FrameDescription
    /// How its frames are stored.
    public var codec: RecordingCodec
    /// The codec's parameters for the stream header (FFV1 level 3), if it has any.
    public var extradata: [UInt8] = []
    /// An audio stream's first frame's format (the track's declared sample format, rate and
    /// layout; stored as PCM, `AudioPCM`); nil for video.
    public var audio: AudioFormat?
    /// The producer that published the stream (its process id while recording): tracks of
    /// one producer share their pts' timeline, and replay keeps their pts' offsets.
    public var clock: Int32?

    public init(name: String, rate: Rational?, format: FrameFormat, description: FrameDescription, codec: RecordingCodec) {
        self.name = name; self.rate = rate; self.format = format; self.description = description; self.codec = codec
    }

    /// The codec the container declares: the requested one, or rawvideo when it cannot hold the first format.
    var containerCodec: RecordingCodec { TrackEncoder.codecTakes(codec, format.pixelFormat) ? codec : .raw }
}

/// Writes a framesrv recording: a NUT file (docs/RECORDING.md) with one video stream per
/// recorded stream, each packet carrying its `FrameRecord`, interleaved in capture order.
/// Packets reach the file as soon as the interleaving allows (flushed each time), so a
/// recorder killed with SIGKILL leaves a file that reads up to its last packet.
/// Thread-safe: each stream's thread writes its own packets.
public final class RecordingWriter: @unchecked Sendable {
    public let path: String
    public let tracks: [TrackSpec]
    private var context: UnsafeMutablePointer<AVFormatContext>?
    private var lastTimestamp: [Int64]
    /// Per track, the capture offset of the last packet marked as a seek point (nil before the first).
    private var lastSeekPoint: [Int64?]
    /// Frames waiting to be written in capture order, per track, and the tracks that ended.
    private var queues: [[EncodedFrame]]
    private var ended: [Bool]
    private let lock = ThreadLock()
    private var finished = false
    /// Frames written, per track.
    public private(set) var frames: [Int]
    private var finalBytes: Int64 = 0

    /// The container's time base for every stream: microseconds of capture time.
    static let timeBase = AVRational(num: 1, den: 1_000_000)

    /// The capture time of the recording's first frame (over every track): offsets count from it.
    public let baseCaptureNanos: UInt64

    /// Where a new file starts (nil: one file, however long), and the files written so far.
    private let segmentBytes: Int64?
    private let series = RecordingSegments.newSeries()
    public private(set) var segmentPaths: [String]
    /// Bytes in the files closed before the current one.
    private var closedBytes: Int64 = 0
    /// The track whose keyframes a new file starts at: the one libavformat seeks by (its
    /// default stream: the first video track, else the first), as RecordingReader finds it.
    private var seekTrack = 0

    /// Creates the file and writes its header. `segmentBytes`: start a new file (segment) at
    /// the first seek point of the seeking track once the current one holds this many bytes.
    public init(path: String, tracks: [TrackSpec], baseCaptureNanos: UInt64, segmentBytes: Int64? = nil) throws(RecordingError) {
        self.path = path
        self.baseCaptureNanos = baseCaptureNanos
        self.tracks = tracks
        self.segmentBytes = segmentBytes
        segmentPaths = [path]
        lastTimestamp = Array(repeating: Int64.min, count: tracks.count)
        lastSeekPoint = Array(repeating: nil, count: tracks.count)
        queues = Array(repeating: [], count: tracks.count)
        ended = Array(repeating: false, count: tracks.count)
        frames = Array(repeating: 0, count: tracks.count)
        av_log_set_level(AV_LOG_FATAL)
        let first = try openFile(path, segment: 0, start: 0)
        context = first
        seekTrack = Int(max(0, av_find_default_stream_index(first)))
    }

    /// The file being written now.
    private var currentPath: String { segmentPaths[segmentPaths.count - 1] }

    /// Creates one file of the recording and writes its header: segment `segment`, whose
    /// first packet is captured at offset `start` (ns).
    private func openFile(_ path: String, segment: Int, start: Int64) throws(RecordingError) -> UnsafeMutablePointer<AVFormatContext> {
        var oc: UnsafeMutablePointer<AVFormatContext>?
        var r = avformat_alloc_output_context2(&oc, nil, "nut", path)
        guard r >= 0, let c = oc else { throw .ffmpeg("avformat_alloc_output_context2", ffmpegMessage(r)) }
        var done = false
        defer { if !done { avio_closep(&c.pointee.pb); avformat_free_context(c) } }
        r = avio_open(&c.pointee.pb, path, AVIO_FLAG_WRITE)
        guard r >= 0 else { throw .cannotWrite(path, ffmpegMessage(r)) }
        c.pointee.flush_packets = 1
        // NUT version 4, the version that carries packet side data (where each frame's record
        // goes): libavformat writes it for 'syncpoints timestamped' at 'strict experimental'.
        c.pointee.strict_std_compliance = -2
        // The newest frame record version the file holds: 2 with an audio track, else 1.
        let version = tracks.contains { $0.audio != nil } ? FrameRecord.audioVersion : FrameRecord.version
        av_dict_set(&c.pointee.metadata, RecordingKeys.recording, "\(version)", 0)
        if segmentBytes != nil {
            av_dict_set(&c.pointee.metadata, RecordingKeys.series, series, 0)
            av_dict_set(&c.pointee.metadata, RecordingKeys.segment, "\(segment)", 0)
            av_dict_set(&c.pointee.metadata, RecordingKeys.segmentStart, "\(start)", 0)
        }
        for t in tracks { try addStream(c, t) }
        var options: OpaquePointer?
        defer { av_dict_free(&options) }
        av_dict_set(&options, "syncpoints", "timestamped", 0)
        r = avformat_write_header(c, &options)
        guard r >= 0 else { throw .cannotWrite(path, ffmpegMessage(r)) }
        avio_flush(c.pointee.pb)
        done = true
        return c
    }

    /// Ends the current file (its index written) and starts the next segment, whose first
    /// packet is captured at `start`. Called with `lock` held.
    private func startSegment(at start: Int64) throws(RecordingError) {
        guard let oc = context else { return }
        let r = av_write_trailer(oc)
        avio_flush(oc.pointee.pb)
        closedBytes += max(0, avio_tell(oc.pointee.pb))
        avio_closep(&oc.pointee.pb)
        avformat_free_context(oc)
        context = nil
        guard r >= 0 else { throw .cannotWrite(currentPath, ffmpegMessage(r)) }
        let next = RecordingSegments.path(path, segment: segmentPaths.count)
        context = try openFile(next, segment: segmentPaths.count, start: start)
        segmentPaths.append(next)
        // Every track's first packet in the new file is a seek point.
        lastSeekPoint = Array(repeating: nil, count: tracks.count)
    }

    /// Whether the frame about to be written starts a new file: the current one is full and
    /// the frame is a keyframe of the seeking track (a seek into the new file lands on it).
    private func startsSegment(_ e: EncodedFrame, track: Int) -> Bool {
        guard let limit = segmentBytes, track == seekTrack, e.key, segmentPaths.count < RecordingSegments.maxCount,
              let pb = context?.pointee.pb else { return false }
        return avio_tell(pb) >= limit
    }

    deinit {
        for q in queues { for e in q { var p = e.packet; av_packet_free(&p) } }
        if let oc = context {
            avio_closep(&oc.pointee.pb)
            avformat_free_context(oc)
        }
    }

    private func addStream(_ oc: UnsafeMutablePointer<AVFormatContext>, _ t: TrackSpec) throws(RecordingError) {
        guard let st = avformat_new_stream(oc, nil) else { throw .ffmpeg("avformat_new_stream", "out of memory") }
        let p = st.pointee.codecpar!
        st.pointee.time_base = Self.timeBase
        av_dict_set(&st.pointee.metadata, RecordingKeys.stream, t.name, 0)
        av_dict_set(&st.pointee.metadata, "title", t.name, 0)
        if let clock = t.clock { av_dict_set(&st.pointee.metadata, RecordingKeys.clock, "\(clock)", 0) }
        if let rate = t.rate {
            st.pointee.avg_frame_rate = AVRational(num: rate.num, den: rate.den)
            st.pointee.r_frame_rate = st.pointee.avg_frame_rate
            av_dict_set(&st.pointee.metadata, RecordingKeys.rate, rate.description, 0)
        }
        if let audio = t.audio { return addAudio(p, audio) }
        let pix = av_get_pix_fmt(t.format.pixelFormat.name)
        p.pointee.codec_type = AVMEDIA_TYPE_VIDEO
        p.pointee.codec_id = t.containerCodec.codecID
        if t.containerCodec == .raw { p.pointee.codec_tag = avcodec_pix_fmt_to_codec_tag(pix) }
        if !t.extradata.isEmpty, let d = av_mallocz(t.extradata.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) {
            t.extradata.withUnsafeBytes { d.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            p.pointee.extradata = d.assumingMemoryBound(to: UInt8.self)
            p.pointee.extradata_size = Int32(t.extradata.count)
        }
        p.pointee.width = Int32(t.format.width)
        p.pointee.height = Int32(t.format.height)
        p.pointee.format = pix.rawValue
        let d = t.description
        p.pointee.color_range = AVColorRange(rawValue: d.color.range)
        p.pointee.color_space = AVColorSpace(rawValue: d.color.matrix)
        p.pointee.color_primaries = AVColorPrimaries(rawValue: d.color.primaries)
        p.pointee.color_trc = AVColorTransferCharacteristic(rawValue: d.color.transfer)
        p.pointee.chroma_location = AVChromaLocation(rawValue: d.chromaLocation.rawValue)
        if d.sampleAspectRatio.num > 0 { p.pointee.sample_aspect_ratio = AVRational(num: d.sampleAspectRatio.num, den: d.sampleAspectRatio.den) }
    }

    /// An audio track's parameters: PCM of the first frame's packed sample format, its rate and layout.
    private func addAudio(_ p: UnsafeMutablePointer<AVCodecParameters>, _ a: AudioFormat) {
        let id = AudioPCM.codecID(a.sampleFormat)
        p.pointee.codec_type = AVMEDIA_TYPE_AUDIO
        p.pointee.codec_id = id
        p.pointee.format = av_get_packed_sample_fmt(av_get_sample_fmt(a.sampleFormat.name)).rawValue
        p.pointee.sample_rate = Int32(a.sampleRate)
        p.pointee.bits_per_coded_sample = av_get_bits_per_sample(id)
        p.pointee.block_align = Int32(a.channels * a.sampleFormat.bytesPerSample)
        if a.layout.isNative {
            av_channel_layout_from_mask(&p.pointee.ch_layout, a.layout.mask)
        } else {
            p.pointee.ch_layout.order = AV_CHANNEL_ORDER_UNSPEC   // the exact order is in each frame record
            p.pointee.ch_layout.nb_channels = Int32(a.channels)
        }
    }

    /// Queues one encoded frame of track `track` and writes, in capture order across tracks,
    /// every queued frame that no other track can still precede (see `maxHoldNanos`).
    func write(_ e: EncodedFrame, track: Int) throws(RecordingError) {
        lock.lock()
        defer { lock.unlock() }
        queues[track].append(e)
        try writeReady(all: false)
    }

    /// Says that track `track` has no more frames (it no longer holds the others back).
    func endTrack(_ track: Int) throws(RecordingError) {
        lock.lock()
        defer { lock.unlock() }
        ended[track] = true
        try writeReady(all: false)
    }

    /// How far (capture time) the newest queued frame may be ahead of the oldest before the
    /// oldest is written even though a track has nothing queued (a slow or stalled stream does
    /// not hold the others back for longer; a SIGKILL loses at most this much).
    static let maxHoldNanos: UInt64 = 1_000_000_000

    /// Writes queued frames in capture order while every track has one queued (or has ended),
    /// or the oldest is `maxHoldNanos` behind the newest; `all`: everything. Called with `lock` held.
    private func writeReady(all: Bool) throws(RecordingError) {
        while let t = queues.indices.filter({ !queues[$0].isEmpty }).min(by: { queues[$0][0].captureNanos < queues[$1][0].captureNanos }) {
            let oldest = queues[t][0].captureNanos
            let newest = queues.compactMap { $0.last?.captureNanos }.max() ?? oldest
            let everyTrack = queues.indices.allSatisfy { !queues[$0].isEmpty || ended[$0] }
            guard all || everyTrack || newest &- oldest > Self.maxHoldNanos else { return }
            try writeNow(queues[t].removeFirst(), track: t)
        }
    }

    /// Writes one frame, its record as side data, and flushes it to the file. Called with `lock` held.
    private func writeNow(_ e: EncodedFrame, track: Int) throws(RecordingError) {
        var packet = e.packet
        defer { av_packet_free(&packet) }
        guard let p = packet, !finished, context != nil else { return }
        var record = e.record
        record.captureOffsetNanos = Int64(bitPattern: e.captureNanos &- baseCaptureNanos)
        if startsSegment(e, track: track) { try startSegment(at: record.captureOffsetNanos) }
        guard let oc = context else { return }
        let bytes = record.bytes
        guard let side = av_packet_new_side_data(p, AV_PKT_DATA_MATROSKA_BLOCKADDITIONAL, 8 + bytes.count) else {
            throw .ffmpeg("av_packet_new_side_data", "out of memory")
        }
        for i in 0..<8 { side[i] = i == 7 ? 1 : 0 }   // BlockAddID 1, big-endian
        for (i, b) in bytes.enumerated() { side[8 + i] = b }
        if e.key && isSeekPoint(record.captureOffsetNanos, track: track) {
            p.pointee.flags |= AV_PKT_FLAG_KEY
        } else {
            p.pointee.flags &= ~AV_PKT_FLAG_KEY   // (the encoder marks every FFV1 packet)
        }
        p.pointee.stream_index = Int32(track)
        p.pointee.duration = 0
        // Strictly increasing per stream (NUT's rule), in the stream's time base: capture
        // microseconds (the muxer gives an audio stream 1/sample_rate instead).
        let at = av_rescale_q(record.captureOffsetNanos / 1000, Self.timeBase, oc.pointee.streams[track]!.pointee.time_base)
        let ts = max(at, lastTimestamp[track] == Int64.min ? at : lastTimestamp[track] + 1)
        lastTimestamp[track] = ts
        p.pointee.pts = ts
        p.pointee.dts = ts
        let r = av_write_frame(oc, p)
        guard r >= 0 else { throw .cannotWrite(currentPath, ffmpegMessage(r)) }
        avio_flush(oc.pointee.pb)
        frames[track] += 1
    }

    /// The least capture time between two packets of a track marked as seek points (NUT
    /// keyframes) where every packet could be one (raw, FFV1, PCM: each decodes alone).
    /// libavformat's muxer keeps an index entry in memory for every keyframe it writes (about
    /// 30 bytes, never freed while the file is open): one a second bounds that to about 100 KB
    /// a day per track, where one a frame grew 33 MB per million frames. Seeking lands on the
    /// seek point before the target and the frames between are read and dropped undecoded.
    static let seekPointNanos: Int64 = 1_000_000_000

    /// Whether a keyframe of `track` captured at `offset` is marked as a seek point: the first,
    /// then one `seekPointNanos` after the last (H.264's keyframes are rare and all kept: a GOP
    /// is at most a few seconds). Called with `lock` held.
    private func isSeekPoint(_ offset: Int64, track: Int) -> Bool {
        let everyFrameKey = switch tracks[track].containerCodec {
        case .ffv1, .raw: true
        case .h264, .h264Bitrate: tracks[track].audio != nil
        }
        // (A capture clock that went back starts the count again, rather than waiting to pass the old point.)
        if everyFrameKey, let last = lastSeekPoint[track], offset >= last, offset &- last < Self.seekPointNanos { return false }
        lastSeekPoint[track] = offset
        return true
    }

    /// Writes the trailer (NUT's index) and closes the (last) file.
    public func finish() throws(RecordingError) {
        lock.lock()
        defer { lock.unlock() }
        guard !finished, context != nil else { return }
        try writeReady(all: true)   // (may start a new file)
        finished = true
        guard let oc = context else { return }
        let r = av_write_trailer(oc)
        avio_flush(oc.pointee.pb)
        finalBytes = closedBytes + max(0, avio_tell(oc.pointee.pb))
        avio_closep(&oc.pointee.pb)
        guard r >= 0 else { throw .cannotWrite(currentPath, ffmpegMessage(r)) }
    }

    /// Bytes in the recording's files so far.
    public var bytesWritten: Int64 {
        lock.lock()
        defer { lock.unlock() }
        guard !finished, let pb = context?.pointee.pb else { return finalBytes }
        return closedBytes + max(0, avio_tell(pb))
    }
}

/// The metadata keys a recording's header carries (docs/RECORDING.md).
enum RecordingKeys {
    /// Container: the frame record version; its presence marks a framesrv recording.
    static let recording = "framesrv_recording"
    /// Stream: the recorded stream's name.
    static let stream = "framesrv_stream"
    /// Stream: its exact nominal rate, num/den.
    static let rate = "framesrv_rate"
    /// Stream: its producer (tracks of one producer share a pts timeline).
    static let clock = "framesrv_clock"
    /// Container, in a recording of several files: the id the files share, the file's number
    /// (0 for the first), and the capture offset (ns) of its first packet.
    static let series = "framesrv_series"
    static let segment = "framesrv_segment"
    static let segmentStart = "framesrv_segment_start"
}
