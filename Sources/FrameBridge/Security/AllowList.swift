import Glibc

/// The client public keys a receiver accepts: a text file, one Z85 key a line, an optional
/// name after it (`KEY camera-1`), `#` comments and blank lines ignored. Like ssh's
/// authorized_keys, a file others may change is refused.
public struct AllowList: Sendable, Equatable {
    /// Each allowed key and its name (empty when none is given).
    public let entries: [CurveKey: String]
    public let path: String

    public init(path: String) throws(BridgeSecurityError) {
        let (text, mode) = try readSmallFile(path)
        guard mode & 0o022 == 0 else {
            throw .badPermissions(path: path, mode: mode,
                                  reason: "an allow-list others may change is refused (as ssh's authorized_keys is): chmod go-w '\(path)'")
        }
        self.path = path
        entries = try Self.parse(text, path: path)
        guard !entries.isEmpty else {
            throw .malformed(path: path, reason: "holds no client keys: no sender could connect (add a line per client: its public key, from its NAME.key)")
        }
    }

    static func parse(_ text: String, path: String) throws(BridgeSecurityError) -> [CurveKey: String] {
        var entries: [CurveKey: String] = [:]
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = raw.trimmingSpaces
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let word = line.prefix { $0 != " " && $0 != "\t" }
            let name = line[word.endIndex...].trimmingSpaces
            switch CurveKey.parse(word) {
            case .success(let key): entries[key] = String(name)
            case .failure(let e): throw .allowListLine(path: path, line: index + 1, reason: e.reason + " (a line is a client's public key, then an optional name)")
            }
        }
        return entries
    }

    /// The allowed client's name ("" when unnamed), nil when `key` is not on the list.
    public func name(of key: CurveKey) -> String? { entries[key] }
}
