import CFFmpeg
import FrameServer

/// How `MediaFileWriter` encodes and muxes (ffmpeg's output options).
public struct MediaFileOptions: Sendable {
    /// `-f`: the container (a libavformat muxer name); nil: from the file name's extension.
    public var container: String?
    /// `-c:v`: the encoder.
    public var codec = "libx264"
    /// `-b:v`: target bit rate in bits per second.
    public var bitRate: Int64?
    /// `-crf`: constant quality (encoders with a `crf` option: libx264, libx265, libvpx, ...).
    public var crf: Double?
    /// `-g`: frames between keyframes.
    public var gop: Int?
    /// `-preset`: the encoder's preset (libx264: ultrafast ... placebo).
    public var preset: String?
    /// `-pix_fmt`: the pixel format to encode; nil: see `MediaFilePixelFormat` (4:2:0 for
    /// H.264/H.265, else the stream's when the encoder takes it).
    public var pixelFormat: String?
    /// `-fps_mode`: every frame's own timestamp (passthrough), or resampled to the nominal rate (cfr).
    public var frameRateMode = FrameRateMode.passthrough
    /// `-c:a`: the audio encoder, when the recording has sound; nil: the container's choice
    /// (`MediaFileWriter.defaultAudioEncoder`: aac for MP4/MOV, flac for Matroska and NUT).
    public var audioCodec: String?
    /// `-b:a`: the audio encoder's bit rate in bits per second (nil: the encoder's default).
    public var audioBitRate: Int64?

    public init() {}

    /// The containers a file name's extension selects, and the muxer for each.
    public static let extensions: [String: String] = ["mp4": "mp4", "m4v": "mp4", "mov": "mov", "mkv": "matroska", "nut": "nut"]

    /// Settings that keep a recording readable after the recorder is killed (SIGKILL) at any
    /// moment, up to the last fragment or cluster written:
    /// MP4/MOV fragmented (`movflags=+frag_keyframe+empty_moov+delay_moov+default_base_moof`, a fragment
    /// at every keyframe and at least every `fragmentMicros`); Matroska clusters closed every
    /// `fragmentMicros`; every packet flushed to the file as soon as the muxer emits it.
    public static let fragmentMicros: Int64 = 500_000
}
