import Foundation
import Glibc

/// The file fuzzer's web part: one `framesrv web` on a worker's runtime directory, asked for
/// every route about the damaged stream after each mutation (issue 27 item 2: a preview or a
/// snapshot of a corrupt frame killed the server). It must answer every request (any status),
/// stay alive, and keep listing the healthy stream; one that died is recorded and restarted.
final class FuzzWeb: @unchecked Sendable {
    private let directory: String
    private let healthy: String
    private var process: Spawned
    private var port: UInt16

    /// Starts the server on a free loopback port of `directory`'s streams, and waits until it
    /// lists the stream `listing` (its first sample may predate it).
    init(directory: String, listing healthy: String) throws {
        self.directory = directory
        self.healthy = healthy
        (process, port) = try Self.launch(directory, listing: healthy)
    }

    private static func launch(_ directory: String, listing healthy: String) throws -> (Spawned, UInt16) {
        let p = try Spawned(framesrvPath, ["web", "--listen", "127.0.0.1:0"], environment: ["FRAMESRV_DIR": directory],
                            logDirectory: directory)
        var port: UInt16?
        _ = eventually(timeout: 30) {
            port = p.stdout.split(separator: " ").last.flatMap { URLComponents(string: String($0).trimmingCharacters(in: .whitespacesAndNewlines))?.port }
                .flatMap { UInt16(exactly: $0) }
            return port != nil || !p.isRunning
        }
        guard let port, eventually(timeout: 30, { http(port, "/api/streams")?.text.contains("\"\(healthy)\"") ?? false }) else {
            p.kill()
            throw TestFailure("framesrv web did not start, or does not list '\(healthy)': \(p.stderr.suffix(500))")
        }
        return (p, port)
    }

    /// A route: GET unless it has a body (a control), how much of the answer is read and for
    /// how long, and whether it must answer in that time.
    struct Route {
        let path: String
        var body: String? = nil
        var maxBytes = 8 << 20
        var timeout = 10.0
        var mustAnswer = true
    }

    /// The routes asked about a stream in `state`. The snapshot and the preview wait for a frame
    /// (the snapshot 2 s; the preview's consumer 5 s to attach): with a dead producer none can
    /// come, so they are left after half a second (their consumers have read the damaged control
    /// segment by then). The preview is a stream without an end: it is read up to its first
    /// image's first bytes (that frame was converted by then), for at most a second.
    static func routes(_ stream: String, _ state: FuzzState) -> [Route] {
        let s = "/api/streams/\(stream)", dead = state == .dead
        return ["/api/streams", "/api/top", "/api/graph", "/api/history"].map { Route(path: $0) } + [
            Route(path: s + "/snapshot.png", timeout: dead ? 0.5 : 10, mustAnswer: !dead),
            Route(path: s + "/preview.mjpeg?fps=30&width=64", maxBytes: 400, timeout: dead ? 0.5 : 1, mustAnswer: false),
            Route(path: s + "/control", body: "status"),
        ]
    }

    /// Asks every route about `stream` at once (the check waits for the slowest, not for the
    /// sum), and records each rule broken: a route without a reply, a server that died (then
    /// restarted), or a listing without the healthy stream.
    func check(_ stream: String, _ record: inout FuzzRecord) {
        if !process.isRunning { restart(after: "web (after the mutation before)", &record) }
        let routes = Self.routes(stream, record.state), port = port
        let replies = Locked([HTTPReply?](repeating: nil, count: routes.count))
        let group = DispatchGroup()
        for (i, r) in routes.enumerated() {
            group.enter()
            Thread {
                let reply = http(port, r.path, method: r.body == nil ? "GET" : "POST", body: r.body ?? "", maxBytes: r.maxBytes, timeout: r.timeout)
                replies.withLock { $0[i] = reply }
                group.leave()
            }.start()
        }
        group.wait()
        let got = replies.withLock { $0 }
        // No reply where one is due: a server that crashed is still writing its backtrace for a moment.
        let unanswered = zip(routes, got).contains { $0.mustAnswer && $1 == nil }
        if !process.isRunning || (unanswered && eventually(timeout: 5, { !self.process.isRunning })) {
            return restart(after: "web (the routes of the damaged stream)", &record)
        }
        for (route, reply) in zip(routes, got) {
            let label = "web " + (route.body.map { "POST \(route.path) \($0)" } ?? route.path)
            if reply == nil, route.mustAnswer { record.add(command: label, problem: "no reply", stderr: "") }
            if let reply, route.path == "/api/streams", reply.status != 200 || !reply.text.contains("\"\(healthy)\"") {
                record.add(command: label, problem: "status \(reply.status): healthy stream '\(healthy)' not listed", stderr: reply.text)
            }
        }
    }

    /// Records how the server ended (a crash or a stop) after `label`, and starts a new one.
    private func restart(after label: String, _ record: inout FuzzRecord) {
        record.add(command: label, problem: "\(process.outcome(timeout: 5))", stderr: process.stderr)
        process.removeLogs()
        do { (process, port) = try Self.launch(directory, listing: healthy) } catch { record.setupFailed("\(error)") }
    }

    /// At the end of a run: a server that died after its last request is recorded too.
    func close(_ record: inout FuzzRecord) {
        if !process.isRunning { record.add(command: "web (after the last mutation)", problem: "\(process.outcome(timeout: 5))", stderr: process.stderr) }
        process.kill()
        process.removeLogs()
    }
}
