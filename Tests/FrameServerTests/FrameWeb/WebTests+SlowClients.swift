import Foundation
import Glibc
import Testing

/// `framesrv web` against slow clients (issue 26 item 3): anyone who can reach the port could
/// hold every connection with requests whose headers never end, before any token was checked.
extension WebTests {
    /// Off loopback with a token: 200 slow sockets from one other address (more than the whole
    /// connection limit once was), then 200 more from four others, each sending a header line a
    /// second and never ending its request, opened again when the server closes it. A client
    /// with the token gets every answer while they are connected, also while the server closes
    /// and replaces a hundred of them.
    @Test func slowClientsDoNotShutOutATokenHolder() throws {
        let scratch = try Scratch()
        let token = "slow-clients-test-token"
        let (web, port, _) = try startWeb(scratch, ["--token", token], listen: "0.0.0.0:0")
        defer { web.kill() }
        let bearer = ["Authorization": "Bearer \(token)"]
        #expect(http(port, "/api/streams", headers: bearer)?.status == 200)
        let one = SlowClients(port: port, sources: ["127.0.0.2"], perSource: 200)
        defer { one.stop() }
        // The server has met them all: it holds some and closed the others.
        #expect(eventually(timeout: 30) { one.connected() >= 32 && one.closes >= 1 }, "\(one.connected()) connected, \(one.closes) closed")
        for i in 0..<5 {
            let open = one.connected()
            #expect(http(port, "/api/streams", headers: bearer)?.status == 200, "request \(i), \(open) slow sockets connected")
        }
        let many = SlowClients(port: port, sources: (3...6).map { "127.0.0.\($0)" }, perSource: 50)
        defer { many.stop() }
        #expect(eventually(timeout: 30) { one.connected() + many.connected() >= 128 && many.closes >= 1 })
        let closed = one.closes + many.closes
        var requests = 0
        while one.closes + many.closes < closed + 100, requests < 1000 {
            let open = one.connected() + many.connected()
            #expect(http(port, "/api/streams", headers: bearer)?.status == 200, "request \(requests), \(open) slow sockets connected")
            requests += 1
            usleep(100_000)
        }
        #expect(web.isRunning)
    }

    /// A request whose headers never end is closed, though each of its lines is activity that
    /// an idle timeout alone would count.
    @Test func aRequestWhoseHeadersNeverEndIsClosed() throws {
        let scratch = try Scratch()
        let (web, port, _) = try startWeb(scratch)
        defer { web.kill() }
        let slow = SlowClients(port: port, sources: ["127.0.0.1"], perSource: 1)
        defer { slow.stop() }
        #expect(eventually(timeout: 30) { slow.connected() == 1 })
        #expect(eventually(timeout: 60) { slow.closes >= 1 }, "the server kept a request whose headers never end")
        #expect(http(port, "/api/streams")?.status == 200)
    }
}
