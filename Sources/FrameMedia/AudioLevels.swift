import FrameServer
import Glibc

/// The loudness of one audio frame, per channel: peak and RMS in dBFS (0 = full scale,
/// -inf for digital silence, written as null in JSON), as a level meter shows them.
/// Integer samples are scaled to -1...1 (u8 around 128); float samples are taken as they are.
public struct AudioLevels: Encodable, Sendable {
    public let sampleRate: Int
    public let layout: String
    public let sampleFormat: String
    public let samples: Int
    /// Per channel, in the stream's order.
    public let peakDB: [Double?]
    public let rmsDB: [Double?]

    /// Measures `frame` (an audio frame, validated; nil for a video frame).
    public init?(_ frame: borrowing Frame) {
        guard let format = frame.header.audioFormat else { return nil }
        var peak = [Double](repeating: 0, count: format.channels)
        var square = [Double](repeating: 0, count: format.channels)
        let planar = format.sampleFormat.isPlanar
        let size = format.sampleFormat.bytesPerSample
        for row in 0..<format.rows {
            let bytes = frame.audioRow(row)
            let values = bytes.count / size
            for i in 0..<values {
                let channel = planar ? row : i % format.channels
                let v = Self.sample(bytes, at: i * size, format.sampleFormat)
                peak[channel] = max(peak[channel], abs(v))
                square[channel] += v * v
            }
        }
        let n = Double(max(format.samples, 1))
        sampleRate = format.sampleRate
        layout = format.layout.description
        sampleFormat = format.sampleFormat.name
        samples = format.samples
        peakDB = peak.map(Self.decibels)
        rmsDB = square.map { Self.decibels(($0 / n).squareRoot()) }
    }

    /// One sample scaled to -1...1 (float formats as stored).
    static func sample(_ bytes: UnsafeRawBufferPointer, at offset: Int, _ format: SampleFormat) -> Double {
        switch format {
        case .u8, .u8p: (Double(bytes.load(fromByteOffset: offset, as: UInt8.self)) - 128) / 128
        case .s16, .s16p: Double(bytes.loadUnaligned(fromByteOffset: offset, as: Int16.self)) / 32768
        case .s32, .s32p: Double(bytes.loadUnaligned(fromByteOffset: offset, as: Int32.self)) / 2147483648
        case .s64, .s64p: Double(bytes.loadUnaligned(fromByteOffset: offset, as: Int64.self)) / 9223372036854775808
        case .flt, .fltp: Double(bytes.loadUnaligned(fromByteOffset: offset, as: Float.self))
        case .dbl, .dblp: bytes.loadUnaligned(fromByteOffset: offset, as: Double.self)
        }
    }

    /// 20 log10(v), nil for 0 (or what is not a finite number: a damaged float sample).
    static func decibels(_ v: Double) -> Double? {
        guard v.isFinite, v > 0 else { return nil }
        return 20 * log10(v)
    }
}
