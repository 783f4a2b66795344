import CMicroHTTPD
import FrameServer
import Glibc
import Synchronization

/// `framesrv web`'s HTTP server: libmicrohttpd with an internal polling thread and a thread per
/// connection (a stalled preview client blocks only its own thread), connection limits that slow
/// clients cannot exhaust (`ConnectionGuard`), an idle timeout and a per-connection memory limit,
/// so memory stays bounded however many clients come.
public final class WebServer: Sendable {
    public static let idleTimeoutSeconds: UInt32 = 15
    /// The largest request body taken (a control such as "seek 12.5").
    static let maxBody = 1024

    let routes: WebRoutes
    let connections: ConnectionGuard
    private let daemon = Mutex<Daemon?>(nil)
    private let stopping = Atomic<Bool>(false)

    public init(address: WebAddress, token: WebToken?, monitor: WebMonitor, preview: PreviewHub?, limits: ConnectionLimits = .standard) {
        routes = WebRoutes(address: address, token: token, monitor: monitor, preview: preview)
        connections = ConnectionGuard(limits)
    }

    /// Starts listening and returns the port (the one chosen for port 0); throws when the address
    /// is not loopback and there is no token, or cannot be bound.
    @discardableResult
    public func start() throws(WebError) -> UInt16 {
        let a = routes.address
        // Off loopback, anyone who can reach the address could watch and control the streams.
        guard a.isLoopback || routes.token != nil else { throw .tokenRequired(a.description) }
        let flags = fs_mhd_thread_per_connection | (a.ipv6 ? fs_mhd_ipv6 : 0)
        let context = Unmanaged.passUnretained(self).toOpaque()
        let started: OpaquePointer? = withSocketAddress(a) { sockaddr in
            fs_mhd_start(flags, sockaddr, webAccept, webHandler, context, webCompleted, webConnection,
                         UInt32(connections.limits.total), Self.idleTimeoutSeconds, 64 * 1024, 512 * 1024)
        }
        guard let started else { throw .cannotListen("cannot listen on \(a): \(String(cString: strerror(errno))) (is the port in use?)") }
        daemon.withLock { $0 = Daemon(pointer: started) }
        connections.start()
        let port = fs_mhd_bound_port(started)
        return port == 0 ? a.port : port
    }

    /// Stops accepting, ends the previews and waits for the connections' threads.
    public func stop() {
        stopping.store(true, ordering: .relaxed)
        if let d = daemon.withLock({ d in defer { d = nil }; return d }) { MHD_stop_daemon(d.pointer) }
        connections.stop()
        routes.preview?.close()
    }

    var isStopping: Bool { stopping.load(ordering: .relaxed) }
}

/// The running daemon: used from one thread at a time (start, then stop).
private struct Daemon: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Calls `body` with `a` as a sockaddr_in or sockaddr_in6.
private func withSocketAddress<T>(_ a: WebAddress, _ body: (UnsafePointer<sockaddr>) -> T) -> T {
    if a.ipv6 {
        var s = sockaddr_in6()
        s.sin6_family = sa_family_t(AF_INET6)
        s.sin6_port = a.port.bigEndian
        _ = inet_pton(AF_INET6, a.host, &s.sin6_addr)
        return withUnsafePointer(to: &s) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
    }
    var s = sockaddr_in()
    s.sin_family = sa_family_t(AF_INET)
    s.sin_port = a.port.bigEndian
    _ = inet_pton(AF_INET, a.host, &s.sin_addr)
    return withUnsafePointer(to: &s) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1, body) }
}

/// A POST's body, gathered over the handler's calls (its pointer is MHD's per-request `req_cls`).
final class RequestBody {
    var bytes: [UInt8] = []
    var tooLarge = false
}

private let webHandler: MHD_AccessHandlerCallback = { context, connection, url, method, _, upload, uploadSize, requestContext in
    let server = webServer(context)
    let method = String(cString: method!)
    // A body comes over several calls: the first says a request began, the last has no data.
    if method == "POST" {
        if requestContext!.pointee == nil {
            requestContext!.pointee = Unmanaged.passRetained(RequestBody()).toOpaque()
            return .YES
        }
        let body = Unmanaged<RequestBody>.fromOpaque(requestContext!.pointee!).takeUnretainedValue()
        if let size = uploadSize?.pointee, size > 0 {
            if body.bytes.count + size <= WebServer.maxBody, let upload {
                body.bytes += UnsafeRawBufferPointer(start: upload, count: size)
            } else {
                body.tooLarge = true
            }
            uploadSize!.pointee = 0
            return .YES
        }
        return server.answer(connection!, url: String(cString: url!), method: method, body: body)
    }
    return server.answer(connection!, url: String(cString: url!), method: method, body: nil)
}

private let webCompleted: MHD_RequestCompletedCallback = { context, connection, requestContext, _ in
    if let p = requestContext?.pointee { Unmanaged<RequestBody>.fromOpaque(p).release() }
    requestContext?.pointee = nil
    if let connection { webServer(context).connections.answered(connectionID(connection)) }
}

/// At accept: the connection guard's word on the client's address.
private let webAccept: MHD_AcceptPolicyCallback = { context, address, _ in
    webServer(context).connections.mayAccept(ConnectionGuard.addressKey(address)) ? .YES : .NO
}

/// A connection's start and end, for the connection guard.
private let webConnection: MHD_NotifyConnectionCallback = { context, connection, _, code in
    guard let connection else { return }
    let id = connectionID(connection), guarded = webServer(context).connections
    if code == fs_mhd_connection_started {
        guarded.started(id, address: ConnectionGuard.addressKey(fs_mhd_connection_address(connection)), fd: fs_mhd_connection_fd(connection))
    } else {
        guarded.ended(id)
    }
}

private func webServer(_ context: UnsafeMutableRawPointer?) -> WebServer { Unmanaged<WebServer>.fromOpaque(context!).takeUnretainedValue() }

/// The connection guard's key of a connection: its address.
func connectionID(_ connection: OpaquePointer) -> UInt { UInt(bitPattern: Int(bitPattern: UnsafeRawPointer(connection))) }

extension WebServer {
    func answer(_ connection: OpaquePointer, url: String, method: String, body: RequestBody?) -> MHD_Result {
        func value(_ kind: MHD_ValueKind, _ key: String) -> String? {
            MHD_lookup_connection_value(connection, kind, key).map { String(cString: $0) }
        }
        var request = WebRequest(method: method, path: url, query: { value(.GET_ARGUMENT_KIND, $0) },
                                 header: { value(.HEADER_KIND, $0) }, headerCount: { Int(fs_mhd_header_count(connection, $0)) },
                                 cookie: { value(.COOKIE_KIND, $0) })
        let (refusal, setCookie) = routes.admit(request)
        // A token holder's connection never waits again; a refused request ends its connection.
        connections.received(connectionID(connection), trusted: refusal == nil && routes.token != nil)
        var response: WebResponse
        if var refusal {
            refusal.headers.append(("Connection", "close"))
            response = refusal
        } else if body?.tooLarge == true {
            response = .error(413, "a request body is at most \(Self.maxBody) bytes")
        } else {
            request.body = body?.bytes ?? []
            response = routes.route(request)
        }
        if setCookie, let token = routes.token {
            response.headers.append(("Set-Cookie", "\(WebRoutes.cookieName)=\(token.value); Path=/; HttpOnly; SameSite=Strict"))
        }
        return send(response, on: connection)
    }

    func send(_ response: WebResponse, on connection: OpaquePointer) -> MHD_Result {
        let made: OpaquePointer?
        switch response.body {
        case .bytes(let bytes):
            made = bytes.withUnsafeBytes { b in
                fs_mhd_response_copy(b.count, b.baseAddress)
            }
        case .mjpeg(let feed):
            let reader = MJPEGReader(feed) { [weak self] in self?.isStopping ?? true }
            made = MHD_create_response_from_callback(fs_mhd_size_unknown, 64 * 1024, { context, _, buffer, max in
                Unmanaged<MJPEGReader>.fromOpaque(context!).takeUnretainedValue().read(into: buffer!, max: max)
            }, Unmanaged.passRetained(reader).toOpaque(), { context in
                let reader = Unmanaged<MJPEGReader>.fromOpaque(context!).takeRetainedValue()
                reader.feed.close()
            })
        }
        guard let made else { return .NO }
        defer { MHD_destroy_response(made) }
        _ = MHD_add_response_header(made, "Content-Type", response.contentType)
        _ = MHD_add_response_header(made, "X-Content-Type-Options", "nosniff")
        _ = MHD_add_response_header(made, "Referrer-Policy", "no-referrer")
        for (name, value) in response.headers { _ = MHD_add_response_header(made, name, value) }
        return MHD_queue_response(connection, response.status, made)
    }
}
