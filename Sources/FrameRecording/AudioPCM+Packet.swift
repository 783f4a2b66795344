import CFFmpeg
import FrameMedia
import FrameServer

extension AudioPCM {
    /// The frame's samples, interleaved, in a new packet (a key frame: each decodes alone).
    static func pack(_ frame: borrowing Frame, _ format: AudioFormat) throws(RecordingError) -> UnsafeMutablePointer<AVPacket> {
        guard let size = packetBytes(format), size < Int(Int32.max), let p = av_packet_alloc() else {
            throw .ffmpeg("av_packet_alloc", "an audio frame of \(format) does not fit a packet")
        }
        guard av_new_packet(p, Int32(size)) >= 0 else {
            var q: UnsafeMutablePointer<AVPacket>? = p
            av_packet_free(&q)
            throw .ffmpeg("av_new_packet", "out of memory")
        }
        copyInterleaved(frame, format, to: p.pointee.data!)
        p.pointee.flags |= AV_PKT_FLAG_KEY
        return p
    }
}
