import CZMQ
import FrameServer
import Glibc

/// How one end of a bridge secures its ZeroMQ socket: CURVE (encryption and authentication,
/// libzmq's own, on libsodium) by default, plaintext (ZeroMQ's NULL mechanism) only with
/// `--insecure`.
///
/// The receiver is always the CURVE server, whichever side binds: it holds its secret key
/// and accepts only the client keys on its allow-list (a ZAP handler). The sender is the CURVE
/// client: its own key pair and the receiver's public key.
///
/// `--insecure` is the only way to plaintext: no keys and no `--insecure` is an error, never a
/// fallback. Plaintext on a non-loopback address is refused unless `--insecure` is given
/// (it is then allowed, with a one-line warning that anyone on the path can read and inject frames).
public struct BridgeSecurity: Sendable {
    enum Mode: Sendable {
        case plaintext
        case curveServer(CurveCertificate, AllowList)
        case curveClient(CurveCertificate, serverKey: CurveKey)
    }
    let mode: Mode
    /// The ZAP domain the receiver's sockets authenticate in (also makes libzmq consult ZAP).
    static let zapDomain = "framesrv-bridge"

    /// True when frames travel encrypted and authenticated.
    public var isEncrypted: Bool {
        if case .plaintext = mode { return false }
        return true
    }

    /// The receiver's security: its secret certificate (`--key`) and the allowed senders
    /// (`--allow`), or plaintext with `insecure`.
    public static func receiver(keyFile: String?, allowList: String?, insecure: Bool, endpoint: String) throws(BridgeSecurityError) -> BridgeSecurity {
        if insecure {
            guard keyFile == nil, allowList == nil else { throw .conflictingInsecure }
            warnIfExposed(endpoint)
            return BridgeSecurity(mode: .plaintext)
        }
        guard keyFile != nil || allowList != nil else { throw .noKeys(role: "recv") }
        guard let keyFile else { throw .missingKey(option: "--key NAME.key_secret", what: "the receiver's secret certificate") }
        guard let allowList else { throw .missingKey(option: "--allow FILE", what: "the public keys of the senders allowed in") }
        return BridgeSecurity(mode: .curveServer(try CurveCertificate.readSecret(keyFile), try AllowList(path: allowList)))
    }

    /// The sender's security: its secret certificate (`--key`) and the receiver's public key
    /// (`--server-key`), or plaintext with `insecure`.
    public static func sender(keyFile: String?, serverKeyFile: String?, insecure: Bool, endpoint: String) throws(BridgeSecurityError) -> BridgeSecurity {
        if insecure {
            guard keyFile == nil, serverKeyFile == nil else { throw .conflictingInsecure }
            warnIfExposed(endpoint)
            return BridgeSecurity(mode: .plaintext)
        }
        guard keyFile != nil || serverKeyFile != nil else { throw .noKeys(role: "send") }
        guard let keyFile else { throw .missingKey(option: "--key NAME.key_secret", what: "the sender's secret certificate") }
        guard let serverKeyFile else { throw .missingKey(option: "--server-key RECEIVER.key", what: "the receiver's public certificate") }
        let own = try CurveCertificate.readSecret(keyFile)
        return BridgeSecurity(mode: .curveClient(own, serverKey: try CurveCertificate.readPublic(serverKeyFile)))
    }

    /// Sets CURVE (or, --insecure, NULL) options on `socket` before bind/connect; the
    /// receiver's also starts the ZAP handler on `context` (once per context). The receiver
    /// is always the CURVE server, whichever side binds or connects.
    ///
    /// The corresponding C function is `zmq_setsockopt` (ZMQ_CURVE_SERVER, ZMQ_CURVE_SECRETKEY,
    /// ZMQ_CURVE_PUBLICKEY, ZMQ_CURVE_SERVERKEY, ZMQ_ZAP_DOMAIN).
    public func apply(to socket: UnsafeMutableRawPointer, context: UnsafeMutableRawPointer) throws(BridgeSecurityError) {
        switch mode {
        case .plaintext:
            return
        case .curveServer(let cert, let allowList):
            try ZAPHandler.start(context: context, allowList: allowList)
            try set(socket, ZMQ_ZAP_DOMAIN, Self.zapDomain, "ZMQ_ZAP_DOMAIN")
            try setInt(socket, ZMQ_CURVE_SERVER, 1, "ZMQ_CURVE_SERVER")
            try set(socket, ZMQ_CURVE_SECRETKEY, cert.secretKey!.z85, "ZMQ_CURVE_SECRETKEY")
        case .curveClient(let cert, let serverKey):
            try set(socket, ZMQ_CURVE_SERVERKEY, serverKey.z85, "ZMQ_CURVE_SERVERKEY")
            try set(socket, ZMQ_CURVE_PUBLICKEY, cert.publicKey.z85, "ZMQ_CURVE_PUBLICKEY")
            try set(socket, ZMQ_CURVE_SECRETKEY, cert.secretKey!.z85, "ZMQ_CURVE_SECRETKEY")
        }
    }

    /// One line for logs and `bridge` status: "CURVE" or "plaintext (--insecure)".
    public var summary: String { isEncrypted ? "CURVE" : "plaintext (--insecure)" }

    private func set(_ socket: UnsafeMutableRawPointer, _ option: Int32, _ value: String, _ name: String) throws(BridgeSecurityError) {
        // A Z85 key is set as its 40 characters (libzmq takes 32 binary or 40 Z85 bytes).
        let r = value.withCString { zmq_setsockopt(socket, option, $0, strlen($0)) }
        guard r == 0 else { throw .zeromq("set \(name)", zmqErrorText()) }
    }

    private func setInt(_ socket: UnsafeMutableRawPointer, _ option: Int32, _ value: Int32, _ name: String) throws(BridgeSecurityError) {
        var v = value
        guard zmq_setsockopt(socket, option, &v, MemoryLayout<Int32>.size) == 0 else {
            throw .zeromq("set \(name)", zmqErrorText())
        }
    }

    /// Warns once (one line on standard error) when plaintext goes beyond this host.
    static func warnIfExposed(_ endpoint: String) {
        guard !BridgeEndpointHost.isLoopback(endpoint) else { return }
        logLine("framesrv bridge: warning: --insecure on \(endpoint), not a loopback address: frames travel in plaintext, unauthenticated")
    }
}

/// The host part of a bridge endpoint, for the loopback rule.
enum BridgeEndpointHost {
    /// True for tcp://127.x.x.x:P, tcp://localhost:P, tcp://[::1]:P (and ipc:// and inproc://,
    /// which never leave the host). A wildcard (`*`, 0.0.0.0, ::) or an interface name is not loopback.
    static func isLoopback(_ endpoint: String) -> Bool {
        if endpoint.hasPrefix("ipc://") || endpoint.hasPrefix("inproc://") { return true }
        guard endpoint.hasPrefix("tcp://") else { return false }
        var rest = Substring(endpoint.dropFirst(6))
        // tcp://SOURCE;HOST:PORT (a connect's source address): the destination decides.
        if let semicolon = rest.lastIndex(of: ";") { rest = rest[rest.index(after: semicolon)...] }
        guard let colon = rest.lastIndex(of: ":") else { return false }
        var host = rest[..<colon]
        if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
        if host == "localhost" || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }
}
