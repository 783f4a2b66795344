// MediaDecoder's timestamps: the loops of `-stream_loop`, a run-time seek, a frame's place in the file.

import CFFmpeg
import FrameControl
import FrameServer
import Glibc

extension MediaDecoder {
    /// The end of one play with more to come (the decoder drained): as fftools' seek_to_start,
    /// back to the start, with timestamps continuing after the longest play so far.
    /// Back to the first byte of an input that cannot seek by timestamp, its demuxer's buffers
    /// flushed; false for an input that cannot seek at all (a pipe).
    func rewindBytes(_ format: UnsafeMutablePointer<AVFormatContext>) -> Bool {
        guard let pb = format.pointee.pb, pb.pointee.seekable != 0, avio_seek(pb, 0, SEEK_SET) >= 0 else { return false }
        avformat_flush(format)
        return true
    }

    func seekToStart() -> Bool {
        guard let format, let codec else { return false }
        let start = format.pointee.start_time == cffmpeg_nopts() ? 0 : format.pointee.start_time
        let r = avformat_seek_file(format, -1, Int64.min, start, start, 0)
        // A raw stream (H.264 without a container) seeks by timestamp nowhere: back to byte 0, as a reopen would.
        guard r >= 0 || rewindBytes(format) else { noteError("seeking back to the start", r); return false }
        avcodec_flush_buffers(codec)
        // After a run-time seek the plays to come are rebased as the first one was.
        tsOffset = baseOffset
        var duration = frameDurationGuess
        if maxPts > minPts { duration += maxPts - minPts }
        if let sound = audioPlays {
            // fftools' seek_to_start: with sound, the plays last as long as the sound's, for every stream.
            duration = av_rescale_q(sound.duration, sound.timeBase, AVRational(num: timeBase.num, den: timeBase.den))
            audio?.startPlay(offset: sound.duration, in: sound.timeBase)
        }
        loopOffset = max(loopOffset, duration)
        if loopsLeft > 0 { loopsLeft -= 1 }
        loopsPlayed += 1
        playOrigin = Double(options.start ?? 0) / 1e6
        draining = false
        receiving = false
        return true
    }

    /// Seeks to media time `seconds` (from the input's start) at run time, as `-ss` does at
    /// the start: to the keyframe before it, the decoder flushed, the frames before it
    /// decoded and dropped, and timestamps rebased so that it is pts 0 (ffmpeg's rule: the
    /// frames are those of `ffmpeg -ss T -i INPUT`). `-t` counts again from there.
    public func seek(to seconds: Double) throws(MediaInputError) {
        guard let format, codec != nil || audio != nil else { throw .ffmpeg("avformat_seek_file", "the input is closed") }
        let start = format.pointee.start_time == cffmpeg_nopts() ? 0 : format.pointee.start_time
        guard seconds.isFinite, let micros = TimeBound.checked(Int64(max(-1e15, min(1e15, seconds * 1e6)).rounded())) else {
            throw .ffmpeg("avformat_seek_file", "\(seconds) s is \(TimeBound.refusal)")
        }
        let timestamp = micros + start
        let r = Self.seekFile(format, streamIndex: streamIndex, to: timestamp)
        guard r >= 0 else { throw .ffmpeg("avformat_seek_file", ffmpegMessage(r)) }
        if let codec { avcodec_flush_buffers(codec) }   // (none: an input with sound only)
        audio?.restart(offsetMicros: timestamp)
        tsOffset = -av_rescale_q(timestamp, AVRational(num: 1, den: AV_TIME_BASE), AVRational(num: timeBase.num, den: timeBase.den))
        origin = seconds
        playOrigin = seconds
        trimming = true
        firstKeptPts = nil
        loopOffset = 0
        audioPlays = nil
        minPts = Int64.max
        maxPts = Int64.min
        receiving = false
        draining = false
        finished = false
    }

    /// After a run-time seek: counts the plays as they were at play `loops` (the decoder may
    /// have begun the next play with a frame that was never published), giving back the
    /// plays left that it took.
    func returnToPlay(_ loops: Int) {
        guard loops < loopsPlayed else { return }
        if loopsLeft >= 0 { loopsLeft += loopsPlayed - loops }   // (-1: for ever)
        loopsPlayed = loops
    }

    /// Where a frame lies in the file: seconds from the input's start, whichever play of a
    /// loop it belongs to (its media time goes on growing across plays; this does not).
    public func filePosition(of description: FrameDescription) -> Double? {
        guard let pts = description.pts, timeBase.den > 0 else { return nil }
        return max(0, Double(pts - loopOffset) * Double(timeBase.num) / Double(timeBase.den) + playOrigin)
    }
}
