import CFrameServer
import CZMQ
import Glibc

// The thin layer over libzmq. framesrv uses one XPUB socket per stream (the doorbell)
// and one SUB socket per subscriber (monitors, event-loop consumers); everything that matters is in shared memory.

/// A ZeroMQ context. Thread-safe, as libzmq's contexts are; one per process.
final class ZMQContext: @unchecked Sendable {
    // Sendable: libzmq documents contexts as thread-safe.
    let handle: UnsafeMutableRawPointer

    static let shared = ZMQContext()

    private init() {
        handle = zmq_ctx_new()
        // Announcements go over ipc:// only; one I/O thread is plenty.
        zmq_ctx_set(handle, ZMQ_IO_THREADS, 1)
    }
}

func zmqErrorText() -> String { String(cString: zmq_strerror(zmq_errno())) }

/// A ZeroMQ socket. Not thread-safe (as libzmq's sockets are not): one thread uses it.
///
/// The corresponding C functions are `zmq_socket`, `zmq_bind`, `zmq_connect`,
/// `zmq_send`, `zmq_recv` and `zmq_close`.
final class ZMQSocket {
    let handle: UnsafeMutableRawPointer

    init(type: Int32) throws(FrameServerError) {
        guard let h = zmq_socket(ZMQContext.shared.handle, type) else {
            throw .zeromq("create a socket", zmqErrorText())
        }
        handle = h
        setOption(ZMQ_LINGER, 0)
    }

    deinit { zmq_close(handle) }

    func setOption(_ option: Int32, _ value: Int32) {
        var v = value
        zmq_setsockopt(handle, option, &v, MemoryLayout<Int32>.size)
    }

    /// ZMQ_FD: a descriptor that polls readable when the socket may have events.
    var descriptor: Int32 {
        var fd: Int32 = -1
        var size = MemoryLayout<Int32>.size
        zmq_getsockopt(handle, ZMQ_FD, &fd, &size)
        return fd
    }

    func subscribeAll() { zmq_setsockopt(handle, ZMQ_SUBSCRIBE, "", 0) }

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
    func bind(_ endpoint: String) throws(FrameServerError) {
        do { try armConnectionGuard() } catch {
            throw .system("reserve a descriptor for the connection guard", path: nil, error)
        }
        guard zmq_bind(handle, endpoint) == 0 else { throw .zeromq("bind \(endpoint)", zmqErrorText()) }
    }

    func connect(_ endpoint: String) throws(FrameServerError) {
        guard zmq_connect(handle, endpoint) == 0 else { throw .zeromq("connect to \(endpoint)", zmqErrorText()) }
    }

    /// Sends one message without blocking; false when it was dropped (high-water mark).
    @discardableResult
    func send(_ bytes: UnsafeRawBufferPointer) -> Bool {
        zmq_send(handle, bytes.baseAddress, bytes.count, ZMQ_DONTWAIT) >= 0
    }

    /// Receives one message without blocking into `buffer`; its full length, or nil if none is waiting.
    func receive(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        let n = zmq_recv(handle, buffer.baseAddress, buffer.count, ZMQ_DONTWAIT)
        return n >= 0 ? Int(n) : nil
    }

    /// XPUB: reads every pending (un)subscription message; the net change in subscriptions
    /// (a first byte 1 subscribes, 0 unsubscribes).
    func drainSubscriptions() -> Int {
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
    func wait(orReadable fds: [Int32], timeoutMillis: Int) -> Int32? {
        var items = [zmq_pollitem_t(socket: handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0)]
        for fd in fds { items.append(zmq_pollitem_t(socket: nil, fd: fd, events: Int16(ZMQ_POLLIN), revents: 0)) }
        let r = zmq_poll(&items, Int32(items.count), timeoutMillis)
        guard r > 0 else { return nil }
        if items[0].revents != 0 { return -1 }
        return items.dropFirst().first { $0.revents != 0 }?.fd
    }
}
