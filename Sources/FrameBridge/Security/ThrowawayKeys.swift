/// A receiver's and a sender's key pairs and an allow-list holding the sender, written into a
/// directory: what `framesrv bench bridge` (encrypted vs --insecure) and tests need to run
/// both ends with CURVE without a keygen step.
public struct ThrowawayBridgeKeys: Sendable {
    /// `recv --key`: the receiver's secret certificate.
    public let receiverSecret: String
    /// `send --server-key`: the receiver's public certificate.
    public let receiverPublic: String
    /// `send --key`: the sender's secret certificate.
    public let senderSecret: String
    /// `recv --allow`: the sender's public key, one line.
    public let allowList: String

    /// Writes receiver.key(_secret), sender.key(_secret) and allowed-senders in `directory`
    /// (which must exist; existing files are not overwritten).
    public init(directory: String) throws(BridgeSecurityError) {
        let (_, receiver) = try CurveCertificate.generate(basename: directory + "/receiver")
        let (sender, senderPaths) = try CurveCertificate.generate(basename: directory + "/sender")
        receiverSecret = receiver.secretFile
        receiverPublic = receiver.publicFile
        senderSecret = senderPaths.secretFile
        allowList = directory + "/allowed-senders"
        try writeNew(allowList, "\(sender.publicKey.z85) bench-sender\n", mode: 0o644)
    }

    /// `recv`'s security options for these keys.
    public var receiverArguments: [String] { ["--key", receiverSecret, "--allow", allowList] }
    /// `send`'s security options for these keys.
    public var senderArguments: [String] { ["--key", senderSecret, "--server-key", receiverPublic] }
}
