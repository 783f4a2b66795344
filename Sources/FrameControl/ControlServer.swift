import CZMQ
import FrameServer
import Glibc
import Synchronization

// The serving side of a stream's control socket (`framesrv ctl` asks it: ControlClient.swift).

/// Why a control socket cannot be served or asked (one clear line each).
public enum ControlSocketError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No stream of that name in the runtime directory.
    case noStream(String)
    /// The stream exists but its producer has no control socket (it does not read a file).
    case notControllable(String)
    /// The producer did not answer in time.
    case noAnswer(String, Double)
    /// A ZeroMQ call failed (what, libzmq's message).
    case zeromq(String, String)

    /// The error's one line.
    public var description: String {
        switch self {
        case .noStream(let s): return "no stream '\(s)' (framesrv ls lists them)"
        case .notControllable(let s):
            return "'\(s)' has no control socket: only a producer that reads a file (produce -i FILE, replay) takes controls"
        case .noAnswer(let s, let t):
            return "'\(s)' did not answer within \(t) s (its producer is busy or gone; framesrv clean removes a dead one's files)"
        case .zeromq(let what, let message): return "ZeroMQ: cannot \(what): \(message)"
        }
    }
}

/// A stream's control socket: a ZeroMQ REP socket at `ipc://DIR/NAME.control` (mode 0600,
/// as the stream's other files), served by its own thread, one request per message and one
/// reply each. Generic: the owner says which verbs it takes and handles them in `handler`,
/// which runs on the socket's thread (so it must only record the request, under a lock, for
/// the producer's loop to apply between frames, as `PlaybackClock` does). A verb outside
/// `verbs` and a malformed request get an `error` line without reaching the handler.
///
/// Start it after the stream's `Producer` (whose start removes a dead producer's leftovers,
/// this file among them) and close it first. A process that serves controls without being
/// NAME's producer (a recorder) must hold `NAME.lock` while it serves: `framesrv clean`
/// takes every file of a name whose lock nobody holds for a leftover.
public final class ControlServer: @unchecked Sendable {
    // @unchecked Sendable: the socket (not thread-safe) is used by the serving thread only (after
    // init hands it over) and closed by close after that thread ended; `stopping` is atomic;
    // `thread` is touched by init and close only.
    public let stream: String
    /// The socket file.
    public let path: String
    private let socket: ZMQSocket
    private let verbs: [ControlVerb]
    private let handler: @Sendable (ControlRequest) -> ControlReply
    private let stopping = Atomic<Bool>(false)
    private var thread: pthread_t?

    /// Binds `NAME.control` in `directory` and starts serving. A dead producer's socket
    /// file of the same name is replaced.
    public init(stream: String, directory: RuntimeDirectory, verbs: [ControlVerb],
                handler: @escaping @Sendable (ControlRequest) -> ControlReply) throws(ControlSocketError) {
        self.stream = stream
        self.verbs = verbs
        self.handler = handler
        path = directory.controlSocketPath(stream)
        socket = try ZMQSocket(type: ZMQ_REP) { ControlSocketError.zeromq("create a socket", $0) }
        unlink(path)
        try socket.bind("ipc://" + path) { [path] in ControlSocketError.zeromq("bind ipc://\(path)", $0) }
        try? changeMode(path, 0o600)   // harmless if it fails: the directory is 0700
        thread = spawnThread { [self] in serve() }
    }

    deinit { close() }

    /// Stops serving (within 100 ms), closes the socket and removes its file.
    public func close() {
        guard let t = thread else { return }
        thread = nil
        stopping.store(true, ordering: .releasing)
        pthread_join(t, nil)
        socket.close()
        unlink(path)
    }

    private func serve() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !stopping.load(ordering: .acquiring) {
            guard socket.wait(orReadable: [], timeoutMillis: 100) != nil,
                  let n = buffer.withUnsafeMutableBytes({ socket.receive(into: $0) }) else { continue }
            let text = String(decoding: buffer.prefix(min(n, buffer.count)), as: UTF8.self)
            let reply = Array(answer(text).text.utf8)
            reply.withUnsafeBytes { _ = socket.send($0, blocking: true) }
        }
    }

    /// The reply to one request's text (what the serving thread sends back).
    public func answer(_ text: String) -> ControlReply {
        let request: ControlRequest
        do { request = try ControlRequest.parse(text) } catch { return .error(error.description) }
        guard verbs.contains(request.verb) else {
            return .error("'\(stream)' does not take '\(request.verb.rawValue)' (it takes: \(verbs.map(\.rawValue).joined(separator: ", ")))")
        }
        return handler(request)
    }
}
