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

    /// The routes asked about a stream, GET unless a body is given (a control).
    static func routes(_ stream: String) -> [(path: String, body: String?, maxBytes: Int)] {
        let s = "/api/streams/\(stream)"
        return [("/api/streams", nil, 8 << 20), ("/api/top", nil, 8 << 20), ("/api/graph", nil, 8 << 20), ("/api/history", nil, 8 << 20),
                (s + "/snapshot.png", nil, 8 << 20),
                // Up to the first image's first bytes: its frame was converted by then.
                (s + "/preview.mjpeg?fps=30&width=64", nil, 400), (s + "/control", "status", 8 << 20)]
    }

    /// Asks every route about `stream`, and records each rule broken: a route without a reply,
    /// a server that died (then restarted), or a listing without `healthy`.
    func check(_ stream: String, _ record: inout FuzzRecord) {
        if !process.isRunning { restart(after: "web (after the mutation before)", &record) }
        for route in Self.routes(stream) {
            let label = "web " + (route.body.map { "POST \(route.path) \($0)" } ?? route.path)
            let reply = http(port, route.path, method: route.body == nil ? "GET" : "POST", body: route.body ?? "",
                             maxBytes: route.maxBytes, timeout: 10)
            // No reply: a server that crashed is still writing its backtrace for a moment.
            guard reply != nil || !eventually(timeout: 5, { !self.process.isRunning }), process.isRunning else {
                return restart(after: label, &record)
            }
            guard let reply else {
                record.add(command: label, problem: "no reply", stderr: "")
                continue
            }
            if route.path == "/api/streams", reply.status != 200 || !reply.text.contains("\"\(healthy)\"") {
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
