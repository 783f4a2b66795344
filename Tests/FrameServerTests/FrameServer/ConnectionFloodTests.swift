import Foundation
import FrameServer
import Glibc
import Testing

/// Finding 8: a local client that opens many connections to a producer's NAME.sock used to
/// make libzmq abort the producer ("Too many open files (src/ipc_listener.cpp:325)",
/// SIGABRT). The producer now refuses connections near its descriptor limit, logs the
/// flood and keeps publishing.
@Suite(.serialized) struct ConnectionFloodTests {
    /// Opens `count` non-blocking connections to the Unix socket at `path` and returns the
    /// descriptors whose connect succeeded or is in progress (the rest are closed).
    static func flood(_ path: String, count: Int) -> [Int32] {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, c) in path.utf8.prefix(raw.count - 1).enumerated() { raw[i] = c }
        }
        var fds: [Int32] = []
        for _ in 0..<count {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { break }
            let r = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if r == 0 || errno == EINPROGRESS { fds.append(fd) } else { close(fd) }
        }
        return fds
    }

    /// Under a 64-descriptor limit (soft and hard, so raising the soft limit gains nothing),
    /// 256 connections: the producer logs the flood, keeps publishing, serves a consumer
    /// once the flood is gone, and exits 0 on SIGINT.
    @Test func producerSurvivesAConnectionFlood() throws {
        let scratch = try Scratch()
        let limit = 64
        let producer = try scratch.start(
            ["-c", "ulimit -n \(limit) && exec \"$0\" \"$@\"", framesrvPath,
             "produce", "--pattern", "--out", "flood", "--size", "64x48", "--rate", "200"],
            executable: "/bin/sh")
        #expect(eventually { (scratch.snapshot("flood")?.published ?? 0) > 0 })

        let attempts = 4 * limit
        let fds = Self.flood(scratch.file("flood.sock"), count: attempts)
        #expect(fds.count > limit, "the flood reached the socket (\(fds.count) of \(attempts) connections)")
        #expect(eventually { producer.stderr.contains("connection flood on") }, "\(producer.stderr)")
        let duringFlood = scratch.snapshot("flood")?.published ?? 0
        #expect(eventually { (scratch.snapshot("flood")?.published ?? 0) >= duringFlood + 50 },
                "the producer keeps publishing while the flood holds its connections")
        for fd in fds { close(fd) }

        let sink = try scratch.run(["sink", "--in", "flood", "--null", "--frames", "20"])
        #expect(sink.status == 0, "a consumer attaches after the flood: \(sink.stderr)")
        producer.signal(SIGINT)
        #expect(producer.wait() == 0, "\(producer.stderr)")
        #expect(!producer.stderr.contains("Too many open files"))
    }
}
