// MediaDecoder's decode loop: packets in, frames out, errors counted (ffmpeg's rules).

import CFFmpeg
import FrameServer
import Glibc

extension MediaDecoder {
    /// What one `avcodec_receive_frame` came to.
    private enum Received: ~Copyable {
        /// A frame to hand out.
        case frame(DecodedFrame)
        /// Decoding is over: the input's end, `-t`'s, or an error that ends it.
        case ended
        /// Go round again (`receiving` says whether to receive or to read a packet).
        case again
    }

    /// The next decoded frame, or nil at the end of the input (the decoder drained).
    /// The frame is valid until the next call.
    public func next() -> DecodedFrame? {
        guard codec != nil, packet != nil, frame != nil, format != nil, !finished else { return nil }
        var consecutiveErrors = 0
        while true {
            guard receiving else {
                guard sendNextPacket() else { return nil }
                continue
            }
            let received = receiveFrame(consecutiveErrors: &consecutiveErrors)
            switch consume received {
            case .frame(let f): return f
            case .ended: return nil
            case .again: continue
            }
        }
    }

    /// Takes the decoder's next frame; at the end of a play, starts the next one (`loops`).
    private func receiveFrame(consecutiveErrors: inout Int) -> Received {
        guard let codec, let frame else { return .ended }
        av_frame_unref(frame)
        let r = avcodec_receive_frame(codec, frame)
        if r == 0 { return kept(frame) }
        if r == cffmpeg_eof() {
            if draining, loopsLeft != 0, seekToStart() { return .again }
            finished = true
            return .ended
        }
        if r == cffmpeg_eagain() {
            receiving = false
            guard draining else { return .again }
            if loopsLeft != 0, seekToStart() { return .again }
            finished = true
            return .ended
        }
        guard noteError("decoding failed", r) else { return .ended }
        consecutiveErrors += 1
        if !draining { receiving = false }
        if consecutiveErrors > 10_000 { finished = true; return .ended }
        return .again
    }

    /// A frame the decoder made, as ffmpeg's trim filter (accurate seek, -t) sees it: frames
    /// before the start are dropped; the stream ends once a frame is -t or more after the
    /// first one kept.
    private func kept(_ frame: UnsafeMutablePointer<AVFrame>) -> Received {
        guard let format else { return .ended }
        if frame.pointee.best_effort_timestamp == cffmpeg_nopts() { frame.pointee.best_effort_timestamp = followingPts }
        let pts = frame.pointee.best_effort_timestamp
        let length = frame.pointee.pkt_duration > 0 ? frame.pointee.pkt_duration : frameDurationGuess
        followingPts = pts.addingReportingOverflow(max(length, 1)).partialValue
        if pts != cffmpeg_nopts() {
            if trimming, pts < 0 { return .again }
            if let durationLimit {
                if firstKeptPts == nil { firstKeptPts = pts }
                if pts - firstKeptPts! >= durationLimit { finished = true; return .ended }
            }
        }
        // A frame the decoder concealed errors in is still delivered (as ffmpeg does), and
        // counted; with `strict` it ends decoding instead.
        if frame.pointee.decode_error_flags != 0 || frame.pointee.flags & AV_FRAME_FLAG_CORRUPT != 0 {
            guard noteError("frame \(framesDecoded + 1) has errors the decoder concealed", failure: false) else { return .ended }
        }
        framesDecoded += 1
        // As ffmpeg: the container's aspect ratio when it has one, else the frame's.
        let sar = av_guess_sample_aspect_ratio(format, format.pointee.streams[Int(streamIndex)], frame)
        return .frame(DecodedFrame(frame: frame, timeBase: timeBase, sampleAspectRatio: Rational(sar.num, sar.den),
                                   chroma: streamChromaLocation, allocator: allocator))
    }

    /// Reads the video stream's next packet and sends it to the decoder; at the end of the
    /// input, starts the drain. False when decoding ends (an error, with `strict`).
    private func sendNextPacket() -> Bool {
        guard let codec, let packet, let format else { return false }
        let (r, errors) = withErrors(loggedBy: UnsafeMutableRawPointer(format)) { av_read_frame(format, packet) }
        // The demuxer logged an error yet read on (or reached the end): it skipped damaged data.
        if let why = errors.last, r >= 0 || r == cffmpeg_eof() { noteSkipped(why) }
        if r < 0 {
            // End of input (or a read error, which ffmpeg also treats as the end): drain.
            if r != cffmpeg_eof(), !noteError("reading the input failed", r, failure: false) { return false }
            if loopsLeft == 0 { deliverAudio(nil) } else { endAudioPlay() }
            _ = avcodec_send_packet(codec, nil)
            draining = true
            receiving = true
            return true
        }
        defer { av_packet_unref(packet) }
        guard packet.pointee.stream_index == streamIndex else {
            if let audio, packet.pointee.stream_index == audio.streamIndex { deliverAudio(packet) }
            return audioFailure == nil
        }
        // fftools' process_input: the input's offset, then the plays before this one.
        if packet.pointee.pts != cffmpeg_nopts() {
            packet.pointee.pts += tsOffset + loopOffset
            maxPts = max(maxPts, packet.pointee.pts)
            minPts = min(minPts, packet.pointee.pts)
        }
        if packet.pointee.dts != cffmpeg_nopts() { packet.pointee.dts += tsOffset + loopOffset }
        let s = avcodec_send_packet(codec, packet)
        if s < 0, s != cffmpeg_eagain(), !noteError("decoding a packet failed", s) { return false }
        receiving = true
        return true
    }

    /// An input with sound only: reads and publishes the next audio packet; at the end of
    /// the input, drains the audio decoder. False once the input or the audio stream ended.
    public func pumpAudio() -> Bool {
        guard let packet, let format, !finished else { return false }
        let r = av_read_frame(format, packet)
        if r < 0 {
            if r != cffmpeg_eof() { noteError("reading the input failed", r, failure: false) }
            if r == cffmpeg_eof(), loopSound() { return true }
            deliverAudio(nil)
            finished = true
            return false
        }
        defer { av_packet_unref(packet) }
        if let audio, packet.pointee.stream_index == audio.streamIndex { deliverAudio(packet) }
        return audioFailure == nil
    }

    /// Decodes and publishes an audio packet (nil: the end of the input, drain); a failure
    /// of the audio stream's producer ends decoding (`audioFailure`).
    private func deliverAudio(_ packet: UnsafeMutablePointer<AVPacket>?) {
        guard let audio, audioFailure == nil else { return }
        do {
            if let packet { try audio.send(packet) } else { try audio.drain() }
        } catch {
            audioFailure = error
            finished = true
        }
    }

    /// A sound-only input's next play (--loop): the decoder drained, back to the start, the
    /// sound's timestamps continuing after the plays before; false when no play is left or
    /// the input cannot go back (the sound then ends).
    private func loopSound() -> Bool {
        guard let format, loopsLeft != 0, audioFailure == nil else { return false }
        endAudioPlay()
        let start = format.pointee.start_time == cffmpeg_nopts() ? 0 : format.pointee.start_time
        guard let sound = audioPlays, avformat_seek_file(format, -1, Int64.min, start, start, 0) >= 0 || rewindBytes(format) else {
            return false
        }
        audio?.startPlay(offset: sound.duration, in: sound.timeBase)
        if loopsLeft > 0 { loopsLeft -= 1 }
        loopsPlayed += 1
        playOrigin = Double(options.start ?? 0) / 1e6   // (a run-time seek moved it)
        return true
    }

    /// The end of one play with more to come: the audio decoder drained and flushed, and
    /// how long its plays last kept for `seekToStart` (fftools: with sound, one play of
    /// the input lasts as long as its sound).
    private func endAudioPlay() {
        guard let audio, audioFailure == nil else { return }
        do { audioPlays = try audio.endPlay() } catch {
            audioFailure = error
            finished = true
        }
    }

    /// Counts a packet the demuxer skipped, and says so as `onSkipped` asks.
    private func noteSkipped(_ why: String) {
        skippedPackets += 1
        skipsUnreported += 1
        lastSkipReason = why
        reportSkips(force: false)
    }

    /// Says the skipped packets not said yet (`onSkipped`), at once or (`force` false) when the
    /// last report is a second old.
    func reportSkips(force: Bool) {
        let now = monotonicNanos()
        guard skipsUnreported > 0, let onSkipped, force || lastSkipReport.map({ now - $0 >= 1_000_000_000 }) ?? true else { return }
        lastSkipReport = now
        let n = skipsUnreported
        skipsUnreported = 0
        onSkipped("skipped \(n) damaged packet\(n == 1 ? "" : "s") of '\(input)' that the demuxer could not read (\(lastSkipReason))")
    }

    /// Says the skipped packets not said yet (at the end of the input).
    public func reportPendingSkips() { reportSkips(force: true) }

    /// Counts a decode error; the first one is remembered, and with `strict` ends decoding.
    /// Returns whether decoding goes on.
    @discardableResult
    func noteError(_ what: String, _ code: Int32? = nil, failure: Bool = true) -> Bool {
        decodeErrors += 1
        if failure { decodeFailures += 1 }
        if firstError == nil { firstError = code.map { "\(what): \(ffmpegMessage($0))" } ?? what }
        if options.strict { finished = true; return false }
        return true
    }
}
