import FrameBridge

/// `framesrv bridge send/recv`'s security options: `--key FILE`, `--server-key FILE`,
/// `--allow FILE`, `--insecure`. Parsing checks only the arguments; the files are read (and
/// their permissions checked) by `BridgeSecurity.receiver/sender`.
struct BridgeSecurityOptions: Equatable {
    /// --key: this end's secret certificate (NAME.key_secret from 'framesrv bridge keygen').
    var keyFile: String?
    /// --server-key: the receiver's public certificate (send only).
    var serverKeyFile: String?
    /// --allow: the allow-list of sender public keys (recv only).
    var allowList: String?
    /// --insecure: plaintext, no authentication.
    var insecure = false

    static let help = """
      --key FILE           this end's secret certificate, NAME.key_secret from 'framesrv bridge
                           keygen -o NAME' (refused if group or others may read it, as ssh does)
      --server-key FILE    send: the receiver's public certificate (its NAME.key)
      --allow FILE         recv: the senders allowed in, one public key (Z85, 40 characters) a
                           line, an optional name after it, '#' comments; others are refused and
                           logged with their address (refused if group or others may write it);
                           SIGHUP re-reads it (connected senders stay)
      --insecure           plaintext, unauthenticated (ZeroMQ's NULL mechanism) instead of
                           CURVE; on a non-loopback address a warning is printed
    """

    /// Takes the security options out of `args`; `role` is "send" or "recv".
    init(_ args: inout Arguments, role: String) throws(UsageError) {
        keyFile = try args.value("--key")
        serverKeyFile = try args.value("--server-key")
        allowList = try args.value("--allow")
        insecure = args.flag("--insecure")
        if role == "send", allowList != nil {
            throw UsageError("--allow goes with 'bridge recv' (the receiver decides which senders are allowed)")
        }
        if role == "recv", serverKeyFile != nil {
            throw UsageError("--server-key goes with 'bridge send' (the receiver is the CURVE server: its own key is --key)")
        }
        for (option, value) in [("--key", keyFile), ("--server-key", serverKeyFile), ("--allow", allowList)] where value == "" {
            throw UsageError("\(option) needs a file, not an empty string")
        }
    }

    /// The receiver's security, from the files (one error line each: see BridgeSecurityError).
    func receiver(endpoint: String) throws(BridgeSecurityError) -> BridgeSecurity {
        try BridgeSecurity.receiver(keyFile: keyFile, allowList: allowList, insecure: insecure, endpoint: endpoint)
    }

    /// The sender's security, from the files.
    func sender(endpoint: String) throws(BridgeSecurityError) -> BridgeSecurity {
        try BridgeSecurity.sender(keyFile: keyFile, serverKeyFile: serverKeyFile, insecure: insecure, endpoint: endpoint)
    }
}

/// `framesrv bridge keygen`'s options.
struct BridgeKeygenOptions: CommandOptions {
    /// -o: the files' base name (NAME.key and NAME.key_secret).
    var basename = "bridge"

    init(parsing arguments: [String]) throws(UsageError) {
        var args = Arguments(arguments, command: "bridge keygen")
        let output = try args.value("-o", "--output")
        try args.finish()
        if let output {
            guard !output.isEmpty, !output.hasSuffix("/") else {
                throw UsageError("-o takes a base name (NAME: writes NAME.key and NAME.key_secret), not '\(output)'")
            }
            basename = output
        }
    }
}
