// `seek T`'s time, read without FFmpeg: the duration branch of libavutil's `av_parse_time`
// (parseutils.c), so that `framesrv ctl NAME seek T` takes exactly what `-ss T` takes.
// FrameMediaTests' durationTextIsFFmpegs holds the two to the same answers.

/// Parses a duration as `av_parse_time(&us, text, 1)` does: seconds (`1.5`, `90s`, `250ms`,
/// `40us`) or `[-][HH:]MM:SS[.m...]`; microseconds, nil if it is not a duration (or overflows).
///
/// The corresponding C function is `av_parse_time`, with `duration` 1.
public func parseDuration(_ text: String) -> Int64? {
    var scan = DurationScanner(bytes: Array(text.utf8.prefix { $0 != 0 }))
    let negative = scan.skip("-")
    guard let whole = scan.clock(hours: true) ?? scan.clock(hours: false) ?? scan.integer() else { return nil }
    var micro = scan.fraction()
    var scale: Int64 = 1_000_000
    if scan.skip("ms") { scale = 1000; micro /= 1000 }
    else if scan.skip("us") { scale = 1; micro = 0 }
    else { _ = scan.skip("s") }
    guard scan.atEnd else { return nil }
    let (scaled, overflow) = whole.multipliedReportingOverflow(by: scale)
    guard !overflow, Int64.max - micro >= scaled else { return nil }
    let t = scaled + micro
    guard !(negative && t == .min) else { return nil }
    return negative ? -t : t
}

/// A cursor over a duration's bytes (the C string `av_parse_time` reads).
private struct DurationScanner {
    let bytes: [UInt8]
    var at = 0

    var atEnd: Bool { at >= bytes.count }

    func byte(_ i: Int) -> UInt8 { i < bytes.count ? bytes[i] : 0 }

    static func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    /// Consumes `word` when the text continues with it.
    mutating func skip(_ word: String) -> Bool {
        let w = Array(word.utf8)
        guard (0..<w.count).allSatisfy({ byte(at + $0) == w[$0] }) else { return false }
        at += w.count
        return true
    }

    /// `date_get_num`: at most `digits` digits, at most `max`; nil (nothing consumed) otherwise.
    mutating func number(digits: Int, max: Int) -> Int? {
        var value = 0, i = at
        while i - at < digits, Self.isDigit(byte(i)) { value = value * 10 + Int(byte(i) - 0x30); i += 1 }
        guard i > at, value <= max else { return nil }
        at = i
        return value
    }

    /// `av_small_strptime` with `%J:%M:%S` (`hours`) or `%M:%S`: seconds; nothing consumed when it does not match.
    mutating func clock(hours: Bool) -> Int64? {
        var s = self
        var h = 0
        if hours {
            guard let v = s.number(digits: 4, max: Int(Int32.max)), s.skip(":") else { return nil }
            h = v
        }
        guard let m = s.number(digits: 2, max: 59), s.skip(":"), let sec = s.number(digits: 2, max: 59) else { return nil }
        self = s
        return Int64(h * 3600 + m * 60 + sec)
    }

    /// `strtoll(p, &end, 10)`: spaces, a sign, digits; nil when no digit follows or it overflows.
    mutating func integer() -> Int64? {
        var i = at
        while [0x20, 0x09, 0x0a, 0x0b, 0x0c, 0x0d].contains(byte(i)) { i += 1 }
        let minus = byte(i) == 0x2d
        if minus || byte(i) == 0x2b { i += 1 }
        guard Self.isDigit(byte(i)) else { return nil }
        var magnitude: UInt64 = 0
        while Self.isDigit(byte(i)) {
            let (times10, o1) = magnitude.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times10.addingReportingOverflow(UInt64(byte(i) - 0x30))
            guard !o1, !o2 else { return nil }
            magnitude = sum
            i += 1
        }
        guard magnitude <= (minus ? UInt64(Int64.max) + 1 : UInt64(Int64.max)) else { return nil }
        at = i
        return minus ? Int64(truncatingIfNeeded: 0 &- magnitude) : Int64(magnitude)
    }

    /// The `.m...` part: up to six digits as microseconds, the rest skipped.
    mutating func fraction() -> Int64 {
        guard skip(".") else { return 0 }
        var micro: Int64 = 0, unit: Int64 = 100_000
        while unit >= 1, Self.isDigit(byte(at)) { micro += unit * Int64(byte(at) - 0x30); unit /= 10; at += 1 }
        while Self.isDigit(byte(at)) { at += 1 }
        return micro
    }
}

/// The one bound on a time that arrives from outside (a command line's -ss, -t, --snapshot, a
/// control socket's `seek T`): at most a year either way. In microseconds that leaves every
/// later conversion (to nanoseconds, plus a file's start or a recording's offsets, times a
/// time base) far inside Int64, so no arithmetic on it can trap.
public enum TimeBound {
    /// 365 days, in microseconds.
    public static let maxMicros: Int64 = 365 * 86_400 * 1_000_000

    /// `micros` when it is within the bound, else nil.
    public static func checked(_ micros: Int64) -> Int64? { micros.magnitude <= UInt64(maxMicros) ? micros : nil }

    /// What a refusal says after the value: "out of range (at most 365 days, 8760:00:00)".
    public static let refusal = "out of range (a time is at most 365 days, 8760:00:00)"
}
