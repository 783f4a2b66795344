import Glibc

/// The access token of `framesrv web`: given, or random (printed at start, as Jupyter does).
public struct WebToken: Sendable, Equatable {
    public let value: String

    public init(_ value: String) { self.value = value }

    /// 24 random bytes, as 48 hex digits.
    public static func random() -> WebToken {
        // SystemRandomNumberGenerator is getrandom(2) on Linux: fit for secrets.
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<24).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return WebToken(bytes.map { b in String(b, radix: 16).leftPadded(2) }.joined())
    }

    /// Whether `candidate` is the token, in time that depends on the token's length only.
    public func matches(_ candidate: String?) -> Bool {
        guard let candidate else { return false }
        let a = Array(value.utf8), b = Array(candidate.utf8)
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<a.count { difference |= a[i] ^ (i < b.count ? b[i] : 0) }
        return difference == 0
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
