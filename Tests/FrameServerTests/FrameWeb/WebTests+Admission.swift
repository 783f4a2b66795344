import Foundation
import Glibc
import Testing

/// A preview whose consumer the stream cannot admit is refused before its headers (issue 26
/// item 5): 503 with the reason, as the snapshot of the same stream says, never a 200 with an
/// empty body.
extension WebTests {
    @Test func aPreviewThatCannotBeAdmittedIs503WithTheSnapshotsReason() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "full", "--size", "160x120", "--rate", "30", "--slots", "8"])
        defer { producer.kill() }
        let sinks = try (0..<3).map { _ in try scratch.start(["sink", "--in", "full", "--null", "--live", "--quiet"]) }
        defer { for s in sinks { s.kill() } }
        #expect(eventually { (scratch.snapshot("full")?.consumers.count ?? 0) == 3 }, "three live sinks attached")
        let (web, port, _) = try startWeb(scratch)
        defer { web.kill() }
        let snapshot = try #require(http(port, "/api/streams/full/snapshot.png"), "the snapshot is answered")
        #expect(snapshot.status == 503, "the snapshot: \(snapshot.status) \(snapshot.text)")
        let reason = try #require(snapshot.text.range(of: "no snapshot of 'full': ").map { String(snapshot.text[$0.upperBound...]) })
        #expect(reason.contains("live consumer"), "the snapshot says why: \(snapshot.text)")
        let preview = try #require(http(port, "/api/streams/full/preview.mjpeg?fps=5&width=160", maxBytes: 4096, timeout: 10),
                                   "the preview is answered")
        #expect(preview.status == 503, "the preview: \(preview.status), \(preview.body.count) bytes: \(preview.text)")
        #expect(preview.text.contains("no preview of 'full': ") && preview.text.hasSuffix(reason), "the snapshot's reason: \(preview.text)")
        // The refused viewer leaves nothing behind: once a sink goes, a preview is admitted and shows frames.
        sinks[0].kill()
        #expect(eventually { (scratch.snapshot("full")?.consumers.count ?? 0) == 2 })
        let admitted = try #require(http(port, "/api/streams/full/preview.mjpeg?fps=5&width=160", maxBytes: 4096, timeout: 10))
        #expect(admitted.status == 200 && contains(admitted.body, Array("Content-Type: image/jpeg".utf8)), "then admitted: \(admitted.status)")
        #expect(web.isRunning)
    }
}
