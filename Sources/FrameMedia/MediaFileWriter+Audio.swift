// MediaFileWriter's sound: an audio encoder and stream beside the video, fed in timestamp order.

import CFFmpeg
import FrameServer
import Glibc

extension MediaFileWriter {
    /// The audio encoder ffmpeg's users expect for a container: FFmpeg's native AAC for
    /// MP4/MOV; FLAC (lossless) for Matroska and NUT; else the container's own default.
    static func defaultAudioEncoder(_ container: UnsafePointer<AVOutputFormat>) -> String {
        switch String(cString: container.pointee.name) {
        case "mp4", "mov", "ipod", "3gp", "3g2", "ismv", "f4v", "psp": "aac"
        case "matroska", "nut": "flac"
        default: String(cString: avcodec_get_name(container.pointee.audio_codec))
        }
    }

    /// Opens the audio encoder for `format` (-c:a, -b:a) and adds its stream (before the header).
    func addAudioStream(_ format: AudioFormat) throws(MediaOutputError) {
        guard let oc = formatContext else { return }
        let name = options.audioCodec ?? Self.defaultAudioEncoder(outputFormat)
        let byCodec = avcodec_descriptor_get_by_name(name).flatMap { avcodec_find_encoder($0.pointee.id) }
        guard let encoder = avcodec_find_encoder_by_name(name) ?? byCodec, encoder.pointee.type == AVMEDIA_TYPE_AUDIO else {
            throw .audio("-c:a \(name)", "FFmpeg has no audio encoder '\(name)' (ffmpeg -encoders lists them)")
        }
        guard let c = avcodec_alloc_context3(encoder) else { throw .ffmpeg("avcodec_alloc_context3", "out of memory") }
        audioCodec = c
        let sampleFormat = Self.encoderSampleFormat(encoder, preferring: format.sampleFormat)
        c.pointee.sample_fmt = AudioSampleConverter.avFormat(sampleFormat)
        c.pointee.sample_rate = Int32(format.sampleRate)
        AudioSampleConverter.setLayout(&c.pointee.ch_layout, format.layout)
        if !format.layout.isNative { av_channel_layout_default(&c.pointee.ch_layout, Int32(format.channels)) }
        c.pointee.time_base = AVRational(num: 1, den: Int32(format.sampleRate))
        if let b = options.audioBitRate { c.pointee.bit_rate = b }
        if outputFormat.pointee.flags & AVFMT_GLOBALHEADER != 0 { c.pointee.flags |= Int32(AV_CODEC_FLAG_GLOBAL_HEADER) }
        var r = avcodec_open2(c, encoder, nil)
        guard r >= 0 else { throw .audio(name, "the encoder refused \(format): \(ffmpegMessage(r))") }
        guard let st = avformat_new_stream(oc, nil) else { throw .ffmpeg("avformat_new_stream", "out of memory") }
        audioStream = st
        r = avcodec_parameters_from_context(st.pointee.codecpar, c)
        guard r >= 0 else { throw .ffmpeg("avcodec_parameters_from_context", ffmpegMessage(r)) }
        st.pointee.time_base = c.pointee.time_base
        let variable = encoder.pointee.capabilities & Int32(AV_CODEC_CAP_VARIABLE_FRAME_SIZE) != 0
        audioConverter = try AudioSampleConverter(to: sampleFormat, frameSize: variable ? 0 : Int(c.pointee.frame_size))
        audioDescription = "\(String(cString: encoder.pointee.name)) \(format.sampleRate) Hz \(format.layout) \(sampleFormat)"
    }

    /// The encoder's sample format: `preferred` when it takes it (no conversion), else its first.
    static func encoderSampleFormat(_ encoder: UnsafePointer<AVCodec>, preferring preferred: SampleFormat) -> SampleFormat {
        var formats: [SampleFormat] = []
        if var p = encoder.pointee.sample_fmts {
            while p.pointee != AV_SAMPLE_FMT_NONE {
                if let name = av_get_sample_fmt_name(p.pointee), let f = SampleFormat(name: String(cString: name)) { formats.append(f) }
                p += 1
            }
        }
        return formats.contains(preferred) || formats.isEmpty ? preferred : formats[0]
    }

    /// Encodes an audio frame (1/sample_rate timestamps) of `format`; a frame of a stream
    /// whose recording has no audio stream is ignored.
    func writeAudio(_ frame: UnsafeMutablePointer<AVFrame>, _ format: AudioFormat) throws(MediaOutputError) {
        guard let audioConverter else { return }
        try audioConverter.convert(frame, format) { out throws(MediaOutputError) in try encodeAudio(out) }
    }

    /// Sends one frame (nil: the end) to the audio encoder and writes its packets.
    private func encodeAudio(_ f: UnsafeMutablePointer<AVFrame>?) throws(MediaOutputError) {
        guard let c = audioCodec, let packet, let st = audioStream, let oc = formatContext else { return }
        var r = avcodec_send_frame(c, f)
        guard r >= 0 else { throw .audio("encoder", "avcodec_send_frame: \(ffmpegMessage(r))") }
        if f != nil { audioFrames += 1 }
        while true {
            r = avcodec_receive_packet(c, packet)
            if r == cffmpeg_eagain() || r == cffmpeg_eof() { return }
            guard r >= 0 else { throw .audio("encoder", "avcodec_receive_packet: \(ffmpegMessage(r))") }
            packet.pointee.stream_index = st.pointee.index
            av_packet_rescale_ts(packet, c.pointee.time_base, st.pointee.time_base)
            r = av_interleaved_write_frame(oc, packet)
            guard r >= 0 else { throw .cannotOpen(path, ffmpegMessage(r)) }
            packets += 1
        }
    }

    /// The end of the sound: what the conversion holds, then the encoder drained.
    func finishAudio() throws(MediaOutputError) {
        guard let audioConverter, audioCodec != nil else { return }
        try audioConverter.convert(nil, nil) { out throws(MediaOutputError) in try encodeAudio(out) }
        try encodeAudio(nil)
    }
}
