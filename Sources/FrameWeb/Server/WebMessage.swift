/// A request as the routes see it: method, path, and lookups into its query, headers and cookies.
struct WebRequest {
    let method: String
    let path: String
    let query: (String) -> String?
    let header: (String) -> String?
    /// How many header fields have the name (a lookup sees only the first).
    let headerCount: (String) -> Int
    let cookie: (String) -> String?
    var body: [UInt8] = []
}

/// A response: a status, headers and a body, or a live MJPEG stream.
struct WebResponse {
    enum Body {
        case bytes([UInt8])
        case mjpeg(PreviewViewer)
    }
    var status: UInt32
    var contentType: String
    var body: Body
    var headers: [(String, String)] = []

    static func text(_ status: UInt32, _ message: String) -> WebResponse {
        WebResponse(status: status, contentType: "text/plain; charset=utf-8", body: .bytes(Array((message + "\n").utf8)))
    }

    static func json(_ text: String) -> WebResponse {
        WebResponse(status: 200, contentType: "application/json", body: .bytes(Array((text + "\n").utf8)))
    }

    /// The page: nothing from elsewhere (its script and style are inline), never in another site's frame.
    static func html(_ text: String) -> WebResponse {
        WebResponse(status: 200, contentType: "text/html; charset=utf-8", body: .bytes(Array(text.utf8)),
                    headers: [("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                                + "img-src 'self'; connect-src 'self'; frame-ancestors 'none'"),
                              ("X-Frame-Options", "DENY"), ("Cache-Control", "no-store")])
    }

    /// A JSON error object: {"error": "..."}.
    static func error(_ status: UInt32, _ message: String) -> WebResponse {
        var r = json((try? jsonString(["error": message])) ?? "{}")
        r.status = status
        return r
    }
}

import FoundationEssentials

func jsonString(_ value: [String: String]) throws -> String {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    return String(decoding: try encoder.encode(value), as: UTF8.self)
}
