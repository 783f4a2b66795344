import Foundation
import FrameControl
import Glibc
import FrameBench
import FrameBridge
import FrameServer
import Testing

/// `framesrv bridge send/recv` over TCP loopback, --insecure (the CURVE and network-namespace
/// cases are BridgeNetworkTests). Real processes; each test's ports are free ones.
@Suite(.serialized) struct BridgeTests {
    static func freePort() -> Int { BridgeEndpoint.freeLoopbackPort() }

    /// The `"key":N` of a JSON line.
    static func field(_ json: String, _ key: String) -> Int? {
        guard let r = json.range(of: "\"\(key)\":") else { return nil }
        return Int(json[r.upperBound...].prefix { $0.isNumber })
    }

    @Test func losslessRawThousandFramesArriveIdentical() throws {
        let scratch = try Scratch()
        let url = "tcp://127.0.0.1:\(Self.freePort())"
        let recv = try scratch.start(["bridge", "recv", "--listen", url, "--out", "B", "--insecure", "--stats-json"])
        let sink = try scratch.start(["sink", "--in", "B", "--null", "--verify", "--stats-json", "--wait", "30"])
        let send = try scratch.start(["bridge", "send", "--in", "A", "--to", url, "--insecure", "--stats-json"])
        let producer = try scratch.start(["produce", "--pattern", "--size", "640x360", "--frames", "1000", "--rate", "max",
                                          "--out", "A", "--wait-for", "1"])
        #expect(producer.wait(timeout: 60) == 0, "produce: \(producer.stderr)")
        #expect(send.wait(timeout: 30) == 0, "send: \(send.stderr)")
        #expect(recv.wait(timeout: 30) == 0, "recv: \(recv.stderr)")
        #expect(sink.wait(timeout: 30) == 0, "sink: \(sink.stderr)")
        let stats = try #require(SinkStats.parse(sink.stdout), "sink: \(sink.stdout) \(sink.stderr)")
        #expect(stats.received == 1000 && stats.first == 1 && stats.last == 1000 && stats.corrupt == 0 && stats.missed == 0)
        #expect(Self.field(send.stdout, "frames") == 1000, "send: \(send.stdout)")
        #expect(Self.field(recv.stdout, "frames") == 1000 && Self.field(recv.stdout, "malformed") == 0, "recv: \(recv.stdout)")
    }

    /// `--codec ffv1`: B's framemd5 equals A's (A hashed by a second sink on A), and the
    /// link carried less than the raw planes.
    @Test func ffv1IsLossless() throws {
        let scratch = try Scratch()
        let url = "tcp://127.0.0.1:\(Self.freePort())"
        let recv = try scratch.start(["bridge", "recv", "--listen", url, "--out", "B", "--insecure", "--stats-json"])
        let sinkB = try scratch.start(["sink", "--in", "B", "--framemd5", scratch.file("b.md5"), "--wait", "30"])
        let sinkA = try scratch.start(["sink", "--in", "A", "--framemd5", scratch.file("a.md5"), "--wait", "30"])
        let send = try scratch.start(["bridge", "send", "--in", "A", "--to", url, "--insecure", "--codec", "ffv1", "--stats-json"])
        let producer = try scratch.start(["produce", "--pattern", "--size", "640x360", "--frames", "200", "--rate", "max",
                                          "--out", "A", "--wait-for", "2"])
        for p in [producer, send, recv, sinkA, sinkB] { #expect(p.wait(timeout: 60) == 0, "\(p.stderr)") }
        let a = hashes(try String(contentsOfFile: scratch.file("a.md5"), encoding: .utf8))
        let b = hashes(try String(contentsOfFile: scratch.file("b.md5"), encoding: .utf8))
        #expect(a.count == 200 && a == b)
        let sent: Int = Self.field(send.stdout, "bytes") ?? Int.max
        let raw: Int = 200 * 640 * 360 * 3 / 2
        #expect(sent < raw, "send: \(send.stdout)")
    }

    /// `--codec h264 --crf 28`: every frame arrives (decoded into B), the link carries a
    /// small fraction of the raw planes; `--live` with h264 is refused in one line.
    @Test func h264IsSmallAndComplete() throws {
        let scratch = try Scratch()
        let url = "tcp://127.0.0.1:\(Self.freePort())"
        let recv = try scratch.start(["bridge", "recv", "--listen", url, "--out", "B", "--insecure"])
        let sink = try scratch.start(["sink", "--in", "B", "--null", "--stats-json", "--wait", "30"])
        let send = try scratch.start(["bridge", "send", "--in", "A", "--to", url, "--insecure", "--codec", "h264", "--crf", "28", "--stats-json"])
        let producer = try scratch.start(["produce", "--pattern", "--size", "640x360", "--frames", "150", "--rate", "max",
                                          "--out", "A", "--wait-for", "1"])
        for p in [producer, send, recv, sink] { #expect(p.wait(timeout: 60) == 0, "\(p.stderr)") }
        let stats = try #require(SinkStats.parse(sink.stdout))
        #expect(stats.received == 150 && stats.missed == 0)
        let sent: Int = Self.field(send.stdout, "bytes") ?? Int.max
        let raw: Int = 150 * 640 * 360 * 3 / 2
        #expect(sent < raw / 20, "send: \(send.stdout)")
        let live = try scratch.run(["bridge", "send", "--in", "A", "--to", url, "--live", "--codec", "h264", "--insecure"], timeout: 10)
        #expect(live.status == 2 && live.stderr.split(separator: "\n").count == 1, "\(live.stderr)")
    }

    /// `--codec h264 -b:v 300k`: every frame arrives, and the link carries about the rate
    /// (bytes over the stream's seconds, within a factor of 3 either way: x264's rate control with a
    /// one-second VBV); -b:v with raw or ffv1, or with --crf, is refused in one line.
    @Test func h264BitRateHoldsTheRate() throws {
        let scratch = try Scratch()
        let url = "tcp://127.0.0.1:\(Self.freePort())"
        let recv = try scratch.start(["bridge", "recv", "--listen", url, "--out", "B", "--insecure"])
        let sink = try scratch.start(["sink", "--in", "B", "--null", "--stats-json", "--wait", "30"])
        let send = try scratch.start(["bridge", "send", "--in", "A", "--to", url, "--insecure", "--codec", "h264", "-b:v", "300k",
                                      "--stats-json"])
        // 200 frames at a nominal 100 fps: 2 s of stream, whatever the wall clock does.
        let producer = try scratch.start(["produce", "--pattern", "--size", "640x360", "--frames", "200", "--rate", "100",
                                          "--out", "A", "--wait-for", "1"])
        for p in [producer, send, recv, sink] { #expect(p.wait(timeout: 60) == 0, "\(p.stderr)") }
        let stats = try #require(SinkStats.parse(sink.stdout))
        #expect(stats.received == 200 && stats.missed == 0)
        let sent: Int = Self.field(send.stdout, "bytes") ?? 0
        let bitsPerSecond = Double(sent) * 8 / 2
        #expect(bitsPerSecond > 300_000 / 3 && bitsPerSecond < 300_000 * 3, "\(bitsPerSecond) bit/s: \(send.stdout)")
        for extra in [["-b:v", "300k"], ["--codec", "ffv1", "-b:v", "300k"], ["--codec", "h264", "--crf", "20", "-b:v", "1M"],
                      ["--codec", "h264", "-b:v", "fast"]] {
            let r = try scratch.run(["bridge", "send", "--in", "A", "--to", url, "--insecure"] + extra, timeout: 10)
            #expect(r.status == 2 && r.stderr.split(separator: "\n").count == 1, "\(extra): \(r.stderr)")
        }
    }

    /// Live over a receiver slower than A: B's frames strictly increasing, every skipped frame
    /// counted (B's source_dropped adds up to what the sender skipped), both ends exit 0.
    @Test func liveSkipsAndCounts() throws {
        let scratch = try Scratch()
        let url = "tcp://127.0.0.1:\(Self.freePort())"
        let recv = try scratch.start(["bridge", "recv", "--listen", url, "--out", "B", "--insecure", "--stats-json"])
        let sink = try scratch.start(["sink", "--in", "B", "--null", "--hold-us", "20000", "--seq-log", scratch.file("seq"),
                                      "--stats-json", "--wait", "30"])
        let send = try scratch.start(["bridge", "send", "--in", "A", "--to", url, "--insecure", "--live", "--stats-json"])
        let producer = try scratch.start(["produce", "--pattern", "--size", "320x180", "--frames", "200", "--rate", "200",
                                          "--out", "A", "--wait-for", "0"])
        #expect(producer.wait(timeout: 60) == 0, "produce: \(producer.stderr)")
        #expect(send.wait(timeout: 30) == 0, "send: \(send.stderr)")
        #expect(recv.wait(timeout: 30) == 0, "recv: \(recv.stderr)")
        #expect(sink.wait(timeout: 30) == 0, "sink: \(sink.stderr)")
        let frames = readSeqLog(scratch.file("seq")).attachments.flatMap { $0 }
        #expect(frames.count > 0 && zip(frames, frames.dropFirst()).allSatisfy { $0 < $1 })
        let skipped = Self.field(send.stdout, "skipped") ?? -1
        #expect(skipped > 0, "send: \(send.stdout)")
        #expect(Self.field(sink.stdout, "dropped_at_source") == Self.field(recv.stdout, "skipped"), "sink: \(sink.stdout) recv: \(recv.stdout)")
        #expect(frames.count + (Self.field(recv.stdout, "skipped") ?? 0) <= 200)
    }

    /// B's link in `ctl B status`, `ls --json` and `inspect` while frames flow; LinkStatus's JSON reads back.
    @Test func linkStatusIsShown() throws {
        let scratch = try Scratch()
        let url = "tcp://127.0.0.1:\(Self.freePort())"
        let recv = try scratch.start(["bridge", "recv", "--listen", url, "--out", "B", "--insecure"])
        let sink = try scratch.start(["sink", "--in", "B", "--null", "--wait", "30"])
        let send = try scratch.start(["bridge", "send", "--in", "A", "--to", url, "--insecure"])
        let producer = try scratch.start(["produce", "--pattern", "--size", "160x120", "--frames", "150", "--rate", "50",
                                          "--out", "A", "--wait-for", "1"])
        #expect(eventually(timeout: 20) { (scratch.snapshot("B")?.published ?? 0) >= 20 })
        let status = try scratch.run(["ctl", "B", "status", "--json"], timeout: 10)
        let link = try #require(LinkStatus(json: status.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), "ctl: \(status.stdout) \(status.stderr)")
        #expect(link.stream == "B" && link.peer.hasPrefix("127.0.0.1") && link.credits == 4 && link.frames >= 20)
        #expect(LinkStatus(json: link.json) == link)
        let ls = try scratch.run(["ls", "--json"], timeout: 10)
        #expect(ls.stdout.contains("\"link\":{") && ls.stdout.contains("\"in_flight\":"), "ls: \(ls.stdout)")
        let inspect = try scratch.run(["inspect", "B"], timeout: 10)
        #expect(inspect.stdout.contains("link: bridged from 127.0.0.1"), "inspect: \(inspect.stdout)")
        for p in [producer, send, recv, sink] { #expect(p.wait(timeout: 30) == 0, "\(p.stderr)") }
    }

    /// The receiver dials (`recv --from`), the sender listens.
    @Test func receiverDialsOut() throws {
        let scratch = try Scratch()
        let url = "tcp://127.0.0.1:\(Self.freePort())"
        let send = try scratch.start(["bridge", "send", "--in", "A", "--listen", url, "--insecure"])
        let recv = try scratch.start(["bridge", "recv", "--from", url, "--out", "B", "--insecure"])
        let sink = try scratch.start(["sink", "--in", "B", "--null", "--verify", "--stats-json", "--wait", "30"])
        let producer = try scratch.start(["produce", "--pattern", "--size", "320x240", "--frames", "100", "--rate", "max",
                                          "--out", "A", "--wait-for", "1"])
        #expect(producer.wait(timeout: 60) == 0, "produce: \(producer.stderr)")
        #expect(send.wait(timeout: 30) == 0, "send: \(send.stderr)")
        #expect(recv.wait(timeout: 30) == 0, "recv: \(recv.stderr)")
        #expect(sink.wait(timeout: 30) == 0, "sink: \(sink.stderr)")
        let stats = try #require(SinkStats.parse(sink.stdout))
        #expect(stats.received == 100 && stats.corrupt == 0 && stats.last == 100)
    }

    /// Dialing out (`recv --from`) to a sender whose key is not on the allow-list: both ends
    /// exit non-zero by themselves, each with one line saying why (libzmq does not retry).
    @Test func receiverDialingOutRefusesAnUnknownSender() throws {
        let scratch = try Scratch()
        let keys = try ThrowawayBridgeKeys(directory: scratch.path)
        let (stranger, paths) = try CurveCertificate.generate(basename: scratch.file("stranger"))
        let url = "tcp://127.0.0.1:\(Self.freePort())"
        let send = try scratch.start(["bridge", "send", "--in", "A", "--listen", url, "--key", paths.secretFile,
                                      "--server-key", keys.receiverPublic])
        let recv = try scratch.start(["bridge", "recv", "--from", url, "--out", "B"] + keys.receiverArguments)
        let sendStatus = send.wait(timeout: 20), recvStatus = recv.wait(timeout: 20)
        #expect(sendStatus != 0 && sendStatus != -1, "send: exit \(sendStatus): \(send.stderr)")
        #expect(send.stderr.contains("refused this sender's key \(stranger.publicKey.z85): add it to the receiver's allow-list"),
                "send: \(send.stderr)")
        #expect(recvStatus != 0 && recvStatus != -1, "recv: exit \(recvStatus): \(recv.stderr)")
        #expect(recv.stderr.contains("bridge recv: refused the sender at \(url): its key is not on this receiver's allow-list"),
                "recv: \(recv.stderr)")
    }

    /// A's frames and B's, hashed (framemd5), with one side killed (SIGKILL) and restarted
    /// mid-stream: B's frames are A's, in order, none twice, up to A's last.
    func restart(_ role: String) throws {
        let scratch = try Scratch()
        let url = "tcp://127.0.0.1:\(Self.freePort())"
        let recvArgs = ["bridge", "recv", "--listen", url, "--out", "B", "--insecure", "--stats-json"]
        let sendArgs = ["bridge", "send", "--in", "A", "--to", url, "--insecure", "--stats-json"]
        var recv = try scratch.start(recvArgs)
        let sinkB = try scratch.start(["sink", "--in", "B", "--framemd5", scratch.file("b.md5"), "--stats-json", "--wait", "30"])
        var send = try scratch.start(sendArgs)
        let sinkA = try scratch.start(["sink", "--in", "A", "--framemd5", scratch.file("a.md5"), "--wait", "30"])
        let producer = try scratch.start(["produce", "--pattern", "--size", "320x180", "--frames", "300", "--rate", "150",
                                          "--out", "A", "--wait-for", "2"])
        // Mid-stream: once B has frames.
        #expect(eventually(timeout: 20) { (scratch.snapshot("B")?.published ?? 0) >= 60 })
        if role == "recv" { recv.kill(); recv = try scratch.start(recvArgs) } else { send.kill(); send = try scratch.start(sendArgs) }
        #expect(producer.wait(timeout: 60) == 0, "produce: \(producer.stderr)")
        #expect(sinkA.wait(timeout: 30) == 0, "sink A: \(sinkA.stderr)")
        #expect(send.wait(timeout: 30) == 0, "send: \(send.stderr)")
        #expect(recv.wait(timeout: 30) == 0, "recv: \(recv.stderr)")
        #expect(sinkB.wait(timeout: 30) == 0, "sink B: \(sinkB.stderr)")
        let a = hashes(try String(contentsOfFile: scratch.file("a.md5"), encoding: .utf8))
        let b = hashes(try String(contentsOfFile: scratch.file("b.md5"), encoding: .utf8))
        #expect(a.count == 300)
        // The pattern's hashes repeat every 256 frames: match B against A in order from a cursor.
        // A killed receiver may have published frames it had not acknowledged yet: the new
        // one gets them again (at most a window, 4, once: at-least-once across a receiver crash).
        var cursor = 0, repeated = 0
        for h in b {
            if let i = a[cursor...].firstIndex(of: h) {
                cursor = i + 1
            } else if role == "recv", repeated < 4, a[max(0, cursor - 4)..<cursor].contains(h) {
                repeated += 1
            } else {
                Issue.record("B has a frame not in A's order at \(cursor) (repeated \(repeated))")
                break
            }
        }
        #expect(b.last == a.last, "B ends with A's last frame")
        if role == "recv" {
            // Lossless: only frames the dead receiver had published into B and B's sink had not read can be gone.
            #expect(b.count >= 300 - 8, "B: \(b.count) frames")
            #expect((Self.field(send.stdout, "reconnects") ?? 0) >= 1, "send: \(send.stdout)")
        } else {
            #expect(Self.field(recv.stdout, "sessions") == 2, "recv: \(recv.stdout)")
            #expect((Self.field(sinkB.stdout, "discontinuities") ?? 0) >= 1, "sink B: \(sinkB.stdout)")
        }
    }

    @Test func receiverRestartMidStream() throws { try restart("recv") }
    @Test func senderRestartMidStream() throws { try restart("send") }

    /// Junk on the port (raw TCP, and ZeroMQ messages that are not the bridge's or lie about
    /// their sizes): logged, dropped, no crash; a real session then goes through.
    @Test func malformedPeerIsLoggedAndDropped() throws {
        let scratch = try Scratch()
        let port = Self.freePort()
        let url = "tcp://127.0.0.1:\(port)"
        let recv = try scratch.start(["bridge", "recv", "--listen", url, "--out", "B", "--insecure", "--stats-json"])
        // The junk must meet a listening receiver (a fast Python connected before it bound).
        try #require(eventually(timeout: 10) { procFile("/proc/net/tcp").contains(String(format: ":%04X 00000000:0000 0A", port)) },
                     "bridge recv did not listen on \(url) within 10 s: \(recv.stderr)")
        let script = scratch.file("junk.py")
        try Self.junkScript.write(toFile: script, atomically: true, encoding: .utf8)
        let junk = try shell("'\(try ClientTools.python())' \(script) \(port)", scratch)
        #expect(junk.status == 0, "junk: \(junk.stderr)")
        #expect(recv.isRunning, "recv: \(recv.stderr)")
        let sink = try scratch.start(["sink", "--in", "B", "--null", "--verify", "--stats-json", "--wait", "30"])
        let send = try scratch.start(["bridge", "send", "--in", "A", "--to", url, "--insecure"])
        let producer = try scratch.start(["produce", "--pattern", "--size", "160x120", "--frames", "50", "--rate", "max",
                                          "--out", "A", "--wait-for", "1"])
        #expect(producer.wait(timeout: 30) == 0, "produce: \(producer.stderr)")
        #expect(send.wait(timeout: 30) == 0, "send: \(send.stderr)")
        #expect(recv.wait(timeout: 30) == 0, "recv: \(recv.stderr)")
        #expect(sink.wait(timeout: 30) == 0, "sink: \(sink.stderr)")
        #expect(recv.stderr.contains("bridge recv: dropped a message from"), "recv: \(recv.stderr)")
        #expect((Self.field(recv.stdout, "malformed") ?? 0) >= 5, "recv: \(recv.stdout)")
        let stats = try #require(SinkStats.parse(sink.stdout))
        #expect(stats.received == 50 && stats.corrupt == 0)
    }

    static let junkScript = """
    import os, socket, struct, sys, time, zmq
    port = int(sys.argv[1])
    s = socket.create_connection(("127.0.0.1", port)); s.sendall(os.urandom(20000)); s.close()
    ctx = zmq.Context(); d = ctx.socket(zmq.DEALER); d.connect("tcp://127.0.0.1:%d" % port); time.sleep(0.3)
    head = lambda t, seq=1, v=0: struct.pack("<IBBHQQII", 0x47534246, 1, t, 0, 7, seq, v, 0)
    d.send(b"junk")                                         # too short
    d.send(head(9))                                         # unknown type
    d.send(struct.pack("<IBBHQQII", 0x47534246, 2, 1, 0, 7, 1, 0, 0) + b"\\0" * 8)   # another version
    d.send(head(1) + struct.pack("<ii", 25, 1))             # a hello: session 7
    d.send_multipart([head(2) + b"\\0" * 120, b"x"])         # a frame whose record is not one
    d.send_multipart([head(2), b"x"])                       # a frame too short
    time.sleep(0.5)
    d.close(0); ctx.term()
    """

    /// Bad addresses, a port in use, no security: one error line each, a non-zero exit.
    @Test func badInputsFailWithOneLine() throws {
        let scratch = try Scratch()
        let port = Self.freePort()
        let holder = try scratch.start(["bridge", "recv", "--listen", "tcp://127.0.0.1:\(port)", "--out", "X", "--insecure"])
        #expect(eventually(timeout: 10) { procFile("/proc/net/tcp").contains(String(format: ":%04X 00000000:0000 0A", port)) })
        let cases: [([String], String)] = [
            (["bridge", "recv", "--listen", "tcp://127.0.0.1:\(port)", "--out", "B", "--insecure"], "Address already in use"),
            (["bridge", "recv", "--listen", "tcp://999.1.1.1:\(port)", "--out", "B", "--insecure"], "cannot listen on"),
            (["bridge", "send", "--in", "A", "--to", "tcp://no-such-host.invalid:5", "--insecure"], "cannot resolve"),
            (["bridge", "send", "--in", "A", "--to", "udp://127.0.0.1:5", "--insecure"], "tcp://HOST:PORT"),
            (["bridge", "send", "--in", "A", "--to", "tcp://127.0.0.1:70000", "--insecure"], "1..65535"),
            (["bridge", "recv", "--out", "B", "--insecure"], "--listen"),
            (["bridge", "frob"], "send, recv or keygen"),
        ]
        for (args, expected) in cases {
            let r = try scratch.run(args, timeout: 20)
            // One error line (plaintext on a non-loopback address also warns, on a line of its own).
            let errors = r.stderr.split(separator: "\n").filter { $0.contains("error") }
            #expect(r.status != 0 && errors.count == 1 && errors[0].contains(expected), "\(args): \(r.status) \(r.stderr)")
        }
        holder.signal(SIGTERM)
        #expect(holder.wait(timeout: 10) == 0)
    }

    @Test("framesrv bench bridge --quick prints every figure and ratio, each run carrying every frame", .timeLimit(.minutes(2)))
    func benchBridgeQuick() throws {
        let scratch = try Scratch()
        let bench = try scratch.start(["bench", "bridge", "--quick"])
        #expect(bench.wait(timeout: 110) == 0, "bench bridge: \(bench.stdout)\n\(bench.stderr)")
        let lines = bench.stdout.split(separator: "\n").map(String.init)
        for section in ["1. throughput", "2. added latency"] {
            #expect(lines.contains { $0.hasPrefix(section) }, "no section '\(section)' in:\n\(bench.stdout)")
        }
        for row in ["  framesrv bridge --insecure:", "  framesrv bridge CURVE:", "  ffmpeg tcp://:"] {
            #expect(lines.contains { $0.hasPrefix(row) && $0.contains("100 frames in ") && $0.hasSuffix(" GB/s") }, "no '\(row)' in:\n\(bench.stdout)")
        }
        #expect(lines.contains { $0.hasPrefix("  ratio frames/s: bridge --insecure / ffmpeg ") && $0.contains(", CURVE / --insecure ") })
        for row in ["  --insecure: p50 ", "  CURVE: p50 "] {
            #expect(lines.contains { $0.hasPrefix(row) && $0.contains(" ms, p99 ") && $0.hasSuffix(" ms") }, "no '\(row)' in:\n\(bench.stdout)")
        }
        let (status, _, err) = try scratch.run(["bench", "bridge", "--seconds", "1"], timeout: 20)
        #expect(status == 2 && err.split(separator: "\n").count == 1, "\(err)")
    }
}
