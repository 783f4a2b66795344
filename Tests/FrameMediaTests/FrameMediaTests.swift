import Foundation
import FrameMedia
import FrameServer
import Glibc
import Testing

/// FrameMedia's pieces on their own: the nominal-rate reading, the framemd5 writer's
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

    /// The control segment stores rates to 1/1000 fps: integer and NTSC rates come back
    /// exactly, others to 1/1000, and nothing outside 0 < rate < 1,000,000.
    @Test(arguments: [(30.0, Rational(30, 1)), (29.97, Rational(30000, 1001)), (23.976, Rational(24000, 1001)),
                      (59.94, Rational(60000, 1001)), (12.5, Rational(25, 2)), (1.0, Rational(1, 1)), (0.5, Rational(1, 2))])
    func nominalRateIsReadExactly(_ rate: Double, _ expected: Rational) {
        #expect(Rational(nominalRate: rate) == expected)
    }

    @Test(arguments: [0.0, -25.0, 1_000_000.0, .infinity, .nan])
    func nominalRateOutsideItsRangeIsNone(_ rate: Double) {
        #expect(Rational(nominalRate: rate) == nil)
    }

    /// The framemd5 writer's header is ffmpeg's, and its frame line has ffmpeg's columns
    /// and the MD5 of the tightly packed planes: the line ffmpeg writes for the same bytes.
    @Test func framemd5LineIsFFmpegsForTheSameBytes() throws {
        let md5Path = scratchFile(".framemd5"), rawPath = scratchFile(".yuv")
        defer { unlink(md5Path); unlink(rawPath) }
        // An unknown aspect ratio (0/1), as ffmpeg's rawvideo input has.
        try withPatternFrame(Self.format, Self.description(rate: Rational(30, 1), sar: Rational(0, 1))) { frame in
            let writer = try FrameMD5Writer(path: md5Path, frameRate: 30)
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
        let path = scratchFile(".y4m")
        defer { unlink(path) }
        try withPatternFrame(Self.format, Self.description(rate: Rational(30000, 1001), sar: Rational(4, 3))) { frame in
            let writer = try PackedVideoWriter(path: path, kind: .y4m)
            writer.frameRate = 29.97
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
        let path = scratchFile(".yuv")
        defer { unlink(path) }
        try withPatternFrame(Self.format, Self.description(rate: Rational(25, 1))) { frame in
            let writer = try PackedVideoWriter(path: path, kind: .raw)
            try writer.write(frame)
            #expect(writer.readBackOptions == "-f rawvideo -pix_fmt yuv420p -s 64x48 -framerate 25")
        }
        #expect(try [UInt8](Data(contentsOf: URL(fileURLWithPath: path))) == packedPattern(Self.format))
    }

    /// y4m refuses a format it cannot carry, with the formats it can.
    @Test func y4mRefusesPackedRGB() throws {
        let path = scratchFile(".y4m")
        defer { unlink(path) }
        try withPatternFrame(FrameFormat(.rgb24, width: 16, height: 16), Self.description(rate: Rational(25, 1))) { frame in
            let writer = try PackedVideoWriter(path: path, kind: .y4m)
            #expect(throws: MediaOutputError.self) { try writer.write(frame) }
        }
    }
}
