import CZMQ
import FrameServer
import Glibc
import Synchronization

/// The receiver's authenticator: a ZAP handler (ZeroMQ RFC 27) on a thread of its own, a REP
/// socket at inproc://zeromq.zap.01 in the bridge's context. libzmq asks it about every CURVE
/// handshake; it answers 200 for a client key on the allow-list and 400 for any other, so a
/// refused client's connection is closed before any message passes. Each refusal is logged as
/// one line on standard error with the peer's address, at most once per address every
/// `logInterval` seconds. SIGHUP re-reads the allow-list (at the next handshake; a list that no
/// longer reads keeps the previous one, with a line saying why); connections already
/// authenticated stay up.
final class ZAPHandler: @unchecked Sendable {
    // @unchecked Sendable: the socket is used only by the handler's thread after start; the
    // allow-list is immutable; the log throttle is touched by that thread alone.
    static let endpoint = "inproc://zeromq.zap.01"
    static let logInterval: Double = 5

    /// The contexts that have a handler (one per context: libzmq allows one ZAP endpoint).
    private static let started = Mutex<Set<UInt>>([])

    private let socket: UnsafeMutableRawPointer
    private var allowList: AllowList
    private var lastLogged: [String: Double] = [:]
    private var suppressed: [String: Int] = [:]

    private init(socket: UnsafeMutableRawPointer, allowList: AllowList) {
        self.socket = socket
        self.allowList = allowList
    }

    /// Starts `context`'s handler unless it has one. The socket is bound before this returns, so
    /// no handshake can happen without it (libzmq 4.3 accepts CURVE clients when no handler is bound).
    static func start(context: UnsafeMutableRawPointer, allowList: AllowList) throws(BridgeSecurityError) {
        let key = UInt(bitPattern: context)
        let already = started.withLock { !$0.insert(key).inserted }
        if already { return }
        guard let socket = zmq_socket(context, ZMQ_REP) else {
            started.withLock { _ = $0.remove(key) }
            throw .zeromq("create the ZAP handler's socket", zmqErrorText())
        }
        var linger: Int32 = 0
        zmq_setsockopt(socket, ZMQ_LINGER, &linger, MemoryLayout<Int32>.size)
        guard zmq_bind(socket, endpoint) == 0 else {
            let reason = zmqErrorText()
            zmq_close(socket)
            started.withLock { _ = $0.remove(key) }
            throw .zeromq("bind the ZAP handler at \(endpoint)", reason)
        }
        let handler = ZAPHandler(socket: socket, allowList: allowList)
        installReloadOnHangup()
        pthread_detach(spawnThread {
            unblockHangup()   // here at least, whatever mask the process was started with
            handler.serve()
            // Forgotten before the socket closes: zmq_ctx_term cannot return (and the context's
            // address be reused by a new context, which must get a handler of its own) until then.
            started.withLock { _ = $0.remove(key) }
            zmq_close(handler.socket)
        })
    }

    /// Answers requests until the context is terminated (ETERM); the caller then closes the
    /// socket so zmq_ctx_term can finish.
    private func serve() {
        while let request = receiveRequest() {
            let reply = answer(request)
            for (i, frame) in reply.enumerated() {
                let more = i + 1 < reply.count ? ZMQ_SNDMORE : 0
                let r = frame.withUnsafeBytes { zmq_send(socket, $0.baseAddress, $0.count, more) }
                if r < 0, zmq_errno() == ETERM { return }
            }
        }
    }

    /// One request's frames; nil when the context is terminated.
    private func receiveRequest() -> [[UInt8]]? {
        var frames: [[UInt8]] = []
        while true {
            var message = zmq_msg_t()
            zmq_msg_init(&message)
            defer { zmq_msg_close(&message) }
            guard zmq_msg_recv(&message, socket, 0) >= 0 else {
                if zmq_errno() == EINTR { continue }
                return nil
            }
            let size = zmq_msg_size(&message)
            frames.append(size == 0 ? [] : Array(UnsafeRawBufferPointer(start: zmq_msg_data(&message), count: size)))
            if zmq_msg_more(&message) == 0 { return frames }
        }
    }

    /// RFC 27's reply: version, request id, status code, status text, user id, metadata.
    private func answer(_ f: [[UInt8]]) -> [[UInt8]] {
        if reloadRequested.exchange(0, ordering: .relaxed) != 0 { reload() }
        let requestID = f.count > 1 ? f[1] : []
        func reply(_ code: String, _ text: String, user: String = "") -> [[UInt8]] {
            [Array("1.0".utf8), requestID, Array(code.utf8), Array(text.utf8), Array(user.utf8), []]
        }
        guard f.count >= 6, f[0] == Array("1.0".utf8) else { return reply("500", "malformed ZAP request") }
        let address = String(decoding: f[3], as: UTF8.self)
        let mechanism = String(decoding: f[5], as: UTF8.self)
        guard mechanism == "CURVE", f.count >= 7, let key = CurveKey(binary: f[6]) else {
            refuse(address, "it did not authenticate with CURVE (\(mechanism))")
            return reply("400", "CURVE required")
        }
        guard let name = allowList.name(of: key) else {
            refuse(address, "its public key \(key.z85) is not on the allow-list \(allowList.path)")
            return reply("400", "key not allowed")
        }
        return reply("200", "OK", user: name.isEmpty ? key.z85 : name)
    }

    /// Re-reads the allow-list after SIGHUP; keeps the previous one when the file does not read.
    private func reload() {
        do {
            allowList = try AllowList(path: allowList.path)
            logLine("framesrv bridge: SIGHUP: reloaded \(allowList.path): \(allowList.entries.count) allowed sender keys")
        } catch {
            logLine("framesrv bridge: SIGHUP: keeping the previous allow-list: \(error)")
        }
        lastLogged = [:]
        suppressed = [:]
    }

    /// Makes SIGHUP request a reload (restarting interrupted calls: nothing else sees EINTR).
    ///
    /// The corresponding C function is `sigaction`.
    private static func installReloadOnHangup() {
        _ = reloadRequested.load(ordering: .relaxed)   // initialised before the handler can run
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in reloadRequested.store(1, ordering: .relaxed) }
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        sigaction(SIGHUP, &action, nil)
        unblockHangup()
    }

    /// Unblocks SIGHUP in the calling thread (a parent may have started this process with it
    /// blocked, as posix_spawn and Foundation's Process pass their mask on).
    ///
    /// The corresponding C function is `pthread_sigmask`.
    private static func unblockHangup() {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGHUP)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// Logs a refusal, at most once per address every logInterval seconds (how many were not logged is said next time).
    private func refuse(_ address: String, _ why: String) {
        let now = monotonicSeconds()
        let peer = address.isEmpty ? "an unknown address" : address
        if let last = lastLogged[peer], now - last < Self.logInterval {
            suppressed[peer, default: 0] += 1
            return
        }
        lastLogged[peer] = now
        let more = suppressed.removeValue(forKey: peer).map { " (and \($0) more refusals not logged)" } ?? ""
        logLine("framesrv bridge: refused a client at \(peer): \(why)\(more)")
        if lastLogged.count > 4096 { lastLogged = lastLogged.filter { now - $0.value < Self.logInterval } }
    }
}

/// Set by SIGHUP (an atomic store: async-signal-safe), taken by the handler's thread.
private let reloadRequested = Atomic<Int32>(0)

/// One line on standard error, in one write(2).
func logLine(_ message: String) {
    var line = message + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}

func monotonicSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}
