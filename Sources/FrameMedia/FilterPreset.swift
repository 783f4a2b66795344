import FrameServer
import Glibc

/// A ready-made filter graph (`framesrv filter --preset NAME`): what it is called on the
/// command line, and the libavfilter graph it stands for.
public enum FilterPreset: Sendable, Equatable {
    /// `gray`: format=gray.
    case gray
    /// `sepia`: colorchannelmixer with the classic sepia matrix.
    case sepia
    /// `blur=SIGMA`: gblur=sigma=SIGMA (the text as given, 0 to 1024).
    case blur(sigma: String)
    /// `rgb`: format=rgb24 (libavfilter's scale, with each frame's matrix and range).
    case rgb
    /// `blend=IMAGE:OPACITY`: IMAGE over the stream at OPACITY (the text as given, 0 to 1).
    case blend(image: String, opacity: String)

    /// Reads `NAME` or `NAME=ARGUMENT`; the error says which presets there are, or what the
    /// preset's argument must be.
    public init(parsing preset: String) throws(FilterPresetError) {
        let (name, argument) = preset.firstIndex(of: "=").map {
            (String(preset[..<$0]), String(preset[preset.index(after: $0)...]))
        } ?? (preset, nil)
        switch name {
        case "gray", "sepia", "rgb":
            guard argument == nil else { throw FilterPresetError("the preset '\(name)' takes no argument") }
            self = name == "gray" ? .gray : name == "sepia" ? .sepia : .rgb
        case "blur":
            guard let argument, let sigma = Double(argument), sigma.isFinite, sigma >= 0, sigma <= 1024 else {
                throw FilterPresetError("the preset blur takes a sigma from 0 to 1024: blur=SIGMA (for example blur=4), not '\(preset)'")
            }
            self = .blur(sigma: argument)
        case "blend":
            guard let argument, let colon = argument.lastIndex(of: ":"),
                  case let image = String(argument[..<colon]), !image.isEmpty,
                  case let opacity = String(argument[argument.index(after: colon)...]),
                  let value = Double(opacity), value >= 0, value <= 1 else {
                throw FilterPresetError("the preset blend takes an image and an opacity from 0 to 1: blend=IMAGE:OPACITY (for example blend=logo.png:0.5), not '\(preset)'")
            }
            self = .blend(image: image, opacity: opacity)
        default:
            throw FilterPresetError("unknown preset '\(preset)'; presets are gray, sepia, blur=SIGMA, rgb, blend=IMAGE:OPACITY (see 'framesrv filter --help')")
        }
    }

    /// The libavfilter graph, in ffmpeg's -vf syntax (one video input, one video output).
    public var graph: String {
        switch self {
        case .gray: return "format=gray"
        case .sepia: return "colorchannelmixer=.393:.769:.189:0:.349:.686:.168:0:.272:.534:.131"
        case .rgb: return "format=rgb24"
        case .blur(let sigma): return "gblur=sigma=\(sigma)"
        case .blend(let image, let opacity):
            return "movie=\(Self.escapeForGraph(Self.escapeForOption(image))),format=rgba,colorchannelmixer=aa=\(opacity)[framesrv_blend];"
                + "[in][framesrv_blend]overlay"
        }
    }

    /// The image the graph reads (blend), if any.
    public var image: String? {
        if case .blend(let image, _) = self { return image }
        return nil
    }

    /// libavfilter's first level of quoting: an option value (`\`, `'` and `:` escaped).
    public static func escapeForOption(_ s: String) -> String { escape(s, "\\':") }
    /// The second level: a filter's arguments inside a graph.
    public static func escapeForGraph(_ s: String) -> String { escape(s, "\\'[],;") }
    private static func escape(_ s: String, _ special: String) -> String {
        var out = ""
        for c in s {
            if special.contains(c) { out.append("\\") }
            out.append(c)
        }
        return out
    }
}

/// A preset that is not one, or whose argument is wrong (one line: what the presets are,
/// or what the argument must be).
public struct FilterPresetError: Error, CustomStringConvertible, Sendable, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// A blend image that cannot be read or decoded (one line: the image, why).
public struct BlendImageError: Error, CustomStringConvertible, Sendable {
    public let image: String
    public let reason: String
    public init(image: String, reason: String) {
        self.image = image
        self.reason = reason
    }
    public var description: String { "cannot use '\(image)' as the blend image: \(reason)" }

    /// The blend image must decode now: libavfilter's movie source would only fail at the first frame.
    public static func check(_ image: String) throws(BlendImageError) {
        guard access(image, R_OK) == 0 else {
            throw BlendImageError(image: image, reason: String(cString: strerror(errno)))
        }
        let decoder: MediaDecoder
        do { decoder = try MediaDecoder(input: image) } catch { throw BlendImageError(image: image, reason: error.description) }
        switch decoder.next() {
        case .none: throw BlendImageError(image: image, reason: "no picture decodes from it")
        case .some: break
        }
    }
}
