import FrameBridge

/// `framesrv bridge keygen`: a CURVE key pair in czmq's certificate format.
enum BridgeKeygenCommand {
    static let help = """
    usage: framesrv bridge keygen [-o NAME]

    Makes a CURVE key pair (libzmq's zmq_curve_keypair, libsodium) and writes it as czmq's
    zcert and pyzmq's zmq.auth write certificates:
      NAME.key          the public certificate: give it to the other end
                        (a receiver's: the sender's --server-key; a sender's: its public key
                        goes on the receiver's --allow list, one line)
      NAME.key_secret   the secret certificate (mode 0600): this end's --key; keep it here
    An existing file is never overwritten. The public key is printed on standard output.

      -o NAME              the files' base name (default: bridge, in the current directory)
    """

    /// Parses, writes the key files and prints where they are; returns the exit status.
    static func run(_ arguments: [String]) throws -> ExitStatus {
        if Arguments(arguments, command: "bridge keygen").wantsHelp {
            print(help)
            return .success
        }
        let options = try BridgeKeygenOptions(parsing: arguments)
        let (cert, paths) = try CurveCertificate.generate(basename: options.basename)
        print("\(cert.publicKey.z85)")
        warn("bridge keygen: wrote \(paths.publicFile) (public) and \(paths.secretFile) (secret, 0600)")
        return .success
    }
}
