import Foundation
import Glibc

/// An HTTP/1.0 reply as read off the socket: status, raw header block, body bytes.
struct HTTPReply {
    let status: Int
    let headers: String
    let body: [UInt8]

    var text: String { String(decoding: body, as: UTF8.self) }
    func header(_ name: String) -> [String] {
        headers.split(separator: "\r\n").compactMap { line in
            let parts = line.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == name.lowercased() else { return nil }
            return parts[1].trimmingCharacters(in: .whitespaces)
        }
    }
    var json: Any? { try? JSONSerialization.jsonObject(with: Data(body)) }
}

/// One request to 127.0.0.1:`port` over a fresh TCP connection (HTTP/1.0: the server closes it
/// after the reply), reading at most `maxBytes` or for at most `timeout` seconds. Nil if the
/// connection failed or no status line came.
func http(_ port: UInt16, _ path: String, method: String = "GET", headers: [String: String] = [:], body: String = "",
          maxBytes: Int = 8 << 20, timeout: Double = 10) -> HTTPReply? {
    var request = "\(method) \(path) HTTP/1.0\r\n"
    var all = ["Host": "127.0.0.1:\(port)"].merging(headers) { $1 }
    if !body.isEmpty { all["Content-Length"] = "\(body.utf8.count)" }
    for (k, v) in all { request += "\(k): \(v)\r\n" }
    return rawHTTP(port, request + "\r\n" + body, maxBytes: maxBytes, timeout: timeout)
}

/// `request` as it is (every byte the test chose: two Host headers, say) to 127.0.0.1:`port`
/// over a fresh TCP connection, and the reply as `http` reads it.
func rawHTTP(_ port: UInt16, _ request: String, maxBytes: Int = 8 << 20, timeout: Double = 10) -> HTTPReply? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    // Each read waits at most a second, and no longer than the whole `timeout`.
    let slice = min(1, max(0.01, timeout))
    var tv = timeval(tv_sec: Int(slice), tv_usec: Int((slice - slice.rounded(.down)) * 1e6))
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { return nil }
    let sent = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    guard sent > 0 else { return nil }
    var data: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    let deadline = Date().addingTimeInterval(timeout)
    while data.count < maxBytes, Date() < deadline {
        let n = recv(fd, &chunk, chunk.count, 0)
        if n > 0 { data += chunk[..<n] } else if n == 0 { break } else if errno != EAGAIN && errno != EINTR { break }
    }
    guard let end = data.indices.dropLast(3).first(where: { data[$0] == 13 && data[$0 + 1] == 10 && data[$0 + 2] == 13 && data[$0 + 3] == 10 }) else {
        return nil
    }
    let head = String(decoding: data[..<end], as: UTF8.self)
    let statusLine = head.split(separator: "\r\n").first ?? ""
    let fields = statusLine.split(separator: " ")
    guard fields.count >= 2, let status = Int(fields[1]) else { return nil }
    return HTTPReply(status: status, headers: head, body: Array(data[(end + 4)...]))
}

/// Whether `bytes` contains `pattern` anywhere.
func contains(_ bytes: [UInt8], _ pattern: [UInt8]) -> Bool {
    guard !pattern.isEmpty, bytes.count >= pattern.count else { return false }
    for i in 0...(bytes.count - pattern.count) where bytes[i] == pattern[0] && Array(bytes[i..<(i + pattern.count)]) == pattern { return true }
    return false
}
