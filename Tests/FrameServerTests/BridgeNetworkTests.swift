import CZMQ
import FrameBridge
import Foundation
import Glibc
import Testing

/// The bridge's CURVE keys, allow-list and ZAP handler, in process (libzmq sockets of this
/// test's own), and the one-line errors of bad key files.
@Suite("Bridge security: keys, allow-list, ZAP")
struct BridgeSecurityTests {
    @Test("keygen writes czmq certificates, the secret one 0600, and refuses to overwrite")
    func keygen() throws {
        let scratch = try Scratch()
        let (cert, paths) = try CurveCertificate.generate(basename: scratch.file("node"))
        #expect(paths.publicFile == scratch.file("node.key") && paths.secretFile == scratch.file("node.key_secret"))
        var st = stat()
        #expect(stat(paths.secretFile, &st) == 0 && st.st_mode & 0o777 == 0o600)
        let secretText = try String(contentsOfFile: paths.secretFile, encoding: .utf8)
        #expect(secretText.contains("curve\n    public-key = \"\(cert.publicKey.z85)\"\n    secret-key = \""))
        #expect(!(try String(contentsOfFile: paths.publicFile, encoding: .utf8)).contains("secret-key"))
        #expect(try CurveCertificate.readSecret(paths.secretFile) == cert)
        #expect(try CurveCertificate.readPublic(paths.publicFile) == cert.publicKey)
        #expect(throws: BridgeSecurityError.exists(path: paths.secretFile)) { try CurveCertificate.generate(basename: scratch.file("node")) }
        #expect((try String(contentsOfFile: paths.secretFile, encoding: .utf8)) == secretText)
    }

    @Test("bad key files and allow-lists: one line naming the file and the reason")
    func badFiles() throws {
        let scratch = try Scratch()
        let (_, paths) = try CurveCertificate.generate(basename: scratch.file("k"))
        chmod(paths.secretFile, 0o640)
        expectError(try CurveCertificate.readSecret(paths.secretFile), contains: ["\(paths.secretFile): mode 640", "chmod 600"])
        chmod(paths.secretFile, 0o600)
        expectError(try CurveCertificate.readSecret(paths.publicFile), contains: ["no secret-key"])
        expectError(try CurveCertificate.readSecret(scratch.file("none")), contains: ["none: cannot read: No such file"])
        let bad = scratch.file("bad.key")
        try "curve\n    public-key = \"tooshort\"\n".write(toFile: bad, atomically: false, encoding: .utf8)
        expectError(try CurveCertificate.readPublic(bad), contains: ["bad.key: line 2: public-key: a CURVE key is 40 Z85 characters"])
        try "hello\n".write(toFile: bad, atomically: false, encoding: .utf8)
        expectError(try CurveCertificate.readPublic(bad), contains: ["no public-key"])
        let list = scratch.file("allowed")
        let key = try CurveCertificate.readPublic(paths.publicFile).z85
        try "# senders\n\(key) camera-1\n\n\(key.dropLast())\" oops\n".write(toFile: list, atomically: false, encoding: .utf8)
        chmod(list, 0o644)
        expectError(try AllowList(path: list), contains: ["allowed:4: '"])
        try "# nobody\n".write(toFile: list, atomically: false, encoding: .utf8)
        expectError(try AllowList(path: list), contains: ["holds no client keys"])
        try "\(key) camera-1\n".write(toFile: list, atomically: false, encoding: .utf8)
        chmod(list, 0o666)
        expectError(try AllowList(path: list), contains: ["mode 666", "chmod go-w"])
        chmod(list, 0o644)
        #expect(try AllowList(path: list).entries.values.map { $0 } == ["camera-1"])
    }

    @Test("no keys and no --insecure is refused with how to make keys; --insecure with keys is refused")
    func insecureRules() throws {
        expectError(try BridgeSecurity.receiver(keyFile: nil, allowList: nil, insecure: false, endpoint: "tcp://127.0.0.1:5000"),
                    contains: ["framesrv bridge keygen", "--insecure"])
        expectError(try BridgeSecurity.sender(keyFile: nil, serverKeyFile: nil, insecure: false, endpoint: "tcp://10.0.0.1:5000"),
                    contains: ["framesrv bridge keygen", "--server-key", "--insecure"])
        expectError(try BridgeSecurity.sender(keyFile: "a", serverKeyFile: nil, insecure: true, endpoint: "tcp://127.0.0.1:5000"),
                    contains: ["not both"])
        expectError(try BridgeSecurity.receiver(keyFile: "a", allowList: nil, insecure: false, endpoint: "tcp://127.0.0.1:5000"),
                    contains: ["missing --allow"])
        #expect(try !BridgeSecurity.receiver(keyFile: nil, allowList: nil, insecure: true, endpoint: "tcp://127.0.0.1:5000").isEncrypted)
    }

    @Test("CURVE over TCP: an allowed sender's message arrives; an unknown key is refused by the ZAP handler and nothing arrives")
    func zap() throws {
        let scratch = try Scratch()
        let keys = try ThrowawayBridgeKeys(directory: scratch.path)
        let (_, stranger) = try CurveCertificate.generate(basename: scratch.file("stranger"))
        let receiver = try BridgeSecurity.receiver(keyFile: keys.receiverSecret, allowList: keys.allowList, insecure: false,
                                                   endpoint: "tcp://127.0.0.1:0")
        let allowed = try BridgeSecurity.sender(keyFile: keys.senderSecret, serverKeyFile: keys.receiverPublic, insecure: false,
                                                endpoint: "tcp://127.0.0.1:0")
        let refused = try BridgeSecurity.sender(keyFile: stranger.secretFile, serverKeyFile: keys.receiverPublic, insecure: false,
                                                endpoint: "tcp://127.0.0.1:0")
        let context = zmq_ctx_new()!
        defer { zmq_ctx_term(context) }
        let pull = try socket(context, ZMQ_PULL)
        defer { zmq_close(pull) }
        try receiver.apply(to: pull, context: context)
        #expect(zmq_bind(pull, "tcp://127.0.0.1:*") == 0)
        var endpoint = [CChar](repeating: 0, count: 256), size = 256
        zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, &endpoint, &size)
        var pushes: [UnsafeMutableRawPointer] = []
        defer { pushes.forEach { zmq_close($0) } }
        for (security, text) in [(refused, "stranger"), (allowed, "friend")] {
            let push = try socket(context, ZMQ_PUSH)
            pushes.append(push)
            try security.apply(to: push, context: context)
            #expect(zmq_connect(push, endpoint) == 0)
            #expect(zmq_send(push, text, text.utf8.count, ZMQ_DONTWAIT) >= 0 || zmq_errno() == EAGAIN)
        }
        // The friend's message arrives; the stranger's never does (its handshake was refused).
        var got: [String] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        var timeout: Int32 = 1500
        zmq_setsockopt(pull, ZMQ_RCVTIMEO, &timeout, 4)
        while got.count < 2 {
            let n = zmq_recv(pull, &buffer, buffer.count, 0)
            guard n >= 0 else { break }
            got.append(String(decoding: buffer[..<Int(n)], as: UTF8.self))
        }
        #expect(got == ["friend"])
    }

    private func socket(_ context: UnsafeMutableRawPointer, _ type: Int32) throws -> UnsafeMutableRawPointer {
        guard let s = zmq_socket(context, type) else { throw TestFailure("zmq_socket failed") }
        var linger: Int32 = 0
        zmq_setsockopt(s, ZMQ_LINGER, &linger, 4)
        return s
    }
}

/// Expects `body` to throw a BridgeSecurityError whose one line contains each of `parts`.
func expectError<T>(_ body: @autoclosure () throws -> T, contains parts: [String], sourceLocation: SourceLocation = #_sourceLocation) {
    do {
        _ = try body()
        Issue.record("no error; expected one containing \(parts)", sourceLocation: sourceLocation)
    } catch {
        let line = "\(error)"
        #expect(!line.contains("\n"), "\(line)", sourceLocation: sourceLocation)
        for part in parts { #expect(line.contains(part), "'\(line)' lacks '\(part)'", sourceLocation: sourceLocation) }
    }
}
