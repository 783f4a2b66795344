import CZMQ
import FrameServer
import Glibc

/// A CURVE key (public or secret) in Z85, the 40-character text form libzmq and czmq use.
public struct CurveKey: Sendable, Hashable, CustomStringConvertible {
    /// The 40 Z85 characters.
    public let z85: String

    /// Z85's alphabet (ZeroMQ RFC 32).
    static let alphabet = Set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#".utf8)

    /// Validates `text` as a Z85 key: nil with the reason when it is not one.
    ///
    /// The corresponding C function is `zmq_z85_decode`.
    public static func parse(_ text: some StringProtocol) -> Result<CurveKey, KeyError> {
        let utf8 = Array(text.utf8)
        guard utf8.count == 40 else { return .failure(KeyError("a CURVE key is 40 Z85 characters, this one has \(utf8.count)")) }
        guard utf8.allSatisfy(alphabet.contains) else { return .failure(KeyError("'\(text)' has a character outside Z85's alphabet")) }
        var bytes = [UInt8](repeating: 0, count: 32)
        guard zmq_z85_decode(&bytes, String(text)) != nil else { return .failure(KeyError("'\(text)' does not decode as Z85")) }
        return .success(CurveKey(z85: String(text)))
    }

    private init(z85: String) { self.z85 = z85 }

    /// Why a text is not a key.
    public struct KeyError: Error, Sendable {
        public let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    /// The 32 bytes the ZAP handler sees as the client's credentials.
    var binary: [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 32)
        _ = zmq_z85_decode(&bytes, z85)
        return bytes
    }

    /// The key of 32 binary bytes (a ZAP request's credentials frame).
    init?(binary: [UInt8]) {
        guard binary.count == 32 else { return nil }
        var text = [CChar](repeating: 0, count: 41)
        guard zmq_z85_encode(&text, binary, 32) != nil else { return nil }
        z85 = cText(text)
    }

    /// The public key belonging to this secret key.
    ///
    /// The corresponding C function is `zmq_curve_public`.
    var derivedPublic: CurveKey? {
        var text = [CChar](repeating: 0, count: 41)
        guard zmq_curve_public(&text, z85) == 0 else { return nil }
        return CurveKey(z85: cText(text))
    }

    /// A new key pair from libsodium.
    ///
    /// The corresponding C function is `zmq_curve_keypair`.
    static func keypair() throws(BridgeSecurityError) -> (public: CurveKey, secret: CurveKey) {
        var pub = [CChar](repeating: 0, count: 41), sec = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&pub, &sec) == 0 else {
            throw .zeromq("make a CURVE key pair", zmqErrorText())
        }
        return (CurveKey(z85: cText(pub)), CurveKey(z85: cText(sec)))
    }

    /// A short form for logs: the first 8 characters.
    public var description: String { String(z85.prefix(8)) + "..." }
}

/// The text of a NUL-terminated C buffer libzmq filled.
func cText(_ buffer: [CChar]) -> String {
    let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
    return String(decoding: bytes, as: UTF8.self)
}
