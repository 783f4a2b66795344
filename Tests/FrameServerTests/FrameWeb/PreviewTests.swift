import Foundation
import FrameMedia
import FrameServer
import FrameWeb
import Testing

/// Live previews (JPEG) and snapshots (PNG) of streams through `PreviewHub`, with ffmpeg's own
/// conversion of the same picture as the oracle; the preview consumer's policy (one per
/// watched stream, gone with its last viewer, never slowing the pipeline).
@Suite(.serialized) struct PreviewTests {
    /// A one-frame BT.709 limited-range clip of colour bars (flat areas: JPEG keeps them within
    /// a level, while reading them with the wrong matrix or range is 7 to 11 levels off).
    /// `colour`: the clip's ffmpeg tags.
    func barsClip(_ scratch: Scratch, colour: String = bt709Tags) throws -> String {
        let path = scratch.file("bars.mkv")
        let (status, _, err) = try shell("ffmpeg -v error -y -f lavfi -i pal100bars=s=320x240:r=25 -frames:v 1 -c:v ffv1 -pix_fmt yuv420p"
                                         + " \(colour) '\(path)'", scratch)
        guard status == 0 else { throw TestFailure("ffmpeg could not make the clip: \(err)") }
        return path
    }

    /// The clip looped at its rate (25 frames/s) into `stream`, converted to `pixelFormat` if given.
    func produceBars(_ clip: String, _ stream: String, pixelFormat: String?, _ scratch: Scratch) throws -> Spawned {
        let producer = try scratch.start(["produce", "-i", clip, "--loop", "-1", "--readrate", "1", "--out", stream]
                                         + (pixelFormat.map { ["--pix-fmt", $0] } ?? []))
        guard eventually(timeout: 10, { (scratch.snapshot(stream)?.published ?? 0) > 0 }) else {
            producer.kill()
            throw TestFailure("the producer did not start: \(producer.stderr)")
        }
        return producer
    }

    /// ffmpeg's rgb24 of `image`, written to `name`, at its own size.
    func decodeRGB(_ image: [UInt8], name: String, _ scratch: Scratch) throws -> [UInt8] {
        let path = scratch.file(name)
        try Data(image).write(to: URL(fileURLWithPath: path))
        let (status, out, err) = try shell("ffmpeg -v error -i '\(path)' -f rawvideo -pix_fmt rgb24 -", scratch)
        guard status == 0 else { throw TestFailure("ffmpeg cannot decode \(name): \(err)") }
        return Array(out)
    }

    /// ffmpeg's rgb24 of `clip` through the filters `vf`.
    func ffmpegRGB(_ clip: String, vf: String, _ scratch: Scratch) throws -> [UInt8] {
        let (status, out, err) = try shell("ffmpeg -v error -i '\(clip)' -vf '\(vf)' -f rawvideo -pix_fmt rgb24 -", scratch)
        guard status == 0 else { throw TestFailure("ffmpeg cannot convert the clip: \(err)") }
        return Array(out)
    }

    /// Mean and largest absolute difference of two equally long byte arrays.
    func difference(_ a: [UInt8], _ b: [UInt8]) -> (mean: Double, max: Int) {
        guard a.count == b.count, !a.isEmpty else { return (.infinity, Int.max) }
        var sum = 0, largest = 0
        for i in a.indices {
            let d = abs(Int(a[i]) - Int(b[i]))
            sum += d
            largest = max(largest, d)
        }
        return (Double(sum) / Double(a.count), largest)
    }

    static let bt709Tags = "-colorspace bt709 -color_primaries bt709 -color_trc bt709 -color_range tv"
    static let bt2020PCTags = "-colorspace bt2020nc -color_primaries bt2020 -color_trc bt2020-10 -color_range pc"
    static let bt709tv = "in_color_matrix=bt709:in_range=tv"
    /// ffmpeg's scale options for snapshots (exact) and previews (its default flags).
    static let exact = "out_range=pc:flags=bicubic+accurate_rnd+full_chroma_int"
    static let fast = "out_range=pc:flags=bicubic"

    /// A preview JPEG, capped to 160 pixels wide, decodes to the picture ffmpeg makes with the
    /// stream's own matrix and range, within a JPEG tolerance: a BT.709 tv yuv420p stream, and
    /// an rgb24 one (the producer's conversion, as ffmpeg's default scale does it), and a
    /// BT.2020 full-range yuv420p one.
    @Test(arguments: [(bt709Tags, "yuv420p", "scale=160:120:\(bt709tv):\(fast)"),
                      (bt709Tags, "rgb24", "scale=\(bt709tv):flags=bicubic,format=rgb24,scale=160:120:\(fast)"),
                      (bt2020PCTags, nil, "scale=160:120:in_color_matrix=bt2020:in_range=pc:\(fast)")])
    func previewJPEGMatchesTheFrame(_ colour: String, _ pixelFormat: String?, _ oracle: String) throws {
        let scratch = try Scratch()
        let clip = try barsClip(scratch, colour: colour)
        let producer = try produceBars(clip, "v", pixelFormat: pixelFormat, scratch)
        defer { producer.kill() }
        let hub = PreviewHub(directory: scratch.directory)
        defer { hub.close() }
        let viewer = try hub.watch("v", maxFPS: 10, maxWidth: 160)
        defer { viewer.close() }
        let jpeg = try #require(viewer.next(timeout: 10), "a preview image within 10 s")
        #expect(jpeg.starts(with: [0xFF, 0xD8]), "a JPEG file")
        let decoded = try decodeRGB(jpeg, name: "preview.jpg", scratch)
        let (probe, info, _) = try shell("ffprobe -v error -show_entries stream=codec_name,width,height -of csv=p=0 '\(scratch.file("preview.jpg"))'", scratch)
        #expect(probe == 0 && String(decoding: info, as: UTF8.self).hasPrefix("mjpeg,160,120"))
        let d = difference(decoded, try ffmpegRGB(clip, vf: oracle, scratch))
        #expect(d.mean < 2.5, "mean abs difference \(d.mean) (max \(d.max)) against ffmpeg's conversion")
    }

    /// A PNG snapshot of a BT.709 tv stream is ffmpeg's own conversion of it, within one level.
    @Test func snapshotPNGIsFFmpegsConversion() throws {
        let scratch = try Scratch()
        let clip = try barsClip(scratch)
        let producer = try produceBars(clip, "s", pixelFormat: "yuv420p", scratch)
        defer { producer.kill() }
        let hub = PreviewHub(directory: scratch.directory)
        defer { hub.close() }
        let png = try hub.snapshotPNG("s")
        let decoded = try decodeRGB(png, name: "snapshot.png", scratch)
        let d = difference(decoded, try ffmpegRGB(clip, vf: "scale=\(Self.bt709tv):\(Self.exact)", scratch))
        #expect(d.max <= 1, "largest difference \(d.max) (mean \(d.mean)) against ffmpeg's conversion")
        #expect(eventually { scratch.snapshot("s")?.consumers.isEmpty == true }, "the snapshot's consumer is gone")
        #expect(throws: PreviewError.noSuchStream("none")) { try hub.snapshotPNG("none") }
    }

    /// Preview sizes: the frame's own when it fits, else the cap's width, same shape, even.
    @Test func previewSizesAreCappedAndEven() {
        #expect(PreviewEncoder.imageSize(width: 640, height: 360, maxWidth: 1920) == (640, 360))
        #expect(PreviewEncoder.imageSize(width: 1920, height: 1080, maxWidth: 641) == (640, 360))
        #expect(PreviewEncoder.imageSize(width: 321, height: 241, maxWidth: 160) == (160, 120))
        #expect(PreviewEncoder.imageSize(width: 4000, height: 2, maxWidth: 100) == (100, 2))
    }

    /// A baseline JPEG's width and height (its SOF0 segment).
    func jpegSize(_ jpeg: [UInt8]) -> (Int, Int)? {
        var i = 2
        while i + 9 < jpeg.count, jpeg[i] == 0xFF {
            let length = Int(jpeg[i + 2]) << 8 | Int(jpeg[i + 3])
            if jpeg[i + 1] == 0xC0 { return (Int(jpeg[i + 7]) << 8 | Int(jpeg[i + 8]), Int(jpeg[i + 5]) << 8 | Int(jpeg[i + 6])) }
            i += 2 + length
        }
        return nil
    }

    /// Every pixel format framesrv carries, at an odd size, makes a JPEG preview (scaled) and a
    /// PNG snapshot of the expected sizes (in process: one producer, one consumer, one frame each).
    @Test func everyPixelFormatEncodes() throws {
        let scratch = try Scratch()
        let (producer, consumer) = try producerAndConsumer("f", slots: 2, scratch)
        defer { producer.close() }
        let jpeg = PreviewEncoder(.jpeg(quality: 5), maxWidth: 20), png = PreviewEncoder(.png)
        for pixelFormat in PixelFormat.allCases {
            try publishPattern(producer, FrameFormat(pixelFormat, width: 33, height: 17))
            let frame = try nextFrame(consumer)
            let images: ([UInt8], [UInt8])
            do {
                images = (try jpeg.encode(frame), try png.encode(frame))
                frame.release()
            } catch {
                frame.release()
                Issue.record("\(pixelFormat): \(error)")
                continue
            }
            #expect(jpegSize(images.0).map { [$0.0, $0.1] } == [20, 10], "\(pixelFormat)'s preview")
            #expect(images.1.starts(with: [0x89, 0x50, 0x4E, 0x47]) && images.1[16..<24].elementsEqual([0, 0, 0, 33, 0, 0, 0, 17]),
                    "\(pixelFormat)'s snapshot: a 33x17 PNG")
        }
    }

    /// The "web preview" consumers of `stream` in `framesrv ls --json`.
    func previewConsumers(_ stream: String, _ scratch: Scratch) throws -> [[String: Any]] {
        let (status, out, err) = try scratch.run(["ls", "--json"])
        guard status == 0, let rows = try JSONSerialization.jsonObject(with: Data(out.utf8)) as? [[String: Any]] else {
            throw TestFailure("ls --json: \(err)")
        }
        let consumers = rows.first { $0["name"] as? String == stream }?["consumers"] as? [[String: Any]] ?? []
        return consumers.filter { $0["name"] as? String == "web preview" }
    }

    /// Ten viewers of one stream share one "web preview" consumer, each getting images at its
    /// own width; it stays while any viewer is left and goes away with the last one. Caps and
    /// unknown streams are clear errors.
    @Test func tenViewersShareOneConsumerThatGoesWithTheLast() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "t", "--size", "320x240", "--rate", "30"])
        defer { producer.kill() }
        #expect(eventually { scratch.snapshot("t") != nil })
        let hub = PreviewHub(directory: scratch.directory, viewersPerStream: 10, viewersInAll: 11)
        defer { hub.close() }
        let viewers = try (0..<10).map { try hub.watch("t", maxFPS: 10, maxWidth: $0 < 5 ? 160 : 2000) }
        for (i, v) in viewers.enumerated() {
            let jpeg = try #require(v.next(timeout: 10), "viewer \(i) gets an image")
            let size = jpegSize(jpeg)
            #expect(size.map { [$0.0, $0.1] } == (i < 5 ? [160, 120] : [320, 240]), "viewer \(i)'s width")
        }
        #expect(try previewConsumers("t", scratch).count == 1, "one consumer for ten viewers")
        #expect(throws: PreviewError.tooManyViewers(stream: "t", limit: 10)) { try hub.watch("t", maxFPS: 5, maxWidth: 100) }
        #expect(throws: PreviewError.noSuchStream("u")) { try hub.watch("u", maxFPS: 5, maxWidth: 100) }
        #expect(throws: PreviewError.invalidStreamName("a/b")) { try hub.watch("a/b", maxFPS: 5, maxWidth: 100) }
        for v in viewers.prefix(9) { v.close() }
        #expect(viewers[9].next(timeout: 10) != nil, "the last viewer still gets images")
        #expect(try previewConsumers("t", scratch).count == 1)
        viewers[9].close()
        #expect(eventually(timeout: 10) { (try? previewConsumers("t", scratch).isEmpty) ?? false },
                "no 'web preview' consumer once the last viewer closed")
        #expect(hub.viewerCount == 0)
    }

    /// Viewers of one stream get images at their own rates (the consumer at the fastest): a
    /// 5/s viewer gets about a sixth of what a 30/s one gets; one that never reads keeps only
    /// the newest image and counts the rest as missed.
    @Test func eachViewerGetsItsOwnRate() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "r", "--size", "160x120", "--rate", "30"])
        defer { producer.kill() }
        #expect(eventually { scratch.snapshot("r") != nil })
        let hub = PreviewHub(directory: scratch.directory)
        defer { hub.close() }
        let fast = try hub.watch("r", maxFPS: 30, maxWidth: 160), slow = try hub.watch("r", maxFPS: 5, maxWidth: 160)
        defer { fast.close(); slow.close() }
        for _ in 0..<30 { _ = try #require(fast.next(timeout: 5)) }
        let f = fast.counts, s = slow.counts
        let ratio = Double(s.images) / Double(max(1, f.images))
        #expect(ratio > 0.08 && ratio < 0.3, "5/s against 30/s: \(s.images) images against \(f.images)")
        #expect(s.delivered == 0 && s.missed + 1 == s.images, "a viewer that does not read keeps one image")
    }

    /// When the stream ends, its viewers' `next` returns nil without waiting, and the consumer is gone.
    @Test func viewersSeeTheEndOfTheStream() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "e", "--size", "160x120", "--rate", "25", "--frames", "50"])
        defer { producer.kill() }
        #expect(eventually { scratch.snapshot("e") != nil })
        let hub = PreviewHub(directory: scratch.directory)
        defer { hub.close() }
        let viewer = try hub.watch("e", maxFPS: 30, maxWidth: 160)
        defer { viewer.close() }
        var images = 0
        while let _ = viewer.next(timeout: 10) { images += 1 }
        #expect(images > 0 && viewer.hasEnded && viewer.failure == nil, "\(images) images, failure \(String(describing: viewer.failure))")
        #expect(producer.wait(timeout: 10) == 0)
        #expect(viewer.next(timeout: 10) == nil)
    }

    /// A loopback TCP port free now (bound to port 0, then closed).
    func freePort() throws -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { Glibc.close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &addr) { a in
            a.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard fd >= 0, ok else { throw TestFailure("no free port: \(String(cString: strerror(errno)))") }
        return UInt16(bigEndian: addr.sin_port)
    }

    /// A client that sends `GET path` to 127.0.0.1:`port` and then never reads (a 4 KiB
    /// receive buffer); its descriptor, for the caller to close.
    func stalledClient(port: UInt16, path: String) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: \(String(cString: strerror(errno)))") }
        var small: Int32 = 4096
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &addr) { a in
            a.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        let request = Array("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\r\n".utf8)
        guard connected, send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else {
            Glibc.close(fd)
            throw TestFailure("cannot send the request to port \(port): \(String(cString: strerror(errno)))")
        }
        return fd
    }

    /// The "web preview" consumer's row of `stream` in one `framesrv top --json` refresh.
    func previewRow(_ stream: String, _ scratch: Scratch) throws -> [String: Any]? {
        let (status, out, err) = try scratch.run(["top", "--json", "-n", "1"])
        guard status == 0, let line = out.split(separator: "\n").first,
              let top = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
            throw TestFailure("top --json: \(err)")
        }
        let streams = top["streams"] as? [[String: Any]] ?? []
        let consumers = streams.first { $0["name"] as? String == stream }?["consumers"] as? [[String: Any]] ?? []
        return consumers.first { $0["name"] as? String == "web preview" }
    }

    /// A preview client of `framesrv web` that sends its GET and never reads does not slow the
    /// pipeline: a lossless sink still gets every frame, the producer keeps its rate, and the
    /// preview consumer keeps taking the newest frames (its misses counting up) without holding
    /// more than the frame it converts.
    @Test func stalledPreviewClientDoesNotSlowThePipeline() throws {
        let scratch = try Scratch()
        let port = try freePort()
        let web = try scratch.start(["web", "--listen", "127.0.0.1:\(port)"])
        defer { web.kill() }
        let sink = try scratch.start(["sink", "--in", "p", "--null", "--lossless", "--verify", "--stats-json", "--no-reattach", "--quiet"])
        defer { sink.kill() }
        let producer = try scratch.start(["produce", "--pattern", "--out", "p", "--size", "1280x720", "--rate", "50",
                                          "--frames", "300", "--wait-for", "1"])
        defer { producer.kill() }
        #expect(eventually { web.stdout.contains("web: serving") }, "web: \(web.stderr)")
        #expect(eventually { (scratch.snapshot("p")?.published ?? 0) > 0 })
        let client = try stalledClient(port: port, path: "/api/streams/p/preview.mjpeg?fps=30&width=1920")
        defer { Glibc.close(client) }
        #expect(eventually { (try? previewRow("p", scratch)).flatMap { $0 } != nil }, "the preview consumer attached")
        usleep(1_000_000)   // the client's buffers fill up
        let first = try #require(try previewRow("p", scratch))
        usleep(1_000_000)
        let second = try #require(try previewRow("p", scratch))
        let ls = try scratch.run(["ls", "--json"]).stdout
        let row = ((try? JSONSerialization.jsonObject(with: Data(ls.utf8))) as? [[String: Any]])?.first { $0["name"] as? String == "p" }
        let measured = (row?["fps"] as? NSNumber)?.doubleValue ?? 0
        func count(_ row: [String: Any], _ key: String) -> Int { (row[key] as? NSNumber)?.intValue ?? -1 }
        #expect(count(second, "delivered") > count(first, "delivered"), "the preview consumer keeps taking frames: \(first) \(second)")
        #expect(count(second, "missed") > count(first, "missed"), "and counts what it skips")
        #expect(count(second, "held") <= 1)
        #expect(measured > 50 * 0.7, "the producer keeps its rate (\(measured) frames/s of 50): \(ls)")
        #expect(producer.wait(timeout: 30) == 0, "producer: \(producer.stderr)")
        #expect(sink.wait(timeout: 30) == 0, "sink: \(sink.stderr)")
        let stats = try #require(SinkStats.parse(sink.stdout), "sink: \(sink.stdout)")
        #expect(stats.received == 300 && stats.missed == 0 && stats.corrupt == 0, "the lossless sink got every frame: \(sink.stdout)")
    }
}
