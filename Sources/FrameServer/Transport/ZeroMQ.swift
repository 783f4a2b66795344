import CFrameServer
import CZMQ
import Glibc

// The one layer over libzmq (swift-nio's shape: one wrapper per C library), `package`-visible so
// the transport, FrameControl's control sockets and FrameBridge's link all go through it.
// framesrv uses one XPUB socket per stream (the doorbell), one SUB socket per subscriber
// (monitors, event-loop consumers), a REP/REQ pair per control request and a DEALER per bridge
// end; everything that matters is in shared memory.
//
// Concurrency: a context is thread-safe (libzmq documents it so), hence `ZMQContext` is Sendable
// and one is shared by the whole process; a socket is not, hence `ZMQSocket` and `ZMQMessage` are
// not Sendable: one thread at a time uses a socket (a type that hands one to its own thread, as
// ControlServer does, says so where it stores it).

/// A ZeroMQ context. Thread-safe, as libzmq's contexts are.
///
/// The corresponding C functions are `zmq_ctx_new`, `zmq_ctx_set` and `zmq_ctx_term`.
package final class ZMQContext: @unchecked Sendable {
    // Sendable: libzmq documents contexts as thread-safe.
    package let handle: UnsafeMutableRawPointer

    /// The process's context for ipc:// (doorbells, control sockets): one I/O thread is plenty.
    /// Never terminated.
    package static let shared = ZMQContext(ioThreads: 1)

    /// A context of its own (the bridge's, for TCP and CURVE): `ioThreads` nil keeps libzmq's default.
    package init(ioThreads: Int32? = nil) {
        handle = zmq_ctx_new()
        if let ioThreads { zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads) }
    }

    /// Terminates the context; call once, after closing every socket made in it (libzmq
    /// blocks until they are closed).
    package func terminate() { zmq_ctx_term(handle) }
}

/// libzmq's message for the last failed call on this thread; call it right after the failure.
///
/// The corresponding C functions are `zmq_strerror` and `zmq_errno`.
package func zmqErrorText() -> String { String(cString: zmq_strerror(zmq_errno())) }

/// A ZeroMQ socket (linger 0). Not thread-safe (as libzmq's sockets are not): one thread uses it.
///
/// The corresponding C functions are `zmq_socket`, `zmq_bind`, `zmq_connect`,
/// `zmq_send`, `zmq_recv` and `zmq_close`.
package final class ZMQSocket {
    package let handle: UnsafeMutableRawPointer
    private var closed = false

    /// A socket of `type` in `context`; `failure` makes the error from libzmq's message.
    package init<E: Error>(type: Int32, context: ZMQContext = .shared, failure: (String) -> E) throws(E) {
        guard let h = zmq_socket(context.handle, type) else { throw failure(zmqErrorText()) }
        handle = h
        setOption(ZMQ_LINGER, 0)
    }

    /// A socket of `type` in the shared context (the transport's).
    package convenience init(type: Int32) throws(TransportError) {
        try self.init(type: type) { TransportError.zeromq("create a socket", $0) }
    }

    deinit { close() }

    /// Closes the socket (again: nothing); before its context's `terminate`.
    package func close() {
        guard !closed else { return }
        closed = true
        zmq_close(handle)
    }

    /// Sets an integer option.
    package func setOption(_ option: Int32, _ value: Int32) {
        var v = value
        zmq_setsockopt(handle, option, &v, MemoryLayout<Int32>.size)
    }

    /// Sets a 64-bit integer option (ZMQ_MAXMSGSIZE).
    package func setInt64Option(_ option: Int32, _ value: Int64) {
        var v = value
        zmq_setsockopt(handle, option, &v, MemoryLayout<Int64>.size)
    }

    /// ZMQ_FD: a descriptor that polls readable when the socket may have events.
    package var descriptor: Int32 {
        var fd: Int32 = -1
        var size = MemoryLayout<Int32>.size
        zmq_getsockopt(handle, ZMQ_FD, &fd, &size)
        return fd
    }

    /// Subscribes a SUB socket to every message.
    package func subscribeAll() { zmq_setsockopt(handle, ZMQ_SUBSCRIBE, "", 0) }

    /// Binds to `endpoint`, first arming the process's accept guard.
    ///
    /// libzmq 4.3.4 aborts the process (SIGABRT, "Too many open files
    /// (src/ipc_listener.cpp:325)") when accepting a connection fails with EMFILE. The guard
    /// in shim.c interposes `accept4`: it refuses (accepts and closes) a connection that
    /// would take one of the last descriptors below the limit, or that arrives when there
    /// are none, counts it (`refusedConnectionCount`), logs one line a second and lets
    /// libzmq see ECONNABORTED, which it ignores.
    ///
    /// The corresponding C function is `zmq_bind`.
    package func bind(_ endpoint: String) throws(TransportError) {
        do { try armConnectionGuard() } catch {
            throw .system(SystemCallError("reserve a descriptor for the connection guard", path: nil, error))
        }
        try bind(endpoint) { TransportError.zeromq("bind \(endpoint)", $0) }
    }

    /// Binds to `endpoint` as it is (no accept guard); `failure` makes the error from libzmq's message.
    ///
    /// The corresponding C function is `zmq_bind`.
    package func bind<E: Error>(_ endpoint: String, failure: (String) -> E) throws(E) {
        guard zmq_bind(handle, endpoint) == 0 else { throw failure(zmqErrorText()) }
    }

    /// Connects to `endpoint` (the transport's error).
    package func connect(_ endpoint: String) throws(TransportError) {
        try connect(endpoint) { TransportError.zeromq("connect to \(endpoint)", $0) }
    }

    /// Connects to `endpoint`; `failure` makes the error from libzmq's message.
    ///
    /// The corresponding C function is `zmq_connect`.
    package func connect<E: Error>(_ endpoint: String, failure: (String) -> E) throws(E) {
        guard zmq_connect(handle, endpoint) == 0 else { throw failure(zmqErrorText()) }
    }

    /// Sends one message (`more`: a part that more follow); without blocking unless `blocking`;
    /// false when it was not queued (high-water mark, no peer).
    @discardableResult
    package func send(_ bytes: UnsafeRawBufferPointer, blocking: Bool = false, more: Bool = false) -> Bool {
        zmq_send(handle, bytes.baseAddress, bytes.count, (blocking ? 0 : ZMQ_DONTWAIT) | (more ? ZMQ_SNDMORE : 0)) >= 0
    }

    /// Receives one message without blocking into `buffer`; its full length, or nil if none is waiting.
    package func receive(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        let n = zmq_recv(handle, buffer.baseAddress, buffer.count, ZMQ_DONTWAIT)
        return n >= 0 ? Int(n) : nil
    }

    /// XPUB: reads every pending (un)subscription message; the net change in subscriptions
    /// (a first byte 1 subscribes, 0 unsubscribes).
    package func drainSubscriptions() -> Int {
        var change = 0
        var byte: UInt8 = 0
        while zmq_recv(handle, &byte, 1, ZMQ_DONTWAIT) >= 0 {
            if byte == 1 { change += 1 } else if byte == 0 { change -= 1 }
        }
        return change
    }

    /// Waits until this socket has a message or one of `fds` is readable.
    /// Returns the readable fd, -1 for the socket, nil on timeout or when a signal
    /// interrupted the wait (`timeoutMillis` -1: forever).
    ///
    /// The corresponding C function is `zmq_poll`.
    package func wait(orReadable fds: [Int32], timeoutMillis: Int) -> Int32? {
        var items = [zmq_pollitem_t(socket: handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0)]
        for fd in fds { items.append(zmq_pollitem_t(socket: nil, fd: fd, events: Int16(ZMQ_POLLIN), revents: 0)) }
        let r = zmq_poll(&items, Int32(items.count), timeoutMillis)
        guard r > 0 else { return nil }
        if items[0].revents != 0 { return -1 }
        return items.dropFirst().first { $0.revents != 0 }?.fd
    }
}

/// One received ZeroMQ message part (owned; the zmq_msg_t never moves: small messages live inside it).
///
/// The corresponding C functions are `zmq_msg_init`, `zmq_msg_data`, `zmq_msg_size` and `zmq_msg_close`.
package final class ZMQMessage {
    package let msg = UnsafeMutablePointer<zmq_msg_t>.allocate(capacity: 1)
    package init() { zmq_msg_init(msg) }
    deinit { zmq_msg_close(msg); msg.deallocate() }
    /// The part's bytes (valid while the message lives).
    package var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: zmq_msg_data(msg), count: zmq_msg_size(msg)) }
}

/// Why a stream's doorbell socket (the producer's XPUB, a consumer's SUB) could not be
/// made, bound or connected.
public enum TransportError: Error, Equatable, Sendable, CustomStringConvertible {
    /// libzmq refused: what it was asked, and its message.
    case zeromq(String, String)
    /// The descriptor the accept guard keeps in reserve could not be opened: raise the
    /// open-file limit (`ulimit -n`).
    case system(SystemCallError)

    public var description: String {
        switch self {
        case .zeromq(let op, let msg): "ZeroMQ could not \(op): \(msg)"
        case .system(let e): e.description
        }
    }
}
