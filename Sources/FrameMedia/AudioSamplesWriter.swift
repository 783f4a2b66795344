import CFFmpeg
import FrameServer
import Glibc

/// Bare samples of an audio stream (`sink --wav`, and `sink --raw` for sound): each frame
/// interleaved into the packed form of its own sample format (`AudioPCM`: fltp -> flt,
/// exactly, no value changes) and written as it comes; `.wav` through libavformat's wav muxer (PCM of
/// that format, the channel mask, RIFF sizes written at the end where the file can seek),
/// `.raw` as the bytes alone (what `ffmpeg -f f32le` / `-f s16le` writes). The first frame's
/// format holds for the file: a later frame of another rate or layout is an error.
public final class AudioSamplesWriter {
    public enum Kind: Sendable { case wav, raw }

    public let kind: Kind
    public let path: String
    /// Frames and bytes of samples written.
    public private(set) var frames = 0, bytes: Int64 = 0
    private var raw: OutputFile?
    private var muxer: UnsafeMutablePointer<AVFormatContext>?
    private var packet = av_packet_alloc()
    /// One frame's interleaved samples (raw), reused.
    private var buffer: [UInt8] = []
    private var format: AudioFormat?
    /// Samples per channel in the WAV so far: the next packet's timestamp.
    private var samplesWritten: Int64 = 0

    /// Opens `path` (`-`: standard output) for `kind`; the stream's format comes with its first frame.
    public init(path: String, kind: Kind, shouldStop: (() -> Bool)? = nil) throws(MediaOutputError) {
        self.kind = kind
        self.path = path
        if kind == .raw { raw = try OutputFile(path: path, shouldStop: shouldStop) }
    }

    /// `.raw` into a file already open (`sink --raw`'s, whose stream turned out to be sound).
    init(raw output: OutputFile) {
        kind = .raw
        path = output.path
        raw = output
    }

    deinit {
        av_packet_free(&packet)
        if let muxer {
            if muxer.pointee.pb != nil { avio_closep(&muxer.pointee.pb) }
            avformat_free_context(muxer)
        }
    }

    /// Writes an audio frame's samples.
    public func write(_ frame: borrowing Frame) throws(MediaOutputError) {
        guard let format = frame.header.audioFormat else { return }
        if let first = self.format {
            guard first.sameStream(as: format) else {
                throw .audio(path, "the stream changed from \(first) to \(format); a \(kind) file keeps one format")
            }
        } else {
            try start(format)
        }
        guard let size = AudioPCM.packetBytes(format), size < Int(Int32.max) else {
            throw .audio(path, "an audio frame of \(format) is too large to write")
        }
        if let raw {
            if buffer.count != size { buffer = [UInt8](repeating: 0, count: size) }
            buffer.withUnsafeMutableBytes { AudioPCM.copyInterleaved(frame, format, to: $0.baseAddress!) }
            try raw.write(buffer)
        } else {
            try mux(frame, format, size: size)
        }
        bytes += Int64(size)
        frames += 1
    }

    /// Writes the trailer (a WAV's sizes).
    public func finish() throws(MediaOutputError) {
        guard let muxer else { return }
        let r = av_write_trailer(muxer)
        avio_closep(&muxer.pointee.pb)
        guard r >= 0 else { throw .cannotOpen(path, ffmpegMessage(r)) }
    }

    private func start(_ format: AudioFormat) throws(MediaOutputError) {
        self.format = format
        guard kind == .wav else { return }
        let packed = av_get_packed_sample_fmt(AudioSampleConverter.avFormat(format.sampleFormat))
        let bytesPerSample = Int32(format.sampleFormat.bytesPerSample)
        var oc: UnsafeMutablePointer<AVFormatContext>?
        var r = avformat_alloc_output_context2(&oc, nil, "wav", nil)
        guard r >= 0, let oc else { throw .ffmpeg("avformat_alloc_output_context2(wav)", ffmpegMessage(r)) }
        muxer = oc
        guard let st = avformat_new_stream(oc, nil) else { throw .ffmpeg("avformat_new_stream", "out of memory") }
        let p = st.pointee.codecpar!
        p.pointee.codec_type = AVMEDIA_TYPE_AUDIO
        p.pointee.codec_id = AudioPCM.codecID(format.sampleFormat)
        p.pointee.format = Int32(packed.rawValue)
        p.pointee.sample_rate = Int32(format.sampleRate)
        AudioSampleConverter.setLayout(&p.pointee.ch_layout, format.layout)
        p.pointee.bits_per_coded_sample = bytesPerSample * 8
        p.pointee.block_align = bytesPerSample * Int32(format.channels)
        st.pointee.time_base = AVRational(num: 1, den: Int32(format.sampleRate))
        r = avio_open(&oc.pointee.pb, path == "-" ? "pipe:1" : path, AVIO_FLAG_WRITE)
        guard r >= 0 else { throw .cannotOpen(path, ffmpegMessage(r)) }
        r = avformat_write_header(oc, nil)
        guard r >= 0 else { throw .audio(path, "the wav muxer refused \(format): \(ffmpegMessage(r))") }
    }

    /// The frame's interleaved samples as one packet of the WAV.
    private func mux(_ frame: borrowing Frame, _ format: AudioFormat, size: Int) throws(MediaOutputError) {
        guard let muxer, let packet else { return }
        var r = av_new_packet(packet, Int32(size))
        guard r >= 0 else { throw .ffmpeg("av_new_packet", ffmpegMessage(r)) }
        AudioPCM.copyInterleaved(frame, format, to: packet.pointee.data)
        // WAV holds samples, not times: each packet is stamped where its samples land in the
        // file. The frames' own pts may go back (a capture device stamps by the wall clock:
        // PulseAudio's jitter by a few ms) and would make the muxer refuse the file.
        packet.pointee.pts = samplesWritten
        packet.pointee.dts = samplesWritten
        samplesWritten += Int64(format.samples)
        packet.pointee.duration = Int64(format.samples)
        packet.pointee.stream_index = 0
        av_packet_rescale_ts(packet, AVRational(num: 1, den: Int32(format.sampleRate)), muxer.pointee.streams[0]!.pointee.time_base)
        r = av_write_frame(muxer, packet)
        av_packet_unref(packet)
        guard r >= 0 else { throw .cannotOpen(path, ffmpegMessage(r)) }
    }
}
