import FrameServer
import Glibc
import Synchronization

/// How many connections `framesrv web` holds, and how long a request may take to arrive.
public struct ConnectionLimits: Sendable, Equatable {
    /// Connections in all (libmicrohttpd's connection limit; each has its own thread).
    public var total: Int
    /// Connections waiting for their request to arrive whole, in all and from one address.
    public var waitingInAll: Int
    public var waitingPerAddress: Int
    /// How long a request (its headers and body) may take to arrive, from the connection's
    /// start or from its previous request's answer.
    public var requestSeconds: Double

    public init(total: Int, waitingInAll: Int, waitingPerAddress: Int, requestSeconds: Double) {
        self.total = total
        self.waitingInAll = waitingInAll
        self.waitingPerAddress = waitingPerAddress
        self.requestSeconds = requestSeconds
    }

    /// 256 connections, of which 64 are kept for requests being answered and for connections
    /// that carried the token; 64 waiting from one address; 5 s for a request to arrive (a
    /// browser's arrives in milliseconds).
    public static let standard = ConnectionLimits(total: 256, waitingInAll: 192, waitingPerAddress: 64, requestSeconds: 5)
}

/// Who holds `framesrv web`'s connections (issue 26 item 3: slow clients held them all before
/// any token was checked). A connection *waits* from its start, and again from each answer,
/// until its next request has arrived whole; a connection whose request carried the token is
/// *trusted* and never waits again. Waiting connections share `waitingInAll` of the `total`
/// (the rest is room for requests being answered and for token holders), at most
/// `waitingPerAddress` of them from one address, each for `requestSeconds`; with their share
/// full a new connection takes the place of the oldest waiting one of the address with the
/// most (an attacker's, not a client that sends its request at once). A connection is closed
/// by shutdown(2) of its socket, which libmicrohttpd then closes: under the lock, and before
/// the close notification (which takes the lock) lets libmicrohttpd close the descriptor.
final class ConnectionGuard: Sendable {
    private struct Entry {
        let address: [UInt8]
        let fd: Int32
        /// Since when it waits for a request (CLOCK_MONOTONIC ns); nil while one is answered.
        var waitingSince: UInt64?
        var trusted = false
        var closing = false

        var waits: Bool { waitingSince != nil && !trusted && !closing }
    }
    private struct State {
        var entries: [UInt: Entry] = [:]
        var stopped = false
        var watchdog: pthread_t?
    }

    let limits: ConnectionLimits
    private let state = Mutex(State())

    init(_ limits: ConnectionLimits) { self.limits = limits }

    /// At accept: whether a connection from `address` is taken (else libmicrohttpd closes it),
    /// replacing an old waiting one when the waiting share is full.
    func mayAccept(_ address: [UInt8]) -> Bool {
        state.withLock { s in
            let waiting = s.entries.filter { $0.value.waits }
            if waiting.values.count(where: { $0.address == address }) >= limits.waitingPerAddress { return false }
            guard waiting.count >= limits.waitingInAll else { return true }
            guard let old = Self.replaceable(waiting) else { return false }
            Self.close(&s.entries[old]!)
            return true
        }
    }

    /// The oldest waiting connection of the address with the most waiting.
    private static func replaceable(_ waiting: [UInt: Entry]) -> UInt? {
        let byAddress = Dictionary(grouping: waiting, by: { $0.value.address })
        guard let busiest = byAddress.values.max(by: { $0.count < $1.count }) else { return nil }
        return busiest.min { $0.value.waitingSince! < $1.value.waitingSince! }?.key
    }

    /// A connection began (it waits for its first request).
    func started(_ id: UInt, address: [UInt8], fd: Int32, now: UInt64 = monotonicNanos()) {
        state.withLock { $0.entries[id] = Entry(address: address, fd: fd, waitingSince: now) }
    }

    /// Its request arrived whole; `trusted`: it carried the token.
    func received(_ id: UInt, trusted: Bool) {
        state.withLock { s in
            s.entries[id]?.waitingSince = nil
            if trusted { s.entries[id]?.trusted = true }
        }
    }

    /// Its request was answered: it waits for the next one (keep-alive).
    func answered(_ id: UInt, now: UInt64 = monotonicNanos()) {
        state.withLock { s in if s.entries[id] != nil { s.entries[id]!.waitingSince = now } }
    }

    /// libmicrohttpd is about to close it.
    func ended(_ id: UInt) { _ = state.withLock { $0.entries.removeValue(forKey: id) } }

    /// Connections waiting now, in all.
    var waitingCount: Int { state.withLock { $0.entries.values.count(where: \.waits) } }

    /// Closes every connection that has waited longer than `requestSeconds`.
    func expire(now: UInt64 = monotonicNanos()) {
        let cutoff = now &- Self.nanos(limits.requestSeconds)
        state.withLock { s in
            for id in s.entries.keys where s.entries[id]!.waits && s.entries[id]!.waitingSince! < cutoff { Self.close(&s.entries[id]!) }
        }
    }

    /// Starts the thread that expires waiting connections, four times a second.
    func start() {
        let tid = spawnThread { [self] in
            while !state.withLock({ $0.stopped }) {
                usleep(250_000)
                expire()
            }
        }
        state.withLock { $0.watchdog = tid }
    }

    /// Stops that thread and waits for it.
    func stop() {
        let tid = state.withLock { s in defer { s.stopped = true; s.watchdog = nil }; return s.watchdog }
        if let tid { pthread_join(tid, nil) }
    }

    private static func close(_ e: inout Entry) {
        guard !e.closing else { return }
        e.closing = true
        shutdown(e.fd, Int32(SHUT_RDWR))
    }

    private static func nanos(_ seconds: Double) -> UInt64 { UInt64(max(0, seconds) * 1e9) }

    /// The bytes of a client's address: IPv4's four (also when mapped into IPv6), IPv6's sixteen.
    static func addressKey(_ address: UnsafePointer<sockaddr>?) -> [UInt8] {
        guard let address else { return [] }
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { withUnsafeBytes(of: $0.pointee.sin_addr) { Array($0) } }
        case AF_INET6:
            let bytes = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { withUnsafeBytes(of: $0.pointee.sin6_addr) { Array($0) } }
            return bytes.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] ? Array(bytes.suffix(4)) : bytes
        default:
            return []
        }
    }
}
