import CFFmpeg
import FrameServer

/// Why a media input cannot be decoded at all (one clear line each).
public enum MediaInputError: Error, CustomStringConvertible, Sendable {
    /// libavformat cannot open or read the input (missing file, unknown format, ...).
    case cannotOpen(String, String)
    /// `-f NAME` names no input format libavformat knows.
    case unknownInputFormat(String)
    /// The input has no video stream.
    case noVideoStream(String)
    /// `-map 0:a:N` names an audio stream the input does not have (N, how many it has).
    case noAudioStream(String, Int, has: Int)
    /// libavcodec has no decoder for the video stream's codec.
    case unsupportedCodec(String, String)
    /// A decoded frame has a pixel format framesrv cannot carry.
    case unsupportedPixelFormat(String)
    /// An FFmpeg call failed (its name and FFmpeg's message).
    case ffmpeg(String, String)
    /// With `strict`: the first decode error (the input, what failed).
    case decodeError(String, String)
    /// `--hwaccel cuda`: FFmpeg could not open the CUDA device (the device, FFmpeg's message).
    case hardwareDevice(String, String)

    public var description: String {
        switch self {
        case .cannotOpen(let input, let message): return "cannot open '\(input)': \(message)"
        case .unknownInputFormat(let name): return "FFmpeg knows no input format '\(name)'"
        case .noVideoStream(let input): return "'\(input)' has no video stream"
        case .noAudioStream(let input, let n, let has):
            let streams = has == 0 ? "none" : has == 1 ? "1: 0:a:0" : "\(has): 0:a:0 to 0:a:\(has - 1)"
            return "-map 0:a:\(n): '\(input)' has no audio stream \(n) (it has \(streams)); ffmpeg says: matches no streams"
        case .unsupportedCodec(let input, let codec): return "no decoder for the video codec '\(codec)' of '\(input)'"
        case .unsupportedPixelFormat(let name):
            return "decoded frames are \(name), which framesrv cannot carry (known: "
                + PixelFormat.allCases.map(\.name).joined(separator: ", ") + ", and yuvj420p/yuvj422p/yuvj444p)"
        case .ffmpeg(let call, let message): return "FFmpeg's \(call) failed: \(message)"
        case .decodeError(let input, let what): return "decode error in '\(input)' (--strict): \(what)"
        case .hardwareDevice(let device, let message):
            return "--hwaccel cuda: FFmpeg cannot open CUDA device \(device) (\(message)): is the NVIDIA driver installed, "
                + "and the device visible (CUDA_VISIBLE_DEVICES)?"
        }
    }
}

/// Input options with ffmpeg's meaning (`ffmpeg -ss T -t D -stream_loop N -i INPUT`).
public struct MediaInputOptions: Sendable {
    /// `-ss`: start here (microseconds from the input's start): seek to the keyframe before
    /// it, decode and drop the frames before it (ffmpeg's accurate seek); timestamps start at 0 there.
    public var start: Int64?
    /// `-t`: stop after this much output (microseconds), measured from the first frame kept.
    public var duration: Int64?
    /// `-stream_loop`: play the input this many more times (-1: forever), timestamps continuing.
    public var loops = 0
    /// The first decode error ends decoding (`next()` returns nil, `firstError` says why)
    /// instead of being counted and skipped.
    public var strict = false
    /// Decode the input's audio too (`MediaDecoder.audio`), as ffmpeg maps one audio stream
    /// beside the video; false: `-an`.
    public var audio = false
    /// `-map 0:a:N`: the input's Nth audio stream (0-based) instead of the one ffmpeg picks.
    public var audioStream: Int?
    /// Let the audio decoder decode into the stream's slots where it can (false: `--copy`).
    public var audioZeroCopy = true
    /// `--hwaccel cuda` (`--hwaccel-device N`): decode with NVDEC on CUDA device N, the frames
    /// staying in device memory (ffmpeg's `-hwaccel cuda -hwaccel_output_format cuda`), through
    /// the device's primary context (the one libframesrv, PyTorch and CuPy use).
    public var cudaDevice: Int?

    public init(start: Int64? = nil, duration: Int64? = nil, loops: Int = 0, strict: Bool = false, audio: Bool = false) {
        self.start = start; self.duration = duration; self.loops = loops; self.strict = strict; self.audio = audio
    }

    /// Parses a time as ffmpeg's `-ss`/`-t` do (`av_parse_time`): seconds (`1.5`) or
    /// `[-][HH:]MM:SS[.m...]`; microseconds, nil if it is not a time.
    public static func parseTime(_ text: String) -> Int64? {
        var us: Int64 = 0
        guard !text.isEmpty, av_parse_time(&us, text, 1) >= 0 else { return nil }
        return us
    }
}
