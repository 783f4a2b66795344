import FrameServer

/// Why a filter graph cannot run (one clear line each).
public enum FilterError: Error, CustomStringConvertible, Sendable {
    /// libavfilter rejected the graph text: syntax, an unknown filter, a bad option (the
    /// graph, libavfilter's message).
    case invalidGraph(String, String)
    /// The graph is not one video input to one video output (the graph, what it has).
    case notAVideoGraph(String, String)
    /// The graph is not one audio input to one audio output (the graph, what it has).
    case notAnAudioGraph(String, String)
    /// The graph cannot be configured for the stream's frames (graph, input, message).
    case cannotConfigure(String, String, String)
    /// The stream's frames are in a pixel format FFmpeg does not know.
    case unknownPixelFormat(String)
    /// The graph made frames in a pixel format framesrv cannot carry.
    case unsupportedOutput(String)
    /// An FFmpeg call failed (its name and FFmpeg's message).
    case ffmpeg(String, String)
    /// The frame's planes do not hold what FFmpeg reads for its pixel format (a damaged frame).
    case layout(FrameLayoutError)

    public var description: String {
        switch self {
        case .invalidGraph(let g, let m): return "bad filter graph '\(g)': \(m)"
        case .notAVideoGraph(let g, let m): return "the filter graph '\(g)' must take one video input and make one video output; \(m)"
        case .notAnAudioGraph(let g, let m): return "the filter graph '\(g)' must take one audio input and make one audio output; \(m)"
        case .cannotConfigure(let g, let input, let m): return "the filter graph '\(g)' cannot filter \(input) frames: \(m)"
        case .unknownPixelFormat(let name): return "frames in pixel format '\(name)' cannot be filtered (FFmpeg does not know it)"
        case .unsupportedOutput(let name): return "the filter graph made \(name) frames, which framesrv cannot carry"
        case .ffmpeg(let call, let m): return "FFmpeg's \(call) failed: \(m)"
        case .layout(let e): return e.description
        }
    }
}
