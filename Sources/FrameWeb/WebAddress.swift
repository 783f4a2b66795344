import Glibc

/// What `framesrv web` can refuse: one line each.
public enum WebError: Error, CustomStringConvertible, Sendable {
    /// A `--listen` that is not `HOST:PORT` with a numeric IPv4 or bracketed IPv6 host.
    case badAddress(String)
    /// A non-loopback address without a token.
    case tokenRequired(String)
    /// libmicrohttpd could not start (port in use, no permission, ...).
    case cannotListen(String)

    public var description: String {
        switch self {
        case .badAddress(let s):
            return "--listen must be HOST:PORT with a numeric host (127.0.0.1:8080, 0.0.0.0:8080, [::1]:8080), not '\(s)'"
        case .tokenRequired(let s):
            return "--listen \(s) is not a loopback address: anyone who can reach it would see your streams; "
                + "add --token (a random token is printed) or --token TOKEN"
        case .cannotListen(let s):
            return s
        }
    }
}

/// The address `framesrv web` listens on: a numeric IPv4 or IPv6 host and a port.
public struct WebAddress: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: UInt16
    public let ipv6: Bool

    public static let defaultAddress = WebAddress(host: "127.0.0.1", port: 8080, ipv6: false)

    /// `127.0.0.1:8080`, `0.0.0.0:80`, `[::1]:8080`; `localhost:PORT` is 127.0.0.1.
    public static func parse(_ text: String) throws(WebError) -> WebAddress {
        guard let colon = text.lastIndex(of: ":"), let port = UInt16(text[text.index(after: colon)...]) else {
            throw .badAddress(text)
        }
        var host = String(text[..<colon])
        var ipv6 = false
        if host.hasPrefix("["), host.hasSuffix("]"), host.count > 2 {
            host = String(host.dropFirst().dropLast())
            ipv6 = true
        }
        if host == "localhost" { host = "127.0.0.1" }
        var buffer = in6_addr()
        guard inet_pton(ipv6 ? AF_INET6 : AF_INET, host, &buffer) == 1 else { throw .badAddress(text) }
        return WebAddress(host: host, port: port, ipv6: ipv6)
    }

    /// 127.0.0.0/8 or ::1 (and ::ffff:127.x.y.z): only this machine can connect.
    public var isLoopback: Bool {
        if ipv6 { return host == "::1" || host.lowercased().hasPrefix("::ffff:127.") }
        return host.hasPrefix("127.")
    }

    /// The wildcard address: every interface.
    public var isWildcard: Bool { host == "0.0.0.0" || host == "::" }

    public var description: String { ipv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// The host part of a URL to this address (a wildcard reads as this machine's loopback).
    public var urlHost: String {
        if isWildcard { return ipv6 ? "[::1]" : "127.0.0.1" }
        return ipv6 ? "[\(host)]" : host
    }
}
