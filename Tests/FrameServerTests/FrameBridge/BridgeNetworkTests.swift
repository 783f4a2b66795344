import CZMQ
import FrameBench
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

/// Two hosts (network namespaces, see NetworkPair), each with its own FRAMESRV_DIR, and
/// throwaway CURVE keys: A runs the producer and `bridge send`, B `bridge recv` and a sink.
final class BridgeHosts: @unchecked Sendable {
    let pair: NetworkPair
    let a: Scratch, b: Scratch
    let keys: ThrowawayBridgeKeys
    static let port = 47_314
    var listenB: String { "tcp://\(NetworkPair.addressB):\(Self.port)" }

    init() throws {
        pair = try NetworkPair()
        a = try Scratch()
        b = try Scratch()
        keys = try ThrowawayBridgeKeys(directory: a.path)
    }

    private let started = Locked<[Spawned]>([])

    /// Kills every process before the namespaces go.
    func close() {
        started.withLock { $0.forEach { $0.kill() } }
        pair.remove()
    }

    @discardableResult
    func onA(_ args: [String]) throws -> Spawned { try remember(pair.start(in: pair.namespaceA, a, args)) }
    @discardableResult
    func onB(_ args: [String]) throws -> Spawned { try remember(pair.start(in: pair.namespaceB, b, args)) }

    private func remember(_ p: Spawned) -> Spawned {
        started.withLock { $0.append(p) }
        return p
    }

    /// `bridge recv --out B` on B, listening on 10.77.0.2, CURVE with the throwaway keys.
    func receiver(_ extra: [String] = []) throws -> Spawned {
        try onB(["bridge", "recv", "--out", "B", "--listen", listenB, "--stats-json"] + keys.receiverArguments + extra)
    }

    /// A lossless sink on B checking every byte (`sink --verify`), its figures as JSON.
    func sink(_ extra: [String] = []) throws -> Spawned {
        try onB(["sink", "--in", "B", "--null", "--verify", "--wait", "30", "--stats-json", "--quiet"] + extra)
    }

    /// `bridge send --in A` on A, dialling B.
    func sender(_ extra: [String]) throws -> Spawned {
        try onA(["bridge", "send", "--in", "A", "--to", listenB, "--wait", "30", "--stats-json"] + keys.senderArguments + extra)
    }
}

/// A sender whose key the receiver's allow-list lacks exits non-zero by itself (libzmq does
/// not retry a refused handshake) with one line naming the receiver and its own key.
extension BridgeHosts {
    /// A lossless 1080p stream over a 50 Mbit/s link: 8 frames, 25 MB, about 4 s on the link;
    /// the source would publish them in 0.3 s. Returns the processes and the producer's
    /// --stats-json file.
    func losslessOverSlowLink() throws -> (produce: Spawned, send: Spawned, sink: Spawned, recv: Spawned, stats: String) {
        try pair.limitAtoB(megabits: 50)
        let recv = try receiver(["--window", "2", "--slots", "4"])
        let sink = try self.sink()
        let send = try sender(["--lossless", "--window", "2"])
        let stats = a.file("produce.json")
        let produce = try onA(["produce", "--pattern", "--out", "A", "--size", "1920x1080", "--rate", "25", "--frames", "8",
                               "--slots", "3", "--wait-for", "1", "--stats-json", stats, "--quiet"])
        return (produce, send, sink, recv, stats)
    }
}

func expectRefused(_ sender: Spawned, key: String, receiver: String, sourceLocation: SourceLocation = #_sourceLocation) {
    let status = sender.wait(timeout: 20)
    #expect(status != 0 && status != -1, "exit \(status): \(sender.stderr)", sourceLocation: sourceLocation)
    let lines = sender.stderr.split(separator: "\n")
    #expect(lines.count == 1 && lines.allSatisfy {
        $0.contains("bridge send: the receiver at \(receiver) refused this sender's key \(key): add it to the receiver's allow-list")
    }, "\(sender.stderr)", sourceLocation: sourceLocation)
}

/// Waits for each process in turn (at most 60 s each: a hung one is killed) and expects exit 0.
func expectExitZero(_ processes: [Spawned], sourceLocation: SourceLocation = #_sourceLocation) {
    for p in processes {
        let status = p.wait(timeout: 60)
        #expect(status == 0, "exit \(status): \(p.stderr)", sourceLocation: sourceLocation)
    }
}

/// The JSON object printed last on `output` (a --stats-json line), as numbers.
func lastJSONNumbers(_ output: String) -> [String: Double] {
    for line in output.split(separator: "\n").reversed() where line.hasPrefix("{") {
        guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { continue }
        return object.compactMapValues { ($0 as? NSNumber)?.doubleValue }
    }
    return [:]
}

/// A slow link is not a dead one: 3 MB frames taking 0.5 s each keep both ends' liveness
/// checks content (any message counts), so neither counts a reconnect.
func expectNoReconnects(_ send: Spawned, _ recv: Spawned, sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(lastJSONNumbers(send.stdout)["reconnects"] == 0, "sender: \(send.stdout)", sourceLocation: sourceLocation)
    #expect(lastJSONNumbers(recv.stdout)["reconnects"] == 0, "receiver: \(recv.stdout) \(recv.stderr)", sourceLocation: sourceLocation)
}

/// 1080p yuv420p: 1920 x 1080 x 1.5 bytes.
let fullHDFrameBytes = 1920 * 1080 * 3 / 2

/// A generous RSS bound for one bridge process, in kB: a framesrv process's own (the Swift
/// runtime, libzmq and FFmpeg's libraries, measured at ~20-40 MB) counted as 96 MB, plus the
/// shared-memory pool it maps and touches (A's or B's, `slots` frames: VmRSS counts mapped
/// shm pages) and ZeroMQ's buffers for `window` frames in flight each way, both counted
/// twice. An unbounded queue grows past it within a second at the source's rate (25 fps of
/// 1080p is 78 MB/s), so a leak cannot hide under it in these runs.
func rssBoundKB(slots: Int, window: Int, frameBytes: Int) -> Int {
    (96 << 10) + 2 * (slots + 2 * window) * frameBytes / 1024
}

@Suite("Bridge between hosts (network namespaces, tbf)", .serialized)
struct BridgeNetworkTests {
    @Test("live over a 50 Mbit/s link, 1080p raw: B's frames strictly increase, misses counted on both ends")
    func liveOverSlowLink() throws {
        let hosts = try BridgeHosts()
        defer { hosts.close() }
        try hosts.pair.limitAtoB(megabits: 50)
        let recv = try hosts.receiver()
        let seqLog = hosts.b.file("seq.log")
        let sink = try hosts.onB(["sink", "--in", "B", "--null", "--wait", "30", "--seq-log", seqLog, "--stats-json", "--quiet"])
        let send = try hosts.sender(["--live"])
        // 40 frames at 25 fps (1.6 s, 125 MB) against a link that carries 2 a second.
        let produce = try hosts.onA(["produce", "--pattern", "--out", "A", "--size", "1920x1080", "--rate", "25", "--frames", "40", "--quiet"])
        expectExitZero([produce, send, sink, recv])
        let seqs = readSeqLog(seqLog).attachments.flatMap { $0 }
        #expect(!seqs.isEmpty && zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }, "B's sequences: \(seqs)")
        #expect(seqs.count < 40, "all 40 frames crossed a link that carries about 2 a second: \(seqs.count)")
        let skipped = lastJSONNumbers(send.stdout)["skipped"] ?? 0
        let dropped = lastJSONNumbers(sink.stdout)["dropped_at_source"] ?? 0
        #expect(skipped > 0, "sender: \(send.stdout)")
        #expect(dropped > 0, "B's sink: \(sink.stdout)")
        expectNoReconnects(send, recv)
    }

    @Test("lossless over a 50 Mbit/s link, 1080p raw: every frame arrives, RSS bounded (paced by the link: Timing/LatencyTests)")
    func losslessOverSlowLink() throws {
        let hosts = try BridgeHosts()
        defer { hosts.close() }
        let (produce, send, sink, recv, stats) = try hosts.losslessOverSlowLink()
        let sampler = RSSSampler([send.pid, recv.pid])
        expectExitZero([produce, send, sink, recv])
        let peaks = sampler.stop()
        let received = SinkStats.parse(sink.stdout)
        #expect(received?.received == 8 && received?.corrupt == 0 && received?.missed == 0, "\(sink.stdout)")
        #expect(lastJSONNumbers(procFile(stats))["published"] == 8, "producer: \(procFile(stats))")
        expectNoReconnects(send, recv)
        let bound = rssBoundKB(slots: 4, window: 2, frameBytes: fullHDFrameBytes)
        for (pid, kb) in peaks { #expect(kb > 0 && kb < bound, "pid \(pid): peak VmRSS \(kb) kB, bound \(bound) kB") }
    }

    @Test("link down for 2 s, then up: both ends reconnect, the lossless stream completes (every frame, in order), RSS bounded during the outage")
    func linkDown() throws {
        let hosts = try BridgeHosts()
        defer { hosts.close() }
        let recv = try hosts.receiver()
        let seqLog = hosts.b.file("seq.log")
        let sink = try hosts.sink(["--seq-log", seqLog])
        let send = try hosts.sender(["--lossless"])
        // 150 frames of 640x360 at 50 fps: 3 s of stream, the outage in its middle.
        let produce = try hosts.onA(["produce", "--pattern", "--out", "A", "--rate", "50", "--frames", "150", "--wait-for", "1", "--quiet"])
        let sampler = RSSSampler([send.pid, recv.pid])
        #expect(eventually(timeout: 30) { readSeqLog(seqLog).attachments.joined().count >= 30 }, "no frames before the outage: \(recv.stderr)")
        try hosts.pair.setLink(up: false)
        let before = readSeqLog(seqLog).attachments.joined().count
        usleep(2_000_000)   // the outage itself (what is tested is what happens after it)
        let during = readSeqLog(seqLog).attachments.joined().count
        try hosts.pair.setLink(up: true)
        expectExitZero([produce, send, sink, recv])
        let peaks = sampler.stop()
        // A 2 s outage outlasts both ends' liveness checks (ZMTP heartbeats and the session's
        // keep-alives, ~1.2-1.5 s): each counts a reconnect, and nothing may be lost.
        let sent = lastJSONNumbers(send.stdout), got = lastJSONNumbers(recv.stdout)
        #expect((sent["reconnects"] ?? 0) >= 1, "sender: \(send.stdout)")
        #expect((got["reconnects"] ?? 0) >= 1, "receiver: \(recv.stdout) \(recv.stderr)")
        let stats = SinkStats.parse(sink.stdout)
        #expect(stats?.received == 150 && stats?.corrupt == 0 && stats?.missed == 0, "\(sink.stdout)")
        let seqs = readSeqLog(seqLog).attachments.flatMap { $0 }
        #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }, "B out of order: \(seqs)")
        // Nothing crossed a link that was down (B's window may drain what had arrived).
        #expect(during - before <= 8, "frames during the outage: \(during - before)")
        let bound = rssBoundKB(slots: 8, window: 4, frameBytes: 640 * 360 * 3 / 2)
        for (pid, kb) in peaks { #expect(kb > 0 && kb < bound, "pid \(pid): peak VmRSS \(kb) kB, bound \(bound) kB") }
    }

    @Test("SIGHUP reloads the allow-list: a refused sender whose key is added then gets in, frames verify")
    func reloadOnHangup() throws {
        let hosts = try BridgeHosts()
        defer { hosts.close() }
        let (late, latePaths) = try CurveCertificate.generate(basename: hosts.a.file("late"))
        let recv = try hosts.receiver()
        let sink = try hosts.sink()
        let sendArguments = ["bridge", "send", "--in", "A", "--to", hosts.listenB, "--wait", "30", "--quiet",
                             "--key", latePaths.secretFile, "--server-key", hosts.keys.receiverPublic]
        let refused = try hosts.onA(sendArguments)
        expectRefused(refused, key: late.publicKey.z85, receiver: hosts.listenB)
        #expect(recv.stderr.contains("refused a client at \(NetworkPair.addressA)"), "receiver: \(recv.stderr)")
        guard let list = FileHandle(forWritingAtPath: hosts.keys.allowList) else { throw TestFailure("cannot open the allow-list") }
        try list.seekToEnd()
        try list.write(contentsOf: Data("\(late.publicKey.z85) late-sender\n".utf8))
        try list.close()
        recv.signal(SIGHUP)
        // libzmq does not retry a handshake the server refused: the sender starts again.
        let send = try hosts.onA(sendArguments)
        let produce = try hosts.onA(["produce", "--pattern", "--out", "A", "--rate", "100", "--frames", "20", "--wait-for", "1", "--quiet"])
        expectExitZero([produce, send, sink, recv])
        #expect(SinkStats.parse(sink.stdout)?.received == 20, "\(sink.stdout)")
        #expect(recv.stderr.contains("SIGHUP: reloaded"), "\(recv.stderr)")
    }

    @Test("--insecure between hosts: plaintext is allowed only because it was asked for, with a warning on both ends; frames verify")
    func insecureBetweenHosts() throws {
        let hosts = try BridgeHosts()
        defer { hosts.close() }
        let recv = try hosts.onB(["bridge", "recv", "--out", "B", "--listen", hosts.listenB, "--insecure", "--quiet"])
        let sink = try hosts.sink()
        let send = try hosts.onA(["bridge", "send", "--in", "A", "--to", hosts.listenB, "--wait", "30", "--insecure", "--quiet"])
        let produce = try hosts.onA(["produce", "--pattern", "--out", "A", "--rate", "100", "--frames", "20", "--wait-for", "1", "--quiet"])
        expectExitZero([produce, send, sink, recv])
        #expect(SinkStats.parse(sink.stdout)?.received == 20, "\(sink.stdout)")
        for p in [send, recv] { #expect(p.stderr.contains("not a loopback address: frames travel in plaintext"), "\(p.stderr)") }
    }

    @Test("CURVE between hosts: a sender whose key is not on the allow-list is refused and logged with its address, B gets nothing; an allowed one's frames verify")
    func allowList() throws {
        let hosts = try BridgeHosts()
        defer { hosts.close() }
        let (strangerCert, stranger) = try CurveCertificate.generate(basename: hosts.a.file("stranger"))
        let recv = try hosts.receiver()
        let sink = try hosts.sink()
        let strangerProducer = try hosts.onA(["produce", "--pattern", "--out", "S", "--rate", "50", "--quiet"])
        let intruder = try hosts.onA(["bridge", "send", "--in", "S", "--to", hosts.listenB, "--wait", "30", "--quiet",
                                      "--key", stranger.secretFile, "--server-key", hosts.keys.receiverPublic])
        expectRefused(intruder, key: strangerCert.publicKey.z85, receiver: hosts.listenB)
        #expect(recv.stderr.contains("refused a client at \(NetworkPair.addressA)"), "receiver: \(recv.stderr)")
        strangerProducer.kill()
        // Exactly the allowed sender's 40 frames reach B: none of the stranger's got through.
        let send = try hosts.sender(["--lossless"])
        let produce = try hosts.onA(["produce", "--pattern", "--out", "A", "--rate", "100", "--frames", "40", "--wait-for", "1", "--quiet"])
        expectExitZero([produce, send, sink, recv])
        let stats = SinkStats.parse(sink.stdout)
        #expect(stats?.received == 40 && stats?.corrupt == 0, "\(sink.stdout)")
        let refusals = recv.stderr.split(separator: "\n").filter { $0.contains("refused a client") }
        #expect(refusals.count <= 2, "the refusal log floods: \(refusals.count) lines")
    }
}

/// `framesrv bridge`'s security errors on this host (loopback): one line each, non-zero exit.
@Suite("Bridge security errors (loopback)")
struct BridgeSecurityErrorTests {
    /// Runs `framesrv ARGS`, expecting failure with one error line containing each of `parts`.
    private func expectOneLine(_ scratch: Scratch, _ args: [String], _ parts: [String], sourceLocation: SourceLocation = #_sourceLocation) throws {
        let r = try scratch.run(args, timeout: 20)
        let lines = r.stderr.split(separator: "\n")
        #expect(r.status != 0 && r.status != -1, "exit \(r.status): \(r.stderr)", sourceLocation: sourceLocation)
        #expect(lines.count == 1, "\(args): \(r.stderr)", sourceLocation: sourceLocation)
        for part in parts { #expect(r.stderr.contains(part), "'\(r.stderr)' lacks '\(part)'", sourceLocation: sourceLocation) }
    }

    @Test("bridge keygen writes NAME.key and NAME.key_secret (0600) and refuses to overwrite them")
    func keygen() throws {
        let scratch = try Scratch()
        let r = try scratch.run(["bridge", "keygen", "-o", scratch.file("cam")])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(CurveKey.parse(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)).isSuccess, "\(r.stdout)")
        var st = stat()
        #expect(stat(scratch.file("cam.key_secret"), &st) == 0 && st.st_mode & 0o777 == 0o600)
        #expect(try CurveCertificate.readPublic(scratch.file("cam.key")).z85 == r.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
        try expectOneLine(scratch, ["bridge", "keygen", "-o", scratch.file("cam")], ["cam.key_secret already exists"])
    }

    @Test("no keys and no --insecure, unreadable and malformed key files, a wrong mode: one line each")
    func keyErrors() throws {
        let scratch = try Scratch()
        let keys = try ThrowawayBridgeKeys(directory: scratch.path)
        let recv = ["bridge", "recv", "--out", "B", "--listen", "tcp://127.0.0.1:47315"]
        let send = ["bridge", "send", "--in", "A", "--to", "tcp://127.0.0.1:47315"]
        try expectOneLine(scratch, recv, ["framesrv bridge keygen", "--insecure"])
        try expectOneLine(scratch, send, ["framesrv bridge keygen", "--insecure"])
        try expectOneLine(scratch, recv + ["--key", scratch.file("missing"), "--allow", keys.allowList], ["missing: cannot read"])
        let garbage = scratch.file("garbage.key_secret")
        try "curve\n    public-key = \"not a key\"\n".write(toFile: garbage, atomically: false, encoding: .utf8)
        chmod(garbage, 0o600)
        try expectOneLine(scratch, send + ["--key", garbage, "--server-key", keys.receiverPublic], ["garbage.key_secret: line 2"])
        chmod(keys.senderSecret, 0o644)
        try expectOneLine(scratch, send + ["--key", keys.senderSecret, "--server-key", keys.receiverPublic], ["mode 644", "chmod 600"])
        try expectOneLine(scratch, recv + ["--insecure", "--key", keys.receiverSecret], ["not both"])
    }
}

extension Result {
    var isSuccess: Bool { if case .success = self { return true } else { return false } }
}
