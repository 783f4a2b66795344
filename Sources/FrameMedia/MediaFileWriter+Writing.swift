// MediaFileWriter's output: the container header, each frame encoded (with -fps_mode cfr's sync), the trailer.

import CFFmpeg
import FrameServer
import Glibc

extension MediaFileWriter {
    /// Encodes `frame` and writes the packets the encoder has ready.
    public func write(_ frame: borrowing Frame) throws(MediaOutputError) {
        if adapter == nil { try start(frame) }
        guard let adapter, var clock else { return }
        let f = try adapter.avFrame(frame)
        let d = frame.header.description
        let (pts, duration) = clock.stamp(d)
        self.clock = clock
        f.pointee.pict_type = AV_PICTURE_TYPE_NONE
        d.applyFields(to: f)
        guard var sync = constantRate else {
            try encode(f, pts: pts, duration: duration)
            return
        }
        // -fps_mode cfr: ffmpeg's sync, in periods of the rate (the encoder's time base).
        // The frame's duration in periods, rounded; a frame shorter than half a period counts one.
        let periods = Float(Double(duration) * av_q2d(clock.timeBase) / av_q2d(encoderTimeBase)).rounded(.toNearestOrEven)
        let plan = sync.frame(at: ConstantRateSync.syncTime(pts, clock.timeBase, encoderTimeBase), duration: Double(max(periods, 1)))
        constantRate = sync
        if plan.total == 0 { dropped += 1 } else { duplicated += plan.total - 1 }
        for i in 0..<plan.total {
            let picture = i < plan.previous ? (lastFrame ?? f) : f
            try encode(picture, pts: plan.firstPts + Int64(i), duration: 1)
        }
        try keep(f)
    }

    /// Sends one picture to the encoder and writes what it has ready.
    private func encode(_ f: UnsafeMutablePointer<AVFrame>, pts: Int64, duration: Int64) throws(MediaOutputError) {
        guard let c = codecContext else { return }
        f.pointee.pts = pts
        f.pointee.pkt_duration = duration
        let r = avcodec_send_frame(c, f)
        guard r >= 0 else { throw .ffmpeg("avcodec_send_frame", ffmpegMessage(r)) }
        frames += 1
        try drain()
    }

    /// -fps_mode cfr: a copy of the frame just encoded, which a gap after it repeats.
    private func keep(_ f: UnsafeMutablePointer<AVFrame>) throws(MediaOutputError) {
        if lastFrame == nil {
            guard let copy = av_frame_alloc() else { throw .ffmpeg("av_frame_alloc", "out of memory") }
            copy.pointee.width = f.pointee.width
            copy.pointee.height = f.pointee.height
            copy.pointee.format = f.pointee.format
            let r = av_frame_get_buffer(copy, 0)
            lastFrame = copy
            guard r >= 0 else { av_frame_free(&lastFrame); throw .ffmpeg("av_frame_get_buffer", ffmpegMessage(r)) }
        }
        guard let copy = lastFrame else { return }
        var r = av_frame_make_writable(copy)
        if r >= 0 { r = av_frame_copy(copy, f) }
        if r >= 0 { r = av_frame_copy_props(copy, f) }
        guard r >= 0 else { throw .ffmpeg("av_frame_copy", ffmpegMessage(r)) }
    }

    private func drain() throws(MediaOutputError) {
        guard let c = codecContext, let packet, let st = stream, let oc = formatContext else { return }
        while true {
            var r = avcodec_receive_packet(c, packet)
            if r == cffmpeg_eagain() || r == cffmpeg_eof() { return }
            guard r >= 0 else { throw .ffmpeg("avcodec_receive_packet", ffmpegMessage(r)) }
            packet.pointee.stream_index = st.pointee.index
            av_packet_rescale_ts(packet, encoderTimeBase, st.pointee.time_base)
            r = av_interleaved_write_frame(oc, packet)   // takes the packet's reference
            guard r >= 0 else { throw .cannotOpen(path, ffmpegMessage(r)) }
            packets += 1
        }
    }

    /// Drains the encoder and writes the trailer; the file is complete after this.
    public func finish() throws(MediaOutputError) {
        guard !finished else { return }
        finished = true
        guard let oc = formatContext else { return }
        // No header (the container refused the stream at avformat_write_header): nothing to drain or end.
        if let c = codecContext, headerWritten {
            if var sync = constantRate, let last = lastFrame {
                // ffmpeg repeats the last frame at the end as often as the frames before it were.
                let (total, first) = sync.end()
                for i in 0..<total { try encode(last, pts: first + Int64(i), duration: 1) }
                duplicated += total
            }
            let r = avcodec_send_frame(c, nil)
            guard r >= 0 else { throw .ffmpeg("avcodec_send_frame", ffmpegMessage(r)) }
            try drain()
            try finishAudio()
            let t = av_write_trailer(oc)
            guard t >= 0 else { throw .cannotOpen(path, ffmpegMessage(t)) }
        }
        if outputFormat.pointee.flags & AVFMT_NOFILE == 0, oc.pointee.pb != nil {
            avio_flush(oc.pointee.pb)
            finalBytes = max(0, avio_tell(oc.pointee.pb))
            let r = avio_closep(&oc.pointee.pb)
            guard r >= 0 else { throw .cannotOpen(path, ffmpegMessage(r)) }
        }
    }

    /// The stream and the container header (with the crash-safe settings of `MediaFileOptions.fragmentMicros`).
    func writeHeader(rate: AVRational) throws(MediaOutputError) {
        guard let oc = formatContext, let c = codecContext else { throw .ffmpeg("avcodec_open2", "no encoder") }
        guard let st = avformat_new_stream(oc, nil) else { throw .ffmpeg("avformat_new_stream", "out of memory") }
        stream = st
        var r = avcodec_parameters_from_context(st.pointee.codecpar, c)
        guard r >= 0 else { throw .ffmpeg("avcodec_parameters_from_context", ffmpegMessage(r)) }
        st.pointee.time_base = encoderTimeBase
        st.pointee.avg_frame_rate = rate
        st.pointee.r_frame_rate = rate
        st.pointee.sample_aspect_ratio = c.pointee.sample_aspect_ratio

        if let audioFormat { try addAudioStream(audioFormat) }
        var muxerOptions: OpaquePointer?
        defer { av_dict_free(&muxerOptions) }
        let container = String(cString: outputFormat.pointee.name)
        if ["mp4", "mov", "ipod", "ismv", "3gp", "3g2", "psp", "f4v"].contains(container) {
            // delay_moov: the moov goes out with the first fragment, when the encoder's delay
            // (B-frames) is known, so its edit list keeps the first picture at time 0.
            av_dict_set(&muxerOptions, "movflags", "+frag_keyframe+empty_moov+delay_moov+default_base_moof", 0)
            av_dict_set(&muxerOptions, "frag_duration", "\(MediaFileOptions.fragmentMicros)", 0)
        } else if container == "matroska" || container == "webm" {
            av_dict_set(&muxerOptions, "cluster_time_limit", "\(MediaFileOptions.fragmentMicros / 1000)", 0)
        }
        r = avformat_write_header(oc, &muxerOptions)
        guard r >= 0 else { throw .ffmpeg("avformat_write_header", ffmpegMessage(r)) }
        headerWritten = true
    }
}
