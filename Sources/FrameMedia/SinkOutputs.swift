import FrameServer

/// Where a sink's frames go: any of a framemd5 file, a y4m stream, raw planes and a
/// media file (`--record`), each frame written to each in that order. The media file is opened first: its
/// checks (container, encoder, settings, path) fail before any other file is truncated.
public final class SinkOutputs {
    public let md5: FrameMD5Writer?
    public let y4m: PackedVideoWriter?
    public let raw: PackedVideoWriter?
    public let mediaFile: MediaFileWriter?
    /// `--wav`: an audio stream's samples in a WAV file.
    public let wav: AudioSamplesWriter?

    /// Paths (`-` for standard output) of the outputs wanted; `shouldStop` ends a write
    /// blocked on a reader that does not read.
    public init(framemd5: String?, y4m: String?, raw: String?, record: String?, wav: String? = nil, mediaFileOptions: MediaFileOptions,
                shouldStop: @escaping () -> Bool) throws(MediaOutputError) {
        self.wav = try wav.map { path throws(MediaOutputError) in try AudioSamplesWriter(path: path, kind: .wav, shouldStop: shouldStop) }
        mediaFile = try record.map { path throws(MediaOutputError) in try MediaFileWriter(path: path, options: mediaFileOptions) }
        self.y4m = try y4m.map { path throws(MediaOutputError) in try PackedVideoWriter(path: path, kind: .y4m, shouldStop: shouldStop) }
        self.raw = try raw.map { path throws(MediaOutputError) in try PackedVideoWriter(path: path, kind: .raw, shouldStop: shouldStop) }
        md5 = try framemd5.map { path throws(MediaOutputError) in try FrameMD5Writer(path: path, shouldStop: shouldStop) }
    }

    /// The stream's exact nominal rate: ffmpeg's output time base for framemd5, the y4m
    /// header's rate, the recording's. Set it before the first frame.
    public var frameRate: Rational? {
        didSet {
            md5?.frameRate = frameRate
            y4m?.frameRate = frameRate
            raw?.frameRate = frameRate
            mediaFile?.frameRate = frameRate
        }
    }

    /// Writes `frame` to every output.
    public func write(_ frame: borrowing Frame) throws(MediaOutputError) {
        try md5?.write(frame)
        try y4m?.write(frame)
        try raw?.write(frame)
        try mediaFile?.write(frame)
        try wav?.write(frame)
    }

    /// Completes every output: drains the encoder and writes the trailer, writes the last checksums.
    public func finish() throws(MediaOutputError) {
        try mediaFile?.finish()
        try wav?.finish()
        try md5?.flush()
    }

    /// The recording's size so far, for the status line.
    public var bytesRecorded: Int64? { mediaFile?.bytesWritten }
}
