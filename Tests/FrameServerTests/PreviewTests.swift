import Foundation
import FrameMedia
import FrameServer
import Testing

/// Live previews (JPEG) and snapshots (PNG) of streams: `PreviewEncoder` on frames of a
/// `--pattern` stream, with ffmpeg's own conversion of the same frame as the oracle.
@Suite(.serialized) struct PreviewTests {
    /// One frame of `stream`, encoded in process by a short-lived live consumer; returns the
    /// image and the frame's sequence number.
    func encodeOne(_ stream: String, _ format: ImageFormat, maxWidth: Int?, _ scratch: Scratch) throws -> ([UInt8], UInt64) {
        var options = ConsumerOptions(mode: .live)
        options.waitSeconds = 10
        options.reattach = false
        options.name = "preview test"
        let consumer = try Consumer(stream: stream, options: options, directory: scratch.directory)
        guard let frame = try consumer.next() else { throw TestFailure("no frame from '\(stream)'") }
        let sequence = frame.sequence
        let encoder = PreviewEncoder(format, maxWidth: maxWidth)
        do {
            try encoder.convert(frame)
            frame.release()
        } catch {
            frame.release()
            throw error
        }
        return (try encoder.encodeConverted(), sequence)
    }

    /// Pattern frame `sequence` of `format`, planes packed (no padding), as rawvideo.
    func patternFrame(_ format: FrameFormat, sequence: UInt64) -> Data {
        var bytes = [UInt8]()
        for p in format.pixelFormat.planes.indices {
            for y in 0..<format.rows(plane: p) {
                for x in 0..<format.rowBytes(plane: p) { bytes.append(TestPattern.value(plane: p, x: x, y: y, sequence: sequence)) }
            }
        }
        return Data(bytes)
    }

    /// ffmpeg's rgb24 of `image` (a file), at its own size.
    func decodeRGB(_ image: [UInt8], name: String, _ scratch: Scratch) throws -> [UInt8] {
        let path = scratch.file(name)
        try Data(image).write(to: URL(fileURLWithPath: path))
        let (status, out, err) = try shell("ffmpeg -v error -i '\(path)' -f rawvideo -pix_fmt rgb24 -", scratch)
        guard status == 0 else { throw TestFailure("ffmpeg cannot decode \(name): \(err)") }
        return Array(out)
    }

    /// ffmpeg's conversion of pattern frame `sequence` to rgb24 at `size`, with the stream's
    /// matrix and range (`inColor`: scale's in_color_matrix/in_range options).
    func ffmpegRGB(_ format: FrameFormat, sequence: UInt64, size: (Int, Int), inColor: String, _ scratch: Scratch) throws -> [UInt8] {
        let raw = scratch.file("frame-\(sequence).raw")
        try patternFrame(format, sequence: sequence).write(to: URL(fileURLWithPath: raw))
        let scale = "scale=\(size.0):\(size.1)\(inColor):out_range=pc:flags=bicubic+accurate_rnd+full_chroma_int"
        let (status, out, err) = try shell("ffmpeg -v error -f rawvideo -pix_fmt \(format.pixelFormat.name) -s \(format.width)x\(format.height)"
                                           + " -i '\(raw)' -vf '\(scale)' -f rawvideo -pix_fmt rgb24 -", scratch)
        guard status == 0 else { throw TestFailure("ffmpeg cannot convert the pattern: \(err)") }
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

    /// A preview JPEG, scaled to a capped width, decodes to the frame ffmpeg converts with the
    /// stream's matrix and range, within a JPEG tolerance: BT.709 limited-range yuv420p and rgb24.
    @Test(arguments: [(PixelFormat.yuv420p, ":in_color_matrix=bt709:in_range=tv"), (.rgb24, "")])
    func previewJPEGMatchesTheFrame(_ pixelFormat: PixelFormat, _ inColor: String) throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "v", "--size", "320x240",
                                          "--pix-fmt", pixelFormat.name, "--rate", "50"])
        defer { producer.kill() }
        let (jpeg, sequence) = try encodeOne("v", .jpeg(quality: 2), maxWidth: 160, scratch)
        #expect(jpeg.starts(with: [0xFF, 0xD8]), "a JPEG file")
        let decoded = try decodeRGB(jpeg, name: "preview.jpg", scratch)
        let (probeStatus, info, _) = try shell("ffprobe -v error -show_entries stream=codec_name,width,height -of csv=p=0 '\(scratch.file("preview.jpg"))'", scratch)
        #expect(probeStatus == 0 && String(decoding: info, as: UTF8.self).hasPrefix("mjpeg,160,120"))
        let expected = try ffmpegRGB(FrameFormat(pixelFormat, width: 320, height: 240), sequence: sequence,
                                     size: (160, 120), inColor: inColor, scratch)
        // The pattern's wrapping ramps are hard on JPEG: ffmpeg's own -q:v 2 JPEG of this frame
        // is 3.3 levels off on average (yuv420p), and reading it as BT.601 instead of BT.709 gives 7.3.
        let d = difference(decoded, expected)
        #expect(d.mean < 4.5, "mean abs difference \(d.mean) (max \(d.max)) against ffmpeg's conversion of frame \(sequence)")
    }

    /// A PNG snapshot of a BT.709 limited-range stream is ffmpeg's own conversion, within one level.
    @Test func snapshotPNGIsFFmpegsConversion() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "s", "--size", "200x100", "--rate", "50"])
        defer { producer.kill() }
        let (png, sequence) = try encodeOne("s", .png, maxWidth: nil, scratch)
        let decoded = try decodeRGB(png, name: "snapshot.png", scratch)
        let expected = try ffmpegRGB(FrameFormat(.yuv420p, width: 200, height: 100), sequence: sequence, size: (200, 100),
                                     inColor: ":in_color_matrix=bt709:in_range=tv", scratch)
        let d = difference(decoded, expected)
        #expect(d.max <= 1, "largest difference \(d.max) (mean \(d.mean)) against ffmpeg's conversion of frame \(sequence)")
    }

    /// Preview sizes: the frame's own when it fits, else the cap's width, same shape, even.
    @Test func previewSizesAreCappedAndEven() {
        #expect(PreviewEncoder.imageSize(width: 640, height: 360, maxWidth: 1920) == (640, 360))
        #expect(PreviewEncoder.imageSize(width: 1920, height: 1080, maxWidth: 641) == (640, 360))
        #expect(PreviewEncoder.imageSize(width: 321, height: 241, maxWidth: 160) == (160, 120))
        #expect(PreviewEncoder.imageSize(width: 4000, height: 2, maxWidth: 100) == (100, 2))
    }
}
