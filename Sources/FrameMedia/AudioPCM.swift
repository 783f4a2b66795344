import CFFmpeg
import FrameServer
import Glibc

/// An audio frame's samples as PCM: the packed form of the frame's own sample type, the
/// channels interleaved (a planar frame's rows interleaved sample by sample), every value
/// kept bit for bit. What a recording stores (docs/RECORDING.md, "Audio tracks": the frame
/// record says whether the frame was planar, and replay lays its rows out again) and what
/// `sink --wav`/`--raw` write.
package enum AudioPCM {
    /// The container codec of a track whose first frame is `format`: the PCM codec of its
    /// packed form (little-endian, as framesrv's hosts are).
    package static func codecID(_ format: SampleFormat) -> AVCodecID {
        switch format {
        case .u8, .u8p: AV_CODEC_ID_PCM_U8
        case .s16, .s16p: AV_CODEC_ID_PCM_S16LE
        case .s32, .s32p: AV_CODEC_ID_PCM_S32LE
        case .flt, .fltp: AV_CODEC_ID_PCM_F32LE
        case .dbl, .dblp: AV_CODEC_ID_PCM_F64LE
        case .s64, .s64p: AV_CODEC_ID_PCM_S64LE
        }
    }

    /// Bytes of the packet of a frame of `format`: every sample of every channel; nil when it overflows.
    package static func packetBytes(_ format: AudioFormat) -> Int? {
        guard let row = format.rowBytes else { return nil }
        let (all, overflow) = row.multipliedReportingOverflow(by: format.rows)
        return overflow ? nil : all
    }

    /// Walks the samples of a frame of `format` in interleaved order: `body(packed offset,
    /// row, offset in the row, bytes)` for each run of bytes to move between the interleaved
    /// packet and the frame's rows (one run for a packed format, one per sample for a planar one).
    package static func interleave(_ format: AudioFormat, _ body: (Int, Int, Int, Int) -> Void) {
        guard format.sampleFormat.isPlanar else {
            body(0, 0, 0, packetBytes(format) ?? 0)
            return
        }
        let size = format.sampleFormat.bytesPerSample, channels = format.channels
        for s in 0..<format.samples {
            for c in 0..<channels { body((s * channels + c) * size, c, s * size, size) }
        }
    }

    /// Copies the frame's samples, interleaved, to `out` (`packetBytes(format)` bytes).
    package static func copyInterleaved(_ frame: borrowing Frame, _ format: AudioFormat, to out: UnsafeMutableRawPointer) {
        let rows = (0..<format.rows).map { frame.audioRow($0).baseAddress! }
        interleave(format) { at, row, offset, bytes in memcpy(out + at, rows[row] + offset, bytes) }
    }

    /// Lays an interleaved packet (`packetBytes(format)` bytes) out in a slot's rows.
    package static func unpack(_ packet: UnsafePointer<UInt8>, into slot: borrowing WritableAudioFrame) {
        let rows = (0..<slot.format.rows).map { slot.row($0).baseAddress! }
        interleave(slot.format) { at, row, offset, bytes in memcpy(rows[row] + offset, packet + at, bytes) }
    }
}
