import CFFmpeg
import FrameMedia
import FrameServer
import Glibc

/// A recorded stream as the file declares it.
public struct RecordedTrack: Sendable {
    public var name: String
    public var rate: Rational?
    /// Video, or audio (a PCM track whose frame records are audio records).
    public var media: MediaKind = .video
    /// Its producer when recorded (tracks of one producer share a pts timeline), if known.
    public var clock: String?
}

/// One frame read back: its record and its pixels (decoded, or the raw packet).
public final class ReadFrame {
    public let track: Int
    public let record: FrameRecord
    private var frame: UnsafeMutablePointer<AVFrame>?
    private var packet: UnsafeMutablePointer<AVPacket>?

    init(track: Int, record: FrameRecord, frame: UnsafeMutablePointer<AVFrame>) {
        self.track = track; self.record = record; self.frame = frame
    }

    init(track: Int, record: FrameRecord, packet: UnsafeMutablePointer<AVPacket>) {
        self.track = track; self.record = record; self.packet = packet
    }

    deinit {
        av_frame_free(&frame)
        av_packet_free(&packet)
    }

    /// Copies an audio frame's samples into `slot` (reserved with `record.audio`).
    public func copy(into slot: borrowing WritableAudioFrame) {
        guard let data = packet?.pointee.data else { return }
        AudioPCM.unpack(data, into: slot)
    }

    /// Copies the pixels, row by row, into `slot` (reserved with `record.format`).
    public func copy(into slot: borrowing WritableFrame) {
        let format = record.format
        var raw = packet?.pointee.data.map { UnsafePointer($0) }
        let lines: [(UnsafePointer<UInt8>?, Int)] = frame.map { f in
            withUnsafeBytes(of: f.pointee.data) { d in
                withUnsafeBytes(of: f.pointee.linesize) { l in
                    let data = d.bindMemory(to: UnsafeMutablePointer<UInt8>?.self), ls = l.bindMemory(to: Int32.self)
                    return format.pixelFormat.planes.indices.map { (data[$0].map { UnsafePointer($0) }, Int(ls[$0])) }
                }
            }
        } ?? []
        for i in format.pixelFormat.planes.indices {
            let dst = slot.plane(i).baseAddress!, stride = format.stride(plane: i), row = format.rowBytes(plane: i)
            for y in 0..<format.rows(plane: i) {
                if let src = raw {
                    memcpy(dst + y * stride, src, row)
                    raw = src + row
                } else if i < lines.count, let src = lines[i].0 {
                    memcpy(dst + y * stride, src + y * lines[i].1, row)
                }
            }
        }
    }
}

/// Reads a framesrv recording (docs/RECORDING.md) frame by frame, in file order: each
/// packet's record, its pixels decoded (FFV1, H.264) or unpacked (raw). A truncated or
/// damaged file reads up to where it can; what was skipped is counted. A recording of several
/// files (`RecordingSegments`) reads as one, from the first file's path.
public final class RecordingReader {
    public let path: String
    /// The recording's files: `path`, then the segments that follow it.
    let segments: [RecordingSegments.Segment]
    /// Why the recording was taken to end before a file named as its next part (one that is
    /// another recording's or damaged, or missing with later ones there); nil when none.
    public let segmentsStop: String?
    /// The recording's files that end without NUT's index: cut, or the recorder was killed
    /// while writing them (a finished recording has none).
    public let cutFiles: [String]
    /// The file being read (an index into `segments`).
    private var current = 0
    public let tracks: [RecordedTrack]
    /// Packets without a valid frame record (damaged, or not written by framesrv).
    public private(set) var skippedPackets = 0
    /// Frames whose pixels did not decode, or decoded to another format or size than recorded.
    public private(set) var decodeErrors = 0
    /// Why reading stopped before the end of the recording (a truncated or damaged last file,
    /// a later file that cannot be opened), naming the file, if it did.
    public private(set) var readError: FileReadError?
    /// Files before the last that stopped being readable before their end (cut or damaged);
    /// reading went on with the next file.
    public private(set) var fileErrors: [FileReadError] = []
    private var context: UnsafeMutablePointer<AVFormatContext>?
    private var decoders: [TrackDecoder]
    private var ready: [ReadFrame] = []
    private var draining = false
    private var packet = av_packet_alloc()
    /// Whether each track is audio (its packets must carry audio records, the others video ones).
    private let audioTracks: [Bool]
    /// The capture offset of the first packet of the track libavformat seeks by (its default
    /// stream, the first video track): a seek to before it starts from the first packet.
    private var firstSeekOffset: Int64 = 0

    public init(path: String) throws(RecordingError) {
        self.path = path
        av_log_set_level(AV_LOG_FATAL)
        var ic: UnsafeMutablePointer<AVFormatContext>?
        var r = avformat_open_input(&ic, path, nil, nil)
        guard r >= 0, let ic else { throw .cannotRead(path, ffmpegMessage(r)) }
        context = ic
        guard av_dict_get(ic.pointee.metadata, RecordingKeys.recording, nil, 0) != nil else {
            avformat_close_input(&context)
            throw .cannotRead(path, "not a framesrv recording (no '\(RecordingKeys.recording)' tag; record it with 'framesrv record')")
        }
        // Before anything decodes: every track is a stream of its own, and each decoder its threads.
        let count = Int(ic.pointee.nb_streams)
        guard count <= Self.maxTracks else {
            avformat_close_input(&context)
            throw .cannotRead(path, "it has \(count) tracks, and a replay publishes at most \(Self.maxTracks) streams")
        }
        r = avformat_find_stream_info(ic, nil)
        let (tracks, decoders) = Self.tracks(of: ic)
        self.audioTracks = tracks.map { $0.media == .audio }
        if let twice = Self.firstRepeatedName(tracks.map(\.name)) {
            avformat_close_input(&context)
            throw .cannotRead(path, "two of its tracks are named '\(twice)', and a stream name can be published only once")
        }
        self.tracks = tracks
        self.decoders = decoders
        let followers = Self.tag(ic.pointee.metadata, RecordingKeys.series).map {
            RecordingSegments.followers(of: path, series: $0, names: tracks.map(\.name))
        }
        segments = [RecordingSegments.Segment(path: path, start: .min)] + (followers?.found ?? [])
        segmentsStop = followers?.stop
        cutFiles = segments.map(\.path).filter { !Self.endsWithIndex($0) }
        let seekTrack = Int(av_find_default_stream_index(ic))
        self.seekTrack = seekTrack
        dependentTracks = decoders.indices.filter { $0 != seekTrack && decoders[$0].codecID == AV_CODEC_ID_H264 }
    }

    /// The track libavformat seeks by (its default stream: the first video track, else the
    /// first; RecordingWriter starts each later file at one of its keyframes).
    private let seekTrack: Int
    /// The tracks besides the seeking one whose frames depend on earlier frames (H.264): a seek
    /// starts at their last keyframe before the target (`seek(toOffsetNanos:)`).
    private let dependentTracks: [Int]

    /// The most tracks a recording may have to be replayed: one producer each, and the
    /// decoders share the machine's cores between them (`TrackDecoder.threads`).
    public static let maxTracks = 64

    /// Each stream's name, rate and decoder.
    private static func tracks(of ic: UnsafeMutablePointer<AVFormatContext>) -> ([RecordedTrack], [TrackDecoder]) {
        var tracks: [RecordedTrack] = []
        var decoders: [TrackDecoder] = []
        let count = Int(ic.pointee.nb_streams)
        for i in 0..<count {
            let st = ic.pointee.streams[i]!
            let name = tag(st.pointee.metadata, RecordingKeys.stream) ?? "stream\(i)"
            let rate = tag(st.pointee.metadata, RecordingKeys.rate).flatMap(rational)
            let par = st.pointee.codecpar.pointee
            tracks.append(RecordedTrack(name: name, rate: rate, media: par.codec_type == AVMEDIA_TYPE_AUDIO ? .audio : .video,
                                        clock: tag(st.pointee.metadata, RecordingKeys.clock)))
            let extradata = par.extradata.map { Array(UnsafeBufferPointer(start: $0, count: Int(par.extradata_size))) } ?? []
            decoders.append(TrackDecoder(codecID: par.codec_id, extradata: extradata, threads: TrackDecoder.threads(sharing: count)))
        }
        return (tracks, decoders)
    }

    static func firstRepeatedName(_ names: [String]) -> String? {
        var seen = Set<String>()
        return names.first { !seen.insert($0).inserted }
    }

    /// Whether a file ends with NUT's index, as a recording that finished does (one killed or
    /// truncated does not): the last 12 bytes hold the index's distance from the end.
    static func endsWithIndex(_ path: String) -> Bool {
        guard let f = fopen(path, "rb") else { return false }
        defer { fclose(f) }
        func u64(at offset: Int) -> UInt64? {
            var b = [UInt8](repeating: 0, count: 8)
            guard fseeko(f, off_t(offset), SEEK_SET) == 0, fread(&b, 1, 8, f) == 8 else { return nil }
            return b.reduce(0) { $0 << 8 | UInt64($1) }
        }
        guard fseeko(f, 0, SEEK_END) == 0 else { return false }
        let size = Int(ftello(f))
        guard size > 12, let distance = u64(at: size - 12), distance > 12, distance <= UInt64(size) else { return false }
        return u64(at: size - Int(distance)) == 0x4E58_DD67_2F23_E64E   // INDEX_STARTCODE ('N' 'X' ...)
    }

    deinit {
        avformat_close_input(&context)
        av_packet_free(&packet)
    }

    static func tag(_ dict: OpaquePointer?, _ key: String) -> String? {
        av_dict_get(dict, key, nil, 0).map { String(cString: $0.pointee.value) }
    }

    static func rational(_ text: String) -> Rational? {
        let parts = text.split(separator: "/")
        guard parts.count == 2, let n = Int32(parts[0]), let d = Int32(parts[1]), n > 0, d > 0 else { return nil }
        return Rational(n, d)
    }

    /// The next frame in file order; nil at the end (or where the file stops being readable).
    public func next() -> ReadFrame? {
        while ready.isEmpty {
            guard !draining else { return nil }
            readPacket()
        }
        return ready.removeFirst()
    }

    /// The recording on the media timeline: reads every packet's frame record once, from the
    /// start, without decoding, then goes back to the start. A file that stops being readable
    /// gives the timeline of what came before.
    public func mediaTimeline() -> MediaTimeline {
        let timeline = MediaTimeline(clocks: tracks.map(\.clock)) { body in
            guard seek(toOffsetNanos: 0), let p = packet else { return }   // seek first: it may open the file again
            var seekTrackSeen = false
            while readFrame(p) >= 0 {
                let track = Int(p.pointee.stream_index)
                if let record = record(of: p, track: track) {
                    body(track, record)
                    if track == seekTrack, !seekTrackSeen { seekTrackSeen = true; firstSeekOffset = record.captureOffsetNanos }
                }
                av_packet_unref(p)
            }
        }
        _ = rewind()
        return timeline
    }

    /// Starts again from the first frame (for --loop); false when the file cannot seek.
    public func rewind() -> Bool { seek(toOffsetNanos: 0) }

    /// Frames captured before this offset (ns) are dropped without being decoded where
    /// their codec allows it (raw and FFV1: every frame a keyframe); H.264 frames are
    /// decoded (later frames need them) and the caller drops them.
    public var skipBefore: Int64 = 0

    /// Goes to where every track can be decoded from capture offset `nanos` on, in the file
    /// that holds it (or before), or to the start; false when the file cannot seek. The frames
    /// before `nanos` still come out (see `skipBefore`).
    public func seek(toOffsetNanos nanos: Int64) -> Bool {
        // libavformat goes back to a keyframe of the seeking track (its default stream); another
        // H.264 track's last keyframe may lie further back (a sparse track, or one whose file
        // began after it: RecordingWriter.startsSegment): the seek starts there then. Before the
        // seeking track's first keyframe libavformat lands on that keyframe, past the other
        // tracks' earlier packets (a movie's first audio frames): the file is opened again then.
        var (s, from) = (nanos <= firstSeekOffset ? 0 : segments.lastIndex { $0.start <= nanos } ?? 0, nanos)
        if let k = earliestKeyframe(atOrBefore: nanos, searchingBackFrom: s), (k.file, k.at) < (s, from) { (s, from) = k }
        let fromStart = s == 0 ? from <= firstSeekOffset : from <= segments[s].start
        let ts = from / 1000   // the container's timeline: microseconds of capture time
        guard fromStart ? open(segment: s) : (s == current || open(segment: s)) && (seekWithin(ts) || open(segment: s)) else {
            return false
        }
        for d in decoders { d.reset() }
        ready.removeAll()
        draining = false
        return true
    }

    /// The earliest of the dependent tracks' last keyframes at or before capture offset
    /// `nanos`, from the files' indexes, in file `s` or the ones before (a file cut before its
    /// index lists none: the search goes on before it), each file opened once: (file, capture
    /// offset). nil when none lists one: the seek then trusts libavformat's.
    private func earliestKeyframe(atOrBefore nanos: Int64, searchingBackFrom s: Int) -> (file: Int, at: Int64)? {
        let ns = AVRational(num: 1, den: 1_000_000_000)
        var pending = dependentTracks, earliest: (file: Int, at: Int64)?
        for f in stride(from: s, through: 0, by: -1) where !pending.isEmpty {
            var ic: UnsafeMutablePointer<AVFormatContext>?
            guard avformat_open_input(&ic, segments[f].path, nil, nil) >= 0, let c = ic else { break }
            defer { avformat_close_input(&ic) }
            pending.removeAll { t in
                guard t < Int(c.pointee.nb_streams), let st = c.pointee.streams[t], avformat_index_get_entries_count(st) > 0,
                      let e = avformat_index_get_entry_from_timestamp(st, av_rescale_q(nanos, ns, st.pointee.time_base), AVSEEK_FLAG_BACKWARD)
                else { return false }   // none in this file: the file before may hold it
                let k = (file: f, at: av_rescale_q(e.pointee.timestamp, st.pointee.time_base, ns))
                if earliest.map({ k < $0 }) ?? true { earliest = k }
                return true
            }
        }
        return earliest
    }

    private func seekWithin(_ ts: Int64) -> Bool {
        guard let ic = context else { return false }
        return avformat_seek_file(ic, -1, Int64.min, ts, ts, 0) >= 0
    }

    /// Opens file `segment` of the recording at its first packet; false when it cannot be.
    private func open(segment: Int) -> Bool {
        avformat_close_input(&context)
        var ic: UnsafeMutablePointer<AVFormatContext>?
        guard avformat_open_input(&ic, segments[segment].path, nil, nil) >= 0, let ic, Int(ic.pointee.nb_streams) == tracks.count else {
            avformat_close_input(&ic)
            return false
        }
        context = ic
        current = segment
        return true
    }

    /// The next packet of the recording, going on into the next file at the end of one:
    /// av_read_frame's result.
    /// A file that stops being readable (cut, damaged) ends there, and reading goes on with
    /// the next (said in `fileErrors`); in the last file it ends the recording (`readError`).
    private func readFrame(_ p: UnsafeMutablePointer<AVPacket>) -> Int32 {
        while let ic = context {
            let r = av_read_frame(ic, p)
            guard r < 0 else { return r }
            guard current + 1 < segments.count else {
                if r != cffmpeg_eof() { readError = FileReadError(path: segments[current].path, reason: ffmpegMessage(r)) }
                return r
            }
            if r != cffmpeg_eof() {   // (once each: the timeline's pass and every --loop pass read it again)
                let why = FileReadError(path: segments[current].path, reason: ffmpegMessage(r))
                if !fileErrors.contains(why) { fileErrors.append(why) }
            }
            guard open(segment: current + 1) else {
                readError = FileReadError(path: segments[current + 1].path, reason: "it cannot be opened")
                return cffmpeg_eof()
            }
        }
        return cffmpeg_eof()
    }

    private func readPacket() {
        guard let p = packet else { draining = true; return }
        let r = readFrame(p)
        if r < 0 {
            draining = true
            for (i, d) in decoders.enumerated() { ready += d.drain(track: i, errors: &decodeErrors) }
            return
        }
        defer { av_packet_unref(p) }
        let track = Int(p.pointee.stream_index)
        guard p.pointee.flags & AV_PKT_FLAG_CORRUPT == 0, let record = record(of: p, track: track) else {
            skippedPackets += 1
            return
        }
        if record.audio != nil {   // PCM: each packet alone, never before a seek's target
            guard record.captureOffsetNanos >= skipBefore else { return }
            guard let frame = Self.audioFrame(p, track: track, record: record) else { decodeErrors += 1; return }
            ready.append(frame)
            return
        }
        if record.captureOffsetNanos < skipBefore, record.packing == .raw || decoders[track].codecID == AV_CODEC_ID_FFV1 {
            return   // before a seek's target, and it decodes alone: not worth decoding
        }
        if record.packing == .raw {
            guard let frame = Self.rawFrame(p, track: track, record: record) else { decodeErrors += 1; return }
            ready.append(frame)
        } else {
            ready += decoders[track].decode(p, record: record, track: track, errors: &decodeErrors)
        }
    }

    /// The packet's frame record, when it carries a valid one of its track's kind (an audio
    /// record on an audio track, a video one on a video track).
    private func record(of p: UnsafeMutablePointer<AVPacket>, track: Int) -> FrameRecord? {
        guard track >= 0, track < decoders.count, let record = Self.record(of: p),
              (record.audio != nil) == audioTracks[track] else { return nil }
        return record
    }

    /// The packet's frame record (video or audio), when it carries a valid one.
    static func record(of p: UnsafeMutablePointer<AVPacket>) -> FrameRecord? {
        var size = 0
        guard let side = av_packet_get_side_data(p, AV_PKT_DATA_MATROSKA_BLOCKADDITIONAL, &size) else { return nil }
        // NUT stores the whole side data (BlockAddID included) and its demuxer puts the ID in
        // front again: the record follows one or two 8-byte IDs (docs/RECORDING.md).
        for skip in [16, 8] where size >= skip + FrameRecord.size {
            if let r = FrameRecord(bytes: UnsafeRawBufferPointer(start: side + skip, count: size - skip), audio: true) { return r }
        }
        return nil
    }

    /// An audio packet as a frame, when it is raw and its size is the record's format's.
    static func audioFrame(_ p: UnsafeMutablePointer<AVPacket>, track: Int, record: FrameRecord) -> ReadFrame? {
        guard record.packing == .raw, let a = record.audio, let size = AudioPCM.packetBytes(a),
              Int(p.pointee.size) == size, let copy = av_packet_clone(p) else { return nil }
        return ReadFrame(track: track, record: record, packet: copy)
    }

    /// A raw packet as a frame, when its size is the record's format's.
    static func rawFrame(_ p: UnsafeMutablePointer<AVPacket>, track: Int, record: FrameRecord) -> ReadFrame? {
        let f = record.format
        let size = f.pixelFormat.planes.indices.reduce(0) { $0 + f.rowBytes(plane: $1) * f.rows(plane: $1) }
        guard Int(p.pointee.size) == size, let copy = av_packet_clone(p) else { return nil }
        return ReadFrame(track: track, record: record, packet: copy)
    }
}

/// One track's decoder, opened for the format of the frames it sees (again when it changes).
final class TrackDecoder {
    let codecID: AVCodecID
    private var context: UnsafeMutablePointer<AVCodecContext>?
    private var format: FrameFormat?
    private var records: [Int64: FrameRecord] = [:]
    private var counter: Int64 = 0

    /// The codec's parameters the decoder has (the stream header's, or a packet's NEW_EXTRADATA).
    private var extradata: [UInt8]
    private let headerExtradata: [UInt8]

    /// Slice threads this decoder may use (0: as many as FFmpeg likes).
    let threads: Int32

    init(codecID: AVCodecID, extradata: [UInt8], threads: Int32) {
        self.codecID = codecID
        self.extradata = extradata
        self.threads = threads
        headerExtradata = extradata
    }

    /// One decoder's share of the cores when `tracks` decoders run in one process: every core
    /// for a single track (FFmpeg's choice), else the cores divided between them, at least one,
    /// so the threads of a replay stay near the core count however many tracks it has.
    static func threads(sharing tracks: Int) -> Int32 {
        tracks <= 1 ? 0 : Int32(max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) / tracks))
    }
    deinit { avcodec_free_context(&context) }

    func reset() {
        avcodec_free_context(&context)
        format = nil
        records.removeAll()
    }

    func decode(_ p: UnsafeMutablePointer<AVPacket>, record: FrameRecord, track: Int, errors: inout Int) -> [ReadFrame] {
        var out: [ReadFrame] = []
        // The packet's own parameters (frames after a format change carry them), else the header's.
        var size = 0
        let wanted = av_packet_get_side_data(p, AV_PKT_DATA_NEW_EXTRADATA, &size)
            .map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? headerExtradata
        if wanted != extradata {
            extradata = wanted
            format = nil   // reopen with them
        }
        if format != record.format {
            out = drain(track: track, errors: &errors)
            guard open(record.format) else { errors += 1; return out }
        }
        guard let c = context else { return out }
        counter += 1
        p.pointee.pts = counter
        p.pointee.dts = counter
        records[counter] = record
        if avcodec_send_packet(c, p) < 0 {
            records[counter] = nil
            errors += 1
            return out
        }
        return out + receive(track: track, errors: &errors)
    }

    /// The frames still inside the decoder (at the end of the file, or before a reopen).
    func drain(track: Int, errors: inout Int) -> [ReadFrame] {
        guard let c = context else { return [] }
        _ = avcodec_send_packet(c, nil)
        let out = receive(track: track, errors: &errors)
        errors += records.count   // sent, never came out
        reset()
        return out
    }

    private func receive(track: Int, errors: inout Int) -> [ReadFrame] {
        guard let c = context else { return [] }
        var out: [ReadFrame] = []
        while true {
            guard let f = av_frame_alloc() else { return out }
            guard avcodec_receive_frame(c, f) >= 0 else {
                var q: UnsafeMutablePointer<AVFrame>? = f
                av_frame_free(&q)
                return out
            }
            let key = f.pointee.best_effort_timestamp != cffmpeg_nopts() ? f.pointee.best_effort_timestamp : f.pointee.pts
            guard let record = records.removeValue(forKey: key), Self.matches(f, record.format) else {
                errors += 1
                var q: UnsafeMutablePointer<AVFrame>? = f
                av_frame_free(&q)
                continue
            }
            out.append(ReadFrame(track: track, record: record, frame: f))   // the ReadFrame owns it now
        }
    }

    static func matches(_ f: UnsafeMutablePointer<AVFrame>, _ format: FrameFormat) -> Bool {
        f.pointee.width == Int32(format.width) && f.pointee.height == Int32(format.height)
            && f.pointee.format == av_get_pix_fmt(format.pixelFormat.name).rawValue
    }

    private func open(_ format: FrameFormat) -> Bool {
        avcodec_free_context(&context)
        guard let dec = avcodec_find_decoder(codecID), let c = avcodec_alloc_context3(dec) else { return false }
        context = c
        c.pointee.width = Int32(format.width)
        c.pointee.height = Int32(format.height)
        c.pointee.pix_fmt = av_get_pix_fmt(format.pixelFormat.name)
        c.pointee.thread_count = threads
        c.pointee.thread_type = FF_THREAD_SLICE   // slices, no frame delay
        c.pointee.pkt_timebase = AVRational(num: 1, den: 1)
        if !extradata.isEmpty, let d = av_mallocz(extradata.count + Int(AV_INPUT_BUFFER_PADDING_SIZE)) {
            extradata.withUnsafeBytes { d.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
            c.pointee.extradata = d.assumingMemoryBound(to: UInt8.self)
            c.pointee.extradata_size = Int32(extradata.count)
        }
        guard avcodec_open2(c, dec, nil) >= 0 else { avcodec_free_context(&context); return false }
        self.format = format
        return true
    }
}
