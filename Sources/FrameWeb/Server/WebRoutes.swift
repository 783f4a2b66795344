import FoundationEssentials
import FrameControl
import FrameMonitor
import FrameServer

/// What `framesrv web` serves, and to whom: every request passes `admit` (Host, token, Origin)
/// before `route` answers it.
struct WebRoutes: Sendable {
    static let cookieName = "framesrv_token"

    let address: WebAddress
    let token: WebToken?
    let monitor: WebMonitor
    let preview: PreviewHub?

    /// Nil when the request may be served; otherwise the refusal. `setCookie`: the request
    /// carried the right token in its query, so the answer sets the cookie.
    func admit(_ r: WebRequest) -> (refusal: WebResponse?, setCookie: Bool) {
        if let refusal = checkHost(r) { return (refusal, false) }
        if r.method == "POST", let origin = r.header("Origin"), let host = r.header("Host"),
           origin != "http://" + host, origin != "https://" + host {
            return (.text(403, "403: a control from another site (Origin \(origin))"), false)
        }
        guard let token else { return (nil, false) }
        if let auth = r.header("Authorization"), auth.hasPrefix("Bearer "), token.matches(String(auth.dropFirst(7))) { return (nil, false) }
        if let query = r.query("token") {
            if token.matches(query) { return (nil, true) }
        } else if token.matches(r.cookie(Self.cookieName)) {
            return (nil, false)
        }
        var refusal = WebResponse.text(401, "401: this framesrv web needs its token: open the URL it printed (…/?token=…) "
                                       + "or send 'Authorization: Bearer TOKEN'")
        refusal.headers.append(("WWW-Authenticate", "Bearer realm=\"framesrv\""))
        return (refusal, false)
    }

    /// Nil when the Host header is one `host[:port]` (`HostHeader`) or absent (HTTP/1.0; libmicrohttpd
    /// refuses an HTTP/1.1 request without one) and, on loopback, a loopback name; else the refusal:
    /// 400 for two Host headers or a malformed one (RFC 9110 7.2), 403 for another machine's name.
    func checkHost(_ r: WebRequest) -> WebResponse? {
        guard r.headerCount("Host") <= 1 else { return .text(400, "400: a request has one Host header, not \(r.headerCount("Host"))") }
        guard let text = r.header("Host") else { return nil }
        guard let host = HostHeader(text) else { return .text(400, "400: Host '\(text)' is not HOST[:PORT]") }
        if address.isLoopback, !host.isLoopback {
            // DNS rebinding: a page from elsewhere whose name now resolves to 127.0.0.1.
            return .text(403, "403: Host '\(text)' is not this machine's loopback address")
        }
        return nil
    }

    func route(_ r: WebRequest) -> WebResponse {
        let get = r.method == "GET" || r.method == "HEAD"
        switch r.path {
        case "/" where get: return .html(WebPage.html)
        case "/api/streams" where get: return encoded(monitor.streams())
        case "/api/top" where get: return monitor.top().map(encoded) ?? .error(503, "no sample yet")
        case "/api/graph" where get: return encoded(monitor.graph())
        case "/api/history" where get:
            return encoded(History(interval: monitor.interval, samples: monitor.history(since: r.query("since").flatMap(Double.init))))
        default: break
        }
        // /api/streams/NAME/WHAT
        let parts = r.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "api", parts[2] == "streams" else {
            return .error(404, "no such page: \(r.method) \(r.path) (see the README's Web view section)")
        }
        let name = parts[3]
        switch (parts[4], r.method) {
        case ("control", "POST"): return control(name, String(decoding: r.body, as: UTF8.self))
        case ("control", _): return .error(405, "control takes POST with a body such as 'pause', 'seek 10' or 'rate 2'")
        case ("snapshot.png", _) where get: return snapshot(name)
        case ("levels.json", _) where get: return levels(name)
        case ("preview.mjpeg", _) where get:
            return watch(name, fps: r.query("fps").flatMap(Double.init) ?? 5, width: r.query("width").flatMap(Int.init) ?? 640)
        default: return .error(404, "no such page: \(r.method) \(r.path) (see the README's Web view section)")
        }
    }

    struct History: Encodable {
        let interval: Double
        let samples: [HistoryPoint]
    }

    func encoded<T: Encodable>(_ value: T) -> WebResponse {
        guard let text = try? encodeJSON(value) else { return .error(500, "could not encode the answer") }
        return .json(text)
    }

    /// A stream name from the URL, checked: a valid name of a stream that exists.
    func checkedStream(_ name: String) -> WebResponse? {
        if (try? validateStreamName(name)) == nil { return .error(400, "'\(name)' is not a stream name") }
        guard let directory = monitor.directory(), directory.streamNames().contains(name) else { return .error(404, "no stream named '\(name)'") }
        return nil
    }

    /// `framesrv ctl NAME BODY`: the reply as {"ok": TEXT}, the status's JSON, or {"error": ...}.
    func control(_ name: String, _ body: String) -> WebResponse {
        if let refusal = checkedStream(name) { return refusal }
        guard let directory = monitor.directory() else { return .error(404, "no stream named '\(name)'") }
        let request: ControlRequest
        do { request = try ControlRequest.parse(body.trimmed) } catch {
            return .error(400, error.description)
        }
        do {
            switch try ControlClient.send(request, to: name, directory: directory) {
            case .ok(let text): return .json((try? jsonString(["ok": text.isEmpty ? "ok" : text])) ?? "{}")
            case .json(let text): return .json(text)
            case .error(let message): return .error(409, message)
            }
        } catch {
            return .error(409, error.description)
        }
    }

    func snapshot(_ name: String) -> WebResponse {
        if let refusal = checkedStream(name) { return refusal }
        guard let preview else { return .error(503, "previews are not available in this build") }
        do {
            let png = try preview.snapshotPNG(name)
            return WebResponse(status: 200, contentType: "image/png", body: .bytes(png),
                               headers: [("Content-Disposition", "attachment; filename=\"\(name).png\""), ("Cache-Control", "no-store")])
        } catch {
            return .error(503, "no snapshot of '\(name)': \(error)")
        }
    }

    /// An audio stream's peak and RMS per channel, from its newest frame.
    func levels(_ name: String) -> WebResponse {
        if let refusal = checkedStream(name) { return refusal }
        guard let preview else { return .error(503, "levels are not available in this build") }
        do { return encoded(try preview.levels(name)) } catch { return .error(503, "no levels of '\(name)': \(error)") }
    }

    func watch(_ name: String, fps: Double, width: Int) -> WebResponse {
        if let refusal = checkedStream(name) { return refusal }
        guard let preview else { return .error(503, "previews are not available in this build") }
        guard fps.isFinite, fps > 0 else { return .error(400, "fps must be a positive number") }
        do {
            let feed = try preview.watch(name, maxFPS: min(fps, 30), maxWidth: max(16, min(width, 1920)))
            return WebResponse(status: 200, contentType: "multipart/x-mixed-replace; boundary=\(MJPEGReader.boundary)",
                               body: .mjpeg(feed), headers: [("Cache-Control", "no-store")])
        } catch {
            return .error(503, "no preview of '\(name)': \(error)")
        }
    }
}
