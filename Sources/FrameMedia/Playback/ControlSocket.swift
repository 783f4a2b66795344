import CZMQ
import FrameServer
import Glibc
import Synchronization

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

/// One ZeroMQ context for control sockets, made on first use (thread-safe, as libzmq's are).
private final class ControlContext: @unchecked Sendable {
    // @unchecked Sendable: libzmq documents contexts as thread-safe.
    let handle: UnsafeMutableRawPointer
    static let shared = ControlContext()
    private init() {
        handle = zmq_ctx_new()
        zmq_ctx_set(handle, ZMQ_IO_THREADS, 1)
    }
}

private func zmqMessage() -> String { String(cString: zmq_strerror(zmq_errno())) }

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
    // @unchecked Sendable: the socket is used by the serving thread only (after init hands it
    // over); `stopping` is atomic; `thread` is touched by init and close only.
    public let stream: String
    /// The socket file.
    public let path: String
    private let socket: UnsafeMutableRawPointer
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
        guard let s = zmq_socket(ControlContext.shared.handle, ZMQ_REP) else { throw .zeromq("create a socket", zmqMessage()) }
        socket = s
        var linger: Int32 = 0
        zmq_setsockopt(s, ZMQ_LINGER, &linger, MemoryLayout<Int32>.size)
        unlink(path)
        guard zmq_bind(s, "ipc://" + path) == 0 else {
            let message = zmqMessage()
            zmq_close(s)
            throw .zeromq("bind ipc://\(path)", message)
        }
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
        zmq_close(socket)
        unlink(path)
    }

    private func serve() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !stopping.load(ordering: .acquiring) {
            var item = zmq_pollitem_t(socket: socket, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0)
            guard zmq_poll(&item, 1, 100) > 0 else { continue }
            let n = buffer.withUnsafeMutableBytes { zmq_recv(socket, $0.baseAddress, $0.count, ZMQ_DONTWAIT) }
            guard n >= 0 else { continue }
            let text = String(decoding: buffer.prefix(min(Int(n), buffer.count)), as: UTF8.self)
            var reply = Array(answer(text).text.utf8)
            _ = zmq_send(socket, &reply, reply.count, 0)
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

/// Asks a stream's control socket (`framesrv ctl`).
public enum ControlClient {
    /// Sends `request` to `stream`'s control socket and returns its reply; throws when there
    /// is no such stream, no control socket, or no answer within `timeout` seconds.
    public static func send(_ request: ControlRequest, to stream: String, directory: RuntimeDirectory,
                            timeout: Double = 2) throws(ControlSocketError) -> ControlReply {
        let path = directory.controlSocketPath(stream)
        guard access(path, F_OK) == 0 else {
            throw directory.streamNames().contains(stream) ? .notControllable(stream) : .noStream(stream)
        }
        guard let s = zmq_socket(ControlContext.shared.handle, ZMQ_REQ) else { throw .zeromq("create a socket", zmqMessage()) }
        defer { zmq_close(s) }
        var linger: Int32 = 0
        zmq_setsockopt(s, ZMQ_LINGER, &linger, MemoryLayout<Int32>.size)
        guard zmq_connect(s, "ipc://" + path) == 0 else { throw .zeromq("connect to ipc://\(path)", zmqMessage()) }
        var bytes = Array(request.text.utf8)
        guard zmq_send(s, &bytes, bytes.count, ZMQ_DONTWAIT) >= 0 else { throw .noAnswer(stream, timeout) }
        var item = zmq_pollitem_t(socket: s, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0)
        let deadline = monotonicNanos() + UInt64(timeout * 1e9)
        while true {
            let left = Int64(deadline) - Int64(monotonicNanos())
            guard left > 0 else { throw .noAnswer(stream, timeout) }
            if zmq_poll(&item, 1, Int(left / 1_000_000) + 1) > 0 { break }
        }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let n = buffer.withUnsafeMutableBytes { zmq_recv(s, $0.baseAddress, $0.count, ZMQ_DONTWAIT) }
        guard n >= 0 else { throw .noAnswer(stream, timeout) }
        return ControlReply(text: String(decoding: buffer.prefix(min(Int(n), buffer.count)), as: UTF8.self))
    }
}

extension ControlClient {
    /// `stream`'s playback status when it has a control socket and answers within `timeout`
    /// seconds; nil otherwise (for monitors: ls and top ask every stream, briefly).
    public static func playbackStatus(of stream: String, directory: RuntimeDirectory, timeout: Double = 0.5) -> PlaybackStatus? {
        guard access(directory.controlSocketPath(stream), F_OK) == 0,
              case .json(let text)? = try? send(.status, to: stream, directory: directory, timeout: timeout) else { return nil }
        return PlaybackStatus(json: text)
    }
}
