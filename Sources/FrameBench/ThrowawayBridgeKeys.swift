import FrameBridge

/// A receiver's and a sender's key pairs and an allow-list holding the sender, written into a
/// directory: what `framesrv bench bridge` (encrypted vs --insecure) and the bridge's tests
/// need to run both ends with CURVE without a keygen step. Package-wide: no user of the
/// library needs throwaway keys.
package struct ThrowawayBridgeKeys: Sendable {
    /// `recv --key`: the receiver's secret certificate.
    package let receiverSecret: String
    /// `send --server-key`: the receiver's package certificate.
    package let receiverPublic: String
    /// `send --key`: the sender's secret certificate.
    package let senderSecret: String
    /// `recv --allow`: the sender's package key, one line.
    package let allowList: String

    /// Writes receiver.key(_secret), sender.key(_secret) and allowed-senders in `directory`
    /// (which must exist; existing files are not overwritten).
    package init(directory: String) throws(BridgeSecurityError) {
        let (_, receiver) = try CurveCertificate.generate(basename: directory + "/receiver")
        let (sender, senderPaths) = try CurveCertificate.generate(basename: directory + "/sender")
        receiverSecret = receiver.secretFile
        receiverPublic = receiver.publicFile
        senderSecret = senderPaths.secretFile
        allowList = directory + "/allowed-senders"
        try writeNew(allowList, "\(sender.publicKey.z85) bench-sender\n", mode: 0o644)
    }

    /// `recv`'s security options for these keys.
    package var receiverArguments: [String] { ["--key", receiverSecret, "--allow", allowList] }
    /// `send`'s security options for these keys.
    package var senderArguments: [String] { ["--key", senderSecret, "--server-key", receiverPublic] }
}
