import Foundation
import Glibc

/// Slow HTTP clients (slowloris) against 127.0.0.1:`port`: `perSource` sockets from each of
/// `sources` (loopback addresses, 127.0.0.2 and up: other hosts as the server sees them), each
/// sending a request line and then one more header line every `lineInterval` seconds, never
/// ending its headers. A socket the server closes is opened again, as an attacker would. One
/// thread drives them all with poll(2).
final class SlowClients: @unchecked Sendable {
    private struct Client {
        let source: String
        var fd: Int32 = -1
        var connected = false
        /// When a closed socket is opened again (a second later: pressure, not a busy loop).
        var again = Date()
    }
    private let port: UInt16
    private let lineInterval: Double
    private let state: Locked<(clients: [Client], stop: Bool, closes: Int)>
    private let done = DispatchSemaphore(value: 0)

    init(port: UInt16, sources: [String], perSource: Int, lineInterval: Double = 1) {
        self.port = port
        self.lineInterval = lineInterval
        state = Locked((sources.flatMap { s in (0..<perSource).map { _ in Client(source: s) } }, false, 0))
        Thread { [self] in run(); done.signal() }.start()
    }

    deinit { stop() }

    /// Sockets connected now (and not closed by the server), in all or from `source`.
    func connected(from source: String? = nil) -> Int {
        state.withLock { s in s.clients.filter { $0.connected && (source == nil || $0.source == source) }.count }
    }

    /// Sockets the server closed (or answered) after they connected.
    var closes: Int { state.withLock { $0.closes } }

    /// Closes every socket and ends the thread. Idempotent.
    func stop() {
        let first = state.withLock { s in defer { s.stop = true }; return !s.stop }
        guard first else { return }
        done.wait()
        state.withLock { s in for c in s.clients where c.fd >= 0 { close(c.fd) } }
    }

    private func run() {
        var nextLine = Date()
        while !state.withLock({ $0.stop }) {
            let now = Date()
            state.withLock { s in
                for i in s.clients.indices where s.clients[i].fd < 0 && s.clients[i].again <= now {
                    s.clients[i].fd = open(s.clients[i].source)
                    s.clients[i].again = now.addingTimeInterval(lineInterval)
                }
            }
            var fds = state.withLock { s in s.clients.map { pollfd(fd: $0.fd, events: Int16($0.connected ? POLLIN : POLLOUT), revents: 0) } }
            _ = poll(&fds, nfds_t(fds.count), 50)
            let sendLine = Date() >= nextLine
            if sendLine { nextLine = Date().addingTimeInterval(lineInterval) }
            state.withLock { s in
                for i in s.clients.indices where s.clients[i].fd >= 0 { step(&s.clients[i], fds[i].revents, sendLine, &s.closes) }
            }
        }
    }

    /// One socket's turn: finish connecting (then send the request line), notice a close or a
    /// reply (then close it, to be opened again), or send its next header line.
    private func step(_ c: inout Client, _ events: Int16, _ sendLine: Bool, _ closes: inout Int) {
        if !c.connected, events & Int16(POLLOUT | POLLERR | POLLHUP) != 0 {
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &error, &length)
            c.connected = error == 0 && send(c.fd, "GET /api/streams HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            if !c.connected { reset(&c) }
            return
        }
        if c.connected, events & Int16(POLLIN | POLLERR | POLLHUP) != 0 {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let n = recv(c.fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if n >= 0 || errno != EAGAIN {
                closes += 1
                return reset(&c)
            }
        }
        if c.connected, sendLine, !send(c.fd, "X-Slow: \(Int.random(in: 0..<1_000_000))\r\n") { reset(&c) }
    }

    private func reset(_ c: inout Client) {
        close(c.fd)
        c.fd = -1
        c.connected = false
        c.again = Date().addingTimeInterval(lineInterval)
    }

    private func send(_ fd: Int32, _ text: String) -> Bool {
        text.withCString { Glibc.send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) } > 0
    }

    /// A non-blocking socket from `source` to the server, connecting (-1 if none could be made).
    private func open(_ source: String) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return -1 }
        var from = sockaddr_in(), to = sockaddr_in()
        from.sin_family = sa_family_t(AF_INET)
        from.sin_addr.s_addr = inet_addr(source)
        to.sin_family = sa_family_t(AF_INET)
        to.sin_port = port.bigEndian
        to.sin_addr.s_addr = inet_addr("127.0.0.1")
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &from) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) } }
        let started = withUnsafePointer(to: &to) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, size) } }
        guard bound == 0, started == 0 || errno == EINPROGRESS else {
            close(fd)
            return -1
        }
        return fd
    }
}
