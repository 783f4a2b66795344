import FrameServer
import FrameWeb
import Glibc

/// `framesrv web`: a page with the chain as a graph, live previews, plots and controls, and a JSON API.
enum WebCommand: Command {
    static let name = "web"
    static let summary = "serve a web page of every stream: graph, live previews, plots, controls, JSON API"
    static let help = """
    usage: framesrv web [--listen HOST:PORT] [--token [TOKEN]]

    Serves the streams of this user's runtime directory (FRAMESRV_DIR, as ls) over HTTP: the chain
    as a graph (fps, lag, misses and latency p50/p99 on each edge), a live MJPEG preview of each
    stream (encoded only while a page shows it), plots of the last 5 minutes, playback controls and
    PNG snapshots, and a JSON API under /api/ (see the README's "Web view"). It reads the shared
    statistics once a second, as top does; previews are short-lived live consumers. A CUDA
    stream's previewed frames are copied to host memory first (one copy per image sent, through
    libframesrv; a machine without the stream's GPU answers with one line).

      --listen HOST:PORT   numeric address (default 127.0.0.1:8080; [::1]:8080 for IPv6; port 0:
                           any free port, printed). Any address but loopback needs --token
      --token [TOKEN]      require a token on every request (page and API): alone, a random one is
                           made and printed with the URL to open (…/?token=…, which sets a cookie);
                           clients may also send 'Authorization: Bearer TOKEN'

    A request must have one Host header, exactly HOST[:PORT]. On loopback, requests whose Host is not
    a loopback name are refused (DNS rebinding), and a POST whose Origin is another site is refused. A request must arrive whole within 5 s; at
    most 64 connections from one address may wait for theirs, and room is kept for clients with
    the token (README: Web view). Stops on SIGINT/SIGTERM.
    """

    static func run(_ o: WebOptions) throws -> ExitStatus {
        let token: WebToken? = switch o.token {
        case .random: WebToken.random()
        case .given(let t): WebToken(t)
        case nil: nil
        }
        installStopHandlers()
        let monitor = WebMonitor()
        let server = WebServer(address: o.address, token: token, monitor: monitor, preview: WebPreviews.make())
        let port = try server.start()   // refused here: off loopback without a token, or a port in use
        defer { server.stop() }
        monitor.start()
        defer { monitor.stop() }
        let url = "http://\(o.address.urlHost):\(port)/" + (token.map { "?token=\($0.value)" } ?? "")
        print("web: serving the streams of \(RuntimeDirectory.defaultPath) on port \(port) of \(o.address.host): open \(url)")
        if o.address.isWildcard {
            var name = [CChar](repeating: 0, count: 256)
            if gethostname(&name, name.count - 1) == 0 {
                let host = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
                print("web: from another machine: http://\(host):\(port)/" + (token.map { "?token=\($0.value)" } ?? ""))
            }
        }
        fflush(nil)   // a test or a log reads the URL while the server runs (nil: every output stream)
        while !StopSignal.requested { usleep(100_000) }
        return .success
    }
}
