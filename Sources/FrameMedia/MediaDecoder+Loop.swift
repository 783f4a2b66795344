// MediaDecoder's decode loop: packets in, frames out, errors counted (ffmpeg's rules).

import CFFmpeg
import FrameServer
import Glibc

extension MediaDecoder {
    /// The next decoded frame, or nil at the end of the input (the decoder drained).
    /// The frame is valid until the next call.
    public func next() -> DecodedFrame? {
        guard let codec, let packet, let frame, let format, !finished else { return nil }
        var consecutiveErrors = 0
        while true {
            if receiving {
                av_frame_unref(frame)
                let r = avcodec_receive_frame(codec, frame)
                if r == 0 {
                    // ffmpeg's trim filter (accurate seek, -t): frames before the start are dropped;
                    // the stream ends once a frame is -t or more after the first one kept.
                    let pts = frame.pointee.best_effort_timestamp
                    if pts != cffmpeg_nopts() {
                        if trimming, pts < 0 { continue }
                        if let durationLimit {
                            if firstKeptPts == nil { firstKeptPts = pts }
                            if pts - firstKeptPts! >= durationLimit { finished = true; return nil }
                        }
                    }
                    // A frame the decoder concealed errors in is still delivered (as ffmpeg does), and
                    // counted; with `strict` it ends decoding instead.
                    if frame.pointee.decode_error_flags != 0 || frame.pointee.flags & AV_FRAME_FLAG_CORRUPT != 0 {
                        guard noteError("frame \(framesDecoded + 1) has errors the decoder concealed", failure: false) else { return nil }
                    }
                    framesDecoded += 1
                    // As ffmpeg: the container's aspect ratio when it has one, else the frame's.
                    let sar = av_guess_sample_aspect_ratio(format, format.pointee.streams[Int(streamIndex)], frame)
                    return DecodedFrame(frame: frame, timeBase: timeBase, sampleAspectRatio: Rational(sar.num, sar.den),
                                        chroma: streamChromaLocation, allocator: allocator)
                } else if r == cffmpeg_eof() {
                    if draining, loopsLeft != 0, seekToStart() { continue }
                    finished = true
                    return nil
                } else if r == cffmpeg_eagain() {
                    receiving = false
                    if draining {
                        if loopsLeft != 0, seekToStart() { continue }
                        finished = true
                        return nil
                    }
                } else {
                    guard noteError("decoding failed", r) else { return nil }
                    consecutiveErrors += 1
                    if !draining { receiving = false }
                    if consecutiveErrors > 10_000 { finished = true; return nil }
                }
                continue
            }
            let r = av_read_frame(format, packet)
            if r < 0 {
                // End of input (or a read error, which ffmpeg also treats as the end): drain.
                if r != cffmpeg_eof(), !noteError("reading the input failed", r, failure: false) { return nil }
                _ = avcodec_send_packet(codec, nil)
                draining = true
                receiving = true
                continue
            }
            defer { av_packet_unref(packet) }
            guard packet.pointee.stream_index == streamIndex else { continue }
            // fftools' process_input: the input's offset, then the plays before this one.
            if packet.pointee.pts != cffmpeg_nopts() {
                packet.pointee.pts += tsOffset + loopOffset
                maxPts = max(maxPts, packet.pointee.pts)
                minPts = min(minPts, packet.pointee.pts)
            }
            if packet.pointee.dts != cffmpeg_nopts() { packet.pointee.dts += tsOffset + loopOffset }
            let s = avcodec_send_packet(codec, packet)
            if s < 0, s != cffmpeg_eagain(), !noteError("decoding a packet failed", s) { return nil }
            receiving = true
        }
    }

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
