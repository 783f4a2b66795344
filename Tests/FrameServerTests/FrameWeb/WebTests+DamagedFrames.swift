import Foundation
import Glibc
import Testing

/// `framesrv web` against a pool a same-user process damaged (issue 27 item 2): the preview
/// and the snapshot read a frame through the one checked road, and refuse it in one line.
extension WebTests {
    /// Every slot says pixel format code 0 with the name yuv444p16le (wider samples than its
    /// yuv420p planes hold) and 16384 rows: the snapshot is a 503 that says why, the preview
    /// ends, and the server goes on serving the healthy stream next to it.
    @Test func aDamagedFrameIsRefusedAndTheServerLives() throws {
        let scratch = try Scratch()
        let healthy = try scratch.start(["produce", "--pattern", "--out", "ok", "--size", "64x48", "--rate", "50"])
        defer { healthy.kill() }
        let damaged = try stoppedDamagedStream("bad", FileMutation.wideSamplesUnderCodeZero, in: scratch)
        defer { damaged.kill() }
        let (web, port, _) = try startWeb(scratch)
        defer { web.kill() }
        let snapshot = try #require(http(port, "/api/streams/bad/snapshot.png", timeout: 10), "no reply: \(web.stderr.suffix(800))")
        #expect(snapshot.status == 503 && snapshot.text.contains("a damaged frame") && snapshot.text.contains("yuv444p16le"),
                "\(snapshot.status) \(snapshot.text)")
        // The preview takes the same road: its consumer meets the frame and ends the preview.
        _ = http(port, "/api/streams/bad/preview.mjpeg?fps=30", maxBytes: 64 << 10, timeout: 3)
        #expect(web.isRunning, "framesrv web died: \(web.stderr.suffix(800))")
        let png = try #require(http(port, "/api/streams/ok/snapshot.png"))
        #expect(png.status == 200 && png.body.starts(with: [0x89, 0x50, 0x4E, 0x47]))
        #expect(http(port, "/api/streams")?.status == 200)
        #expect(web.isRunning, "framesrv web died: \(web.stderr.suffix(800))")
    }
}
