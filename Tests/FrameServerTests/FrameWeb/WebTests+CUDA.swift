import Foundation
import Testing

/// The web view of a CUDA stream (issue 24): its snapshot and preview are a download of the
/// frame (`framesrv_frame_read_on`) into host memory, then the host path's conversion. On a
/// machine without a GPU this runs through libframesrv's stand-in driver (clients/c/tests/
/// fakecuda: device memory is a memfd shared between processes, copies are the CPU's), which
/// runs every CPU-side step; scripts/test-gpu runs the same on a real device.
extension WebTests {
    /// SMPTE bars (every frame the same picture) as a host stream, and `framesrv-cuda upload`
    /// of it as a CUDA stream: the CUDA stream's snapshot is the host stream's PNG, byte for
    /// byte, and its preview sends JPEG parts; a web server that cannot load a CUDA driver
    /// answers the CUDA stream's snapshot with one line, and keeps serving.
    @Test func cudaStreamIsPreviewedThroughADownload() throws {
        let scratch = try Scratch()
        let cuda = ["FRAMESRV_LIBCUDA": try ClientTools.fakeCUDA()]
        let producer = try scratch.start(["produce", "-f", "lavfi", "-i", "smptebars=size=320x240:rate=20", "-re",
                                          "--out", "bars", "--quiet", "--wait-for", "1"])
        defer { producer.kill() }
        let upload = try scratch.start(["upload", "--in", "bars", "--out", "gpu", "--wait", "20"],
                                       executable: try ClientTools.cTool("framesrv-cuda"), environment: cuda)
        defer { upload.kill() }
        #expect(eventually(timeout: 20) { (scratch.snapshot("gpu")?.published ?? 0) > 2 }, "upload: \(upload.stderr)")
        #expect(scratch.snapshot("gpu")?.memory == "cuda")
        let (web, port, _) = try startWeb(scratch, environment: cuda)
        defer { web.kill() }
        let host = try #require(http(port, "/api/streams/bars/snapshot.png", timeout: 10))
        let device = try #require(http(port, "/api/streams/gpu/snapshot.png", timeout: 10))
        #expect(host.status == 200 && host.body.starts(with: [0x89, 0x50, 0x4E, 0x47]), "\(host.status) \(host.text.prefix(200))")
        #expect(device.status == 200 && device.body == host.body, "the CUDA stream's snapshot: \(device.status) \(device.text.prefix(300))")
        let preview = try #require(http(port, "/api/streams/gpu/preview.mjpeg?fps=10&width=160", maxBytes: 16 << 10, timeout: 10))
        #expect(preview.status == 200 && contains(preview.body, Array("Content-Type: image/jpeg".utf8)) && contains(preview.body, [0xFF, 0xD8, 0xFF]),
                "the CUDA stream's preview: \(preview.status) \(preview.text.prefix(300))")
        #expect(web.isRunning, "\(web.stderr.suffix(800))")

        let (driverless, port2, _) = try startWeb(scratch, environment: ["FRAMESRV_LIBCUDA": scratch.file("no-libcuda.so")])
        defer { driverless.kill() }
        let refused = try #require(http(port2, "/api/streams/gpu/snapshot.png", timeout: 10))
        #expect(refused.status == 503 && refused.text.contains("CUDA") && refused.text.split(separator: "\n").count == 1,
                "\(refused.status) \(refused.text)")
        #expect(http(port2, "/api/streams/bars/snapshot.png", timeout: 10)?.status == 200)
        #expect(driverless.isRunning, "\(driverless.stderr.suffix(800))")
    }
}
