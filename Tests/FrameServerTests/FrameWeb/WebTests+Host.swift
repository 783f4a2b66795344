import Foundation
import Glibc
import Testing

/// `framesrv web` on loopback reads the Host header strictly (issue 26 item 11): a name that
/// only starts like a loopback one, userinfo, or a second Host header is no loopback name.
extension WebTests {
    @Test func theHostHeaderIsParsedStrictly() throws {
        let scratch = try Scratch()
        let (web, port, _) = try startWeb(scratch)
        defer { web.kill() }
        func status(_ host: String) -> Int? { http(port, "/api/streams", headers: ["Host": host])?.status }
        for host in ["127.0.0.1:\(port)", "localhost:\(port)", "LocalHost", "[::1]:\(port)", "[0:0:0:0:0:0:0:1]", "127.0.0.2:80"] {
            #expect(status(host) == 200, "Host: \(host)")
        }
        for host in ["[::1]evil.com", "127.0.0.1:80@evil.com", "127.0.0.1@evil.com", "[::1]:80@evil.com", "127.0.0.1:", "127.0.0.1:80:80",
                     "127.0.0.1:99999", "127.0.0.1:8x", "127.1", "127.0.0.01", "127.0.0.1.evil.com", "localhost.evil.com", "[::1", "::1",
                     "[::1%lo]", "127.0.0.1/evil.com", "evil.com#127.0.0.1"] {
            let s = status(host)
            #expect(s == 400 || s == 403, "Host: \(host) got \(s.map(String.init) ?? "no reply")")
        }
        // Two Host headers: refused, whichever comes first (libmicrohttpd's lookup sees only the first).
        for (first, second) in [("127.0.0.1:\(port)", "evil.com"), ("evil.com", "127.0.0.1:\(port)"), ("127.0.0.1", "127.0.0.1")] {
            let reply = rawHTTP(port, "GET /api/streams HTTP/1.1\r\nHost: \(first)\r\nHost: \(second)\r\nConnection: close\r\n\r\n")
            #expect(reply?.status == 400, "Host: \(first), Host: \(second) got \(reply.map { "\($0.status)" } ?? "no reply")")
        }
        #expect(web.isRunning)
    }
}
