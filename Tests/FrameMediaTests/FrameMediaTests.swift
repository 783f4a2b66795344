import Foundation
import FrameMedia
import FrameServer
import Glibc
import Testing

/// FrameMedia's pieces on their own: exact rates in the headers, the framemd5 writer's
/// header and line format, and the y4m/raw writers' headers and packing, each against
/// FFmpeg's command-line tools or the test pattern's own bytes.
@Suite struct FrameMediaTests {
    static let format = FrameFormat(.yuv420p, width: 64, height: 48)

    /// A frame of 1/`rate` duration at pts 0, BT.709 limited range, `sar`.
    static func description(rate: Rational, sar: Rational = Rational(1, 1)) -> FrameDescription {
        var d = FrameDescription()
        d.pts = 0
        d.timeBase = Rational(rate.den, rate.num)
        d.duration = 1
        d.sampleAspectRatio = sar
        d.color = .bt709Limited
        return d
    }

    /// Rates libavformat reports go through exactly: framemd5's `#tb` is rate_den/rate_num and
    /// y4m's `F` is rate_num:rate_den, with nothing rounded (ffmpeg writes the same for them).
    @Test(arguments: [Rational(45000, 1499), Rational(2997, 125), Rational(1_000_000, 66667), Rational(30000, 1001),
                      Rational(25, 2), Rational(1, 2)])
    func exactRatesReachTheHeaders(_ rate: Rational) throws {
        let folder = TemporaryFolder("framesrv-media-test")
        let md5Path = folder.file("out.framemd5"), y4mPath = folder.file("out.y4m")
        try withPatternFrame(Self.format, Self.description(rate: rate)) { frame in
            let md5 = try FrameMD5Writer(path: md5Path, frameRate: rate)
            try md5.write(frame)
            try md5.flush()
            let y4m = try PackedVideoWriter(path: y4mPath, kind: .y4m)
            y4m.frameRate = rate
            try y4m.write(frame)
        }
        let lines = try String(contentsOfFile: md5Path, encoding: .utf8).split(separator: "\n")
        #expect(lines.contains("#tb 0: \(rate.den)/\(rate.num)"), "\(lines)")
        let y4m = try String(decoding: Data(contentsOf: URL(fileURLWithPath: y4mPath)).prefix(60), as: UTF8.self)
        #expect(y4m.hasPrefix("YUV4MPEG2 W64 H48 F\(rate.num):\(rate.den) Ip "), "\(y4m)")
    }

    /// The test pattern's frames: time base 1/rate exactly, pts the index from 0, duration 1,
    /// progressive; without a rate, microseconds of capture time since the first frame.
    @Test func patternFramesTimeBaseIsTheExactRate() {
        let d = PatternPublisher.description(format: Self.format, index: 3, rate: Rational(30000, 1001), last: false)
        #expect(d.timeBase == Rational(1001, 30000) && d.pts == 2 && d.duration == 1)
        #expect(d.fieldOrder == .progressive && d.chromaLocation == .unspecified)
        let m = PatternPublisher.description(format: Self.format, index: 3, rate: nil, last: true,
                                             captureNanos: 5_000_000_000, firstCapture: 4_000_000_000)
        #expect(m.timeBase == Rational(1, 1_000_000) && m.pts == 1_000_000 && m.duration == 0)
        #expect(m.flags.contains(.endOfStream))
    }

    /// y4m's `I` tag follows the field order and yuv420p's `C` tag the chroma location, as
    /// ffmpeg's yuv4mpegpipe muxer writes them.
    @Test(arguments: [(FieldOrder.bottomFirst, ChromaLocation.left, "Ib", "C420mpeg2 XYSCSS=420MPEG2"),
                      (.topFirst, .topLeft, "It", "C420paldv XYSCSS=420PALDV"),
                      (.bottomCodedTopShown, .center, "Ib", "C420jpeg XYSCSS=420JPEG"),
                      (.topCodedBottomShown, .bottom, "It", "C420jpeg XYSCSS=420JPEG"),
                      (.progressive, .unspecified, "Ip", "C420jpeg XYSCSS=420JPEG")])
    func y4mTagsFollowFieldOrderAndChroma(_ order: FieldOrder, _ chroma: ChromaLocation, _ i: String, _ c: String) throws {
        let folder = TemporaryFolder("framesrv-media-test")
        let path = folder.file("out.y4m")
        var d = Self.description(rate: Rational(25, 1))
        d.fieldOrder = order
        d.chromaLocation = chroma
        try withPatternFrame(Self.format, d) { frame in
            let writer = try PackedVideoWriter(path: path, kind: .y4m)
            writer.frameRate = Rational(25, 1)
            try writer.write(frame)
        }
        let header = try String(decoding: Data(contentsOf: URL(fileURLWithPath: path)).prefix(90), as: UTF8.self)
            .split(separator: "\n").first.map(String.init)
        #expect(header == "YUV4MPEG2 W64 H48 F25:1 \(i) A1:1 \(c) XCOLORRANGE=LIMITED")
    }

    /// The framemd5 writer's header is ffmpeg's, and its frame line has ffmpeg's columns
    /// and the MD5 of the tightly packed planes: the line ffmpeg writes for the same bytes.
    @Test func framemd5LineIsFFmpegsForTheSameBytes() throws {
        let folder = TemporaryFolder("framesrv-media-test")
        let md5Path = folder.file("out.framemd5"), rawPath = folder.file("out.yuv")
        // An unknown aspect ratio (0/1), as ffmpeg's rawvideo input has.
        try withPatternFrame(Self.format, Self.description(rate: Rational(30, 1), sar: Rational(0, 1))) { frame in
            let writer = try FrameMD5Writer(path: md5Path, frameRate: Rational(30, 1))
            try writer.write(frame)
            try writer.flush()
            #expect(writer.frames == 1)
        }
        try Data(packedPattern(Self.format)).write(to: URL(fileURLWithPath: rawPath))
        let ours = try String(contentsOfFile: md5Path, encoding: .utf8).split(separator: "\n")
        let ffmpeg = try run("ffmpeg -v error -f rawvideo -pix_fmt yuv420p -s 64x48 -r 30 -i '\(rawPath)' -f framemd5 -")
            .split(separator: "\n")
        #expect(ours.first == "#format: frame checksums")
        #expect(ours.contains("#software: \(FrameMD5Writer.libavformatIdent)"))
        #expect(ours.contains("#tb 0: 1/30") && ours.contains("#dimensions 0: 64x48") && ours.contains("#sar 0: 0/1"))
        #expect(ours.filter { $0.hasPrefix("#") } == ffmpeg.filter { $0.hasPrefix("#") })
        #expect(ours.last == ffmpeg.last, "ffmpeg: \(ffmpeg.last ?? "")")
        #expect(ours.last?.hasPrefix("0,          0,          0,        1,     4608, ") == true)
    }

    /// y4m: ffmpeg's header (size, exact NTSC rate, aspect, 4:2:0 tag, range), then FRAME and
    /// the packed planes.
    @Test func y4mHeaderAndFrame() throws {
        let folder = TemporaryFolder("framesrv-media-test")
        let path = folder.file("out.y4m")
        try withPatternFrame(Self.format, Self.description(rate: Rational(30000, 1001), sar: Rational(4, 3))) { frame in
            let writer = try PackedVideoWriter(path: path, kind: .y4m)
            writer.frameRate = Rational(30000, 1001)
            try writer.write(frame)
            #expect(writer.frames == 1)
        }
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let header = "YUV4MPEG2 W64 H48 F30000:1001 Ip A4:3 C420jpeg XYSCSS=420JPEG XCOLORRANGE=LIMITED\nFRAME\n"
        #expect(String(decoding: bytes.prefix(header.utf8.count), as: UTF8.self) == header)
        #expect(Array(bytes.dropFirst(header.utf8.count)) == packedPattern(Self.format))
    }

    /// raw: the packed planes only, and the ffmpeg options that read them back.
    @Test func rawPacksPlanesAndSaysHowToReadThemBack() throws {
        let folder = TemporaryFolder("framesrv-media-test")
        let path = folder.file("out.yuv")
        try withPatternFrame(Self.format, Self.description(rate: Rational(25, 1))) { frame in
            let writer = try PackedVideoWriter(path: path, kind: .raw)
            try writer.write(frame)
            #expect(writer.readBackOptions == "-f rawvideo -pix_fmt yuv420p -s 64x48 -framerate 25")
        }
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) == packedPattern(Self.format))
    }

    /// y4m refuses a format it cannot carry, with the formats it can.
    @Test func y4mRefusesPackedRGB() throws {
        let folder = TemporaryFolder("framesrv-media-test")
        let path = folder.file("out.y4m")
        try withPatternFrame(FrameFormat(.rgb24, width: 16, height: 16), Self.description(rate: Rational(25, 1))) { frame in
            let writer = try PackedVideoWriter(path: path, kind: .y4m)
            #expect(throws: MediaOutputError.self) { try writer.write(frame) }
        }
    }
}
