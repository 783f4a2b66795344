import Glibc

/// A request's Host header, parsed strictly (RFC 9110 7.2, RFC 3986 3.2.2): `host[:port]`, the
/// host a bracketed IPv6 address, a dotted-quad IPv4 address (no leading zeros, each part at
/// most 255) or a name of letters, digits, '-' and '.'; the port 1 to 65535 in at most five
/// digits. Nothing else: no userinfo (`127.0.0.1:80@evil.com`), nothing after the bracket
/// (`[::1]evil.com`), no empty port, no spaces (issue 26 item 11).
struct HostHeader: Equatable, Sendable {
    enum Host: Equatable, Sendable {
        case ipv4([UInt8])
        case ipv6([UInt8])
        /// A name, lowercased.
        case name(String)
    }

    let host: Host
    let port: UInt16?

    /// Nil unless `text` is exactly `host[:port]`.
    init?(_ text: String) {
        let hostText: Substring, portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            hostText = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.isEmpty || rest.hasPrefix(":") else { return nil }
            portText = rest.isEmpty ? nil : rest.dropFirst()
            guard let bytes = Self.ipv6(hostText) else { return nil }
            host = .ipv6(bytes)
        } else {
            let parts = text.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            hostText = parts[0]
            portText = parts.count == 2 ? parts[1] : nil
            guard let parsed = Self.ipv4OrName(hostText) else { return nil }
            host = parsed
        }
        if let portText {
            guard (1...5).contains(portText.count), portText.allSatisfy({ $0.isASCII && $0.isNumber }),
                  let p = UInt16(portText), p > 0 else { return nil }
            port = p
        } else {
            port = nil
        }
    }

    /// 127.0.0.0/8, ::1 (and ::ffff:127.x.y.z), or `localhost`: a name only this machine has.
    var isLoopback: Bool {
        switch host {
        case .ipv4(let b): return b[0] == 127
        case .ipv6(let b): return b == [UInt8](repeating: 0, count: 15) + [1] || (Array(b.prefix(12)) == Self.mapped && b[12] == 127)
        case .name(let n): return n == "localhost"
        }
    }

    private static let mapped: [UInt8] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]

    /// The sixteen bytes of an IPv6 address in brackets (no zone: '%' is not allowed in a Host).
    private static func ipv6(_ text: Substring) -> [UInt8]? {
        guard !text.isEmpty, text.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return nil }
        var address = in6_addr()
        guard inet_pton(AF_INET6, String(text), &address) == 1 else { return nil }
        return withUnsafeBytes(of: &address) { Array($0) }
    }

    /// A dotted-quad address, or else a name; nil for neither (a number that is not a dotted
    /// quad, such as `127.1`, is neither).
    private static func ipv4OrName(_ text: Substring) -> Host? {
        guard !text.isEmpty, text.count <= 253 else { return nil }
        if text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }) {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            let bytes = parts.compactMap { p -> UInt8? in (1...3).contains(p.count) && (p == "0" || !p.hasPrefix("0")) ? UInt8(p) : nil }
            return parts.count == 4 && bytes.count == 4 ? .ipv4(bytes) : nil
        }
        let allowed = text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }
        return allowed && !text.hasPrefix(".") && !text.hasPrefix("-") ? .name(text.lowercased()) : nil
    }
}
