import FrameServer

/// The verbs a producer's control socket may serve (`framesrv ctl NAME VERB`).
public enum ControlVerb: String, CaseIterable, Sendable {
    case pause, resume, toggle, seek, rate, step, status, snapshot

    /// What a file-reading producer serves (`produce -i FILE`, `replay`).
    public static let playback: [ControlVerb] = [.pause, .resume, .toggle, .seek, .rate, .step, .status]
}

/// Where `seek` goes: a media time (seconds from the input's start), or that far from the
/// current position (`seek +5`, `seek -5`).
public enum SeekTarget: Equatable, Sendable {
    case absolute(Double)
    case relative(Double)

    /// The media time this target means at `position`.
    public func resolved(from position: Double) -> Double {
        switch self {
        case .absolute(let t): return t
        case .relative(let d): return max(0, position + d)
        }
    }
}

/// One request to a control socket: one text message, as `framesrv ctl` sends it.
public enum ControlRequest: Equatable, Sendable {
    case pause, resume, toggle
    case seek(SeekTarget)
    /// Times real time (0.01 to 100); nil: max.
    case rate(Double?)
    case step(Int)
    case status
    case snapshot

    /// The rates `rate X` takes: 0.01 to 100 times real time.
    public static let rates: ClosedRange<Double> = 0.01...100

    /// The verb of this request.
    public var verb: ControlVerb {
        switch self {
        case .pause: .pause
        case .resume: .resume
        case .toggle: .toggle
        case .seek: .seek
        case .rate: .rate
        case .step: .step
        case .status: .status
        case .snapshot: .snapshot
        }
    }

    /// The wire text (`seek 12.5`, `seek +5`, `rate max`, `step 3`, ...).
    public var text: String {
        switch self {
        case .seek(.absolute(let t)): return "seek \(t)"
        case .seek(.relative(let d)): return "seek \(d >= 0 ? "+" : "")\(d)"
        case .rate(let r): return "rate \(r.map { "\($0)" } ?? "max")"
        case .step(let n): return "step \(n)"
        default: return verb.rawValue
        }
    }

    /// Parses a request's text: a verb and at most one argument, separated by spaces.
    public static func parse(_ text: String) throws(ControlRequestError) -> ControlRequest {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).map(String.init)
        guard let first = words.first else { throw .empty }
        guard let verb = ControlVerb(rawValue: first) else { throw .unknownVerb(first) }
        let argument = words.count > 1 ? words[1] : nil
        guard words.count <= 2 else { throw .badArgument(verb, words.dropFirst().joined(separator: " ")) }
        switch verb {
        case .seek:
            guard let argument else { throw .missingArgument(verb) }
            return .seek(try seekTarget(argument))
        case .rate:
            guard let argument else { throw .missingArgument(verb) }
            if argument == "max" { return .rate(nil) }
            guard let r = Double(argument), rates.contains(r) else { throw .badArgument(verb, argument) }
            return .rate(r)
        case .step:
            guard let argument else { return .step(1) }
            guard let n = Int(argument), (1...1_000_000).contains(n) else { throw .badArgument(verb, argument) }
            return .step(n)
        default:
            if let argument { throw .badArgument(verb, argument) }
            switch verb {
            case .pause: return .pause
            case .resume: return .resume
            case .toggle: return .toggle
            case .status: return .status
            default: return .snapshot
            }
        }
    }

    /// `T` as ffmpeg's -ss reads it, or `+T` / `-T` from the current position.
    private static func seekTarget(_ text: String) throws(ControlRequestError) -> SeekTarget {
        let sign = text.first
        let body = sign == "+" || sign == "-" ? String(text.dropFirst()) : text
        guard !body.hasPrefix("-"), !body.hasPrefix("+"), let parsed = parseDuration(body) else {
            throw .badArgument(.seek, text)
        }
        guard let us = TimeBound.checked(parsed) else { throw .outOfRange(.seek, text) }
        let seconds = Double(us) / 1e6
        switch sign {
        case "+": return .relative(seconds)
        case "-": return .relative(-seconds)
        default: return .absolute(seconds)
        }
    }
}

/// Why a control request's text is refused (the reply's one line).
public enum ControlRequestError: Error, Equatable, Sendable, CustomStringConvertible {
    case empty
    case unknownVerb(String)
    case missingArgument(ControlVerb)
    case badArgument(ControlVerb, String)
    /// A time past `TimeBound` (seek 9223372036854).
    case outOfRange(ControlVerb, String)

    /// The refusal's one line (what the reply says after `error`).
    public var description: String {
        switch self {
        case .empty: return "empty request; verbs: \(ControlVerb.allCases.map(\.rawValue).joined(separator: ", "))"
        case .unknownVerb(let v):
            return "unknown control '\(v)'; verbs: \(ControlVerb.allCases.map(\.rawValue).joined(separator: ", "))"
        case .missingArgument(let verb): return "\(verb.rawValue) needs \(Self.usage(verb))"
        case .badArgument(let verb, let a): return "\(verb.rawValue) takes \(Self.usage(verb)), not '\(a)'"
        case .outOfRange(let verb, let a): return "\(verb.rawValue) \(a): \(TimeBound.refusal)"
        }
    }

    static func usage(_ verb: ControlVerb) -> String {
        switch verb {
        case .seek: return "a time T (seconds or [HH:]MM:SS[.xxx]; +T / -T from the current position)"
        case .rate: return "a rate from 0.01 to 100 times real time, or max"
        case .step: return "a frame count from 1 to 1000000 (default 1)"
        default: return "no argument"
        }
    }
}

/// A control socket's reply: one line, `ok ...` or `error ...`, or a JSON object (status).
public enum ControlReply: Equatable, Sendable {
    case ok(String)
    case error(String)
    case json(String)

    /// The reply as sent.
    public var text: String {
        switch self {
        case .ok(let s): return s.isEmpty ? "ok" : "ok " + s
        case .error(let s): return "error " + s
        case .json(let s): return s
        }
    }

    /// Reads a reply as received (JSON when it starts with `{`).
    public init(text: String) {
        if text.hasPrefix("{") { self = .json(text) }
        else if text == "ok" { self = .ok("") }
        else if text.hasPrefix("ok ") { self = .ok(String(text.dropFirst(3))) }
        else if text.hasPrefix("error ") { self = .error(String(text.dropFirst(6))) }
        else { self = .error("unexpected reply '\(text)'") }
    }

    /// Whether the reply is `error ...`.
    public var isError: Bool { if case .error = self { return true } else { return false } }
}
