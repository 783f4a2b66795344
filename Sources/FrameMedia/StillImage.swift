import CFFmpeg
import FrameServer
import Glibc

/// What can go wrong writing a frame as a still image (`framesrv inspect --snapshot`).
/// (The other outputs throw `MediaOutputError`.)
public enum StillImageError: Error, CustomStringConvertible, Sendable {
    /// FFmpeg has no pixel format by this name.
    case unsupportedPixelFormat(String)
    /// A frame's pixel format has no code in this build of framesrv.
    case unreadablePixelFormat(String)
    /// An FFmpeg call failed (its name and FFmpeg's message).
    case ffmpeg(String, String)
    /// Writing the output failed.
    case io(String, Errno)
    /// The frame's planes do not hold what FFmpeg reads for its pixel format (a damaged frame).
    case layout(FrameLayoutError)

    public var description: String {
        switch self {
        case .unsupportedPixelFormat(let f): return "FFmpeg does not know pixel format '\(f)'"
        case .unreadablePixelFormat(let f): return "frames are in pixel format '\(f)', which this framesrv cannot read"
        case .ffmpeg(let call, let message): return "FFmpeg's \(call) failed: \(message)"
        case .io(let path, let e): return "cannot write \(path): \(e)"
        case .layout(let e): return e.description
        }
    }
}

/// FFmpeg's text for an error code.
func ffmpegMessage(_ code: Int32) -> String {
    var buf = [CChar](repeating: 0, count: 256)
    av_strerror(code, &buf, buf.count)
    return String(decoding: buf.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Still images of frames, through libswscale and libavcodec.
public enum StillImage {
    /// Converts `frame` to RGB, honouring its colour matrix and range, and writes it as a PNG file.
    ///
    /// The conversion and encoding are `PreviewEncoder`'s (`.png`, the frame's own size).
    public static func writePNG(_ frame: borrowing Frame, to path: String) throws(StillImageError) {
        let png = try PreviewEncoder(.png).encode(frame)
        do throws(Errno) {
            let file = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o644)
            let failure = png.withUnsafeBytes { bytes -> Errno? in
                do throws(Errno) { try file.writeAll(bytes) } catch { return error }
                return nil
            }
            if let failure { throw failure }
        } catch {
            throw .io(path, error)
        }
    }
}
