import Foundation
import Glibc
import Testing

/// `framesrv sink --record`: timestamps (`-fps_mode`), `-pix_fmt`, and the 4:2:0 default for
/// H.264/H.265. Real producer and sink processes; ffmpeg and ffprobe are the oracle.
@Suite(.serialized) struct RecordSinkTests {
    func text(_ command: String, _ scratch: Scratch) throws -> String {
        let (status, out, err) = try shell(command, scratch)
        guard status == 0 else { throw TestFailure("'\(command)' failed: \(err)") }
        return String(decoding: out, as: UTF8.self)
    }

    /// A variable-frame-rate clip: testsrc2 at 30 fps with these pts (ms), in Matroska (time base 1/1000).
    func vfrClip(_ ptsMillis: [Int], _ scratch: Scratch) throws -> String {
        let path = scratch.file("vfr.mkv")
        let expr = ptsMillis.enumerated().map { "\($0.element)*eq(N\\,\($0.offset))" }.joined(separator: "+")
        _ = try text("ffmpeg -v error -y -f lavfi -i testsrc2=size=160x120:rate=30 -frames:v \(ptsMillis.count) "
                     + "-vf \"settb=1/1000,setpts='\(expr)'\" -fps_mode passthrough -enc_time_base 1:1000 -c:v ffv1 '\(path)'",
                     scratch)
        return path
    }

    /// Each frame's pts (in the stream's time base) and its hash, from ffmpeg's framemd5 of the file
    /// (`-fps_mode passthrough`, so ffmpeg neither drops nor repeats).
    func frames(_ path: String, _ scratch: Scratch) throws -> (pts: [String], hashes: [String]) {
        let rows = try text("ffmpeg -v error -i '\(path)' -map 0:v:0 -fps_mode passthrough -f framemd5 -", scratch)
            .split(separator: "\n").filter { !$0.hasPrefix("#") }.map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
        let pts = try text("ffprobe -v error -select_streams v:0 -show_entries frame=pts -of csv=p=0 '\(path)'", scratch)
        return (pts.split(separator: "\n").map(String.init), rows.compactMap(\.last))
    }

    /// One stream value per key from ffprobe (`entries` such as stream=pix_fmt).
    func probe(_ path: String, _ entries: String, _ scratch: Scratch) throws -> [String: String] {
        let out = try text("ffprobe -v error -select_streams v:0 -show_entries \(entries) -of default=noprint_wrappers=1 '\(path)'", scratch)
        return Dictionary(out.split(separator: "\n").compactMap { line -> (String, String)? in
            let kv = line.split(separator: "=", maxSplits: 1)
            return kv.count == 2 ? (String(kv[0]), String(kv[1])) : nil
        }, uniquingKeysWith: { a, _ in a })
    }

    /// Plays `produceArgs` into one recording sink (`sinkArgs`); returns the sink.
    /// Two slots: the producer cannot publish these short clips whole and end the stream in the
    /// moment between the sink's attaching and its first look (which then sees "ended before
    /// it came" and waits for another producer).
    func record(_ produceArgs: [String], _ sinkArgs: [String], _ scratch: Scratch) throws -> Spawned {
        let producer = try scratch.start(["produce"] + produceArgs + ["--out", "rec", "--wait-for", "1", "--slots", "2", "--quiet"])
        let sink = try scratch.start(["sink", "--in", "rec", "--wait", "30"] + sinkArgs)
        #expect(sink.wait(timeout: 120) == 0, "sink: \(sink.stderr.prefix(500))")
        #expect(producer.wait(timeout: 60) == 0, "producer: \(producer.stderr.prefix(500))")
        return sink
    }

    static let vfrMillis = [0, 46, 66, 100, 133, 179]

    /// The issue's case: pts 0, 46, 66, 100, 133, 179 ms come back exactly (not 0, 33, 67, ...),
    /// in FFV1/Matroska and in H.264/MP4, every frame the stream's.
    @Test(arguments: [("rec.mkv", ["-c:v", "ffv1"]), ("rec.mp4", ["--preset", "ultrafast"])])
    func passthroughKeepsEveryTimestamp(_ file: String, _ args: [String]) throws {
        let scratch = try Scratch()
        let src = try vfrClip(Self.vfrMillis, scratch)
        let out = scratch.file(file)
        _ = try record(["-i", src], ["--record", out] + args, scratch)
        let times = try text("ffprobe -v error -select_streams v:0 -show_entries frame=pts_time -of csv=p=0 '\(out)'", scratch)
            .split(separator: "\n").compactMap { Double($0.split(separator: ",").first ?? "") }
        #expect(times.count == 6)
        #expect(zip(times, Self.vfrMillis).allSatisfy { abs($0 - Double($1) / 1000) < 1e-6 }, "\(times)")
        if file.hasSuffix(".mkv") {
            let (theirs, ours) = (try frames(src, scratch), try frames(out, scratch))
            #expect(ours.pts == Self.vfrMillis.map(String.init), "\(ours.pts)")
            #expect(ours.hashes == theirs.hashes, "the recording's frames differ from the stream's")
        }
    }

    /// `-fps_mode cfr`: the frames ffmpeg's `-fps_mode cfr` makes of the same clip (repeats
    /// across gaps, drops in bursts, the last frame repeated at the end after sparse frames),
    /// with the same timestamps, at the nominal rate.
    @Test(arguments: [Self.vfrMillis + [300, 310, 320, 330, 400, 433, 500, 505, 510, 520, 525, 600], [0, 100, 200, 300, 400]])
    func cfrResamplesAsFFmpegDoes(_ millis: [Int]) throws {
        let scratch = try Scratch()
        let src = try vfrClip(millis, scratch)
        let ours = scratch.file("ours.mkv"), theirs = scratch.file("theirs.mkv")
        _ = try text("ffmpeg -v error -i '\(src)' -fps_mode cfr -c:v ffv1 '\(theirs)'", scratch)
        let sink = try record(["-i", src], ["--record", ours, "-c:v", "ffv1", "-fps_mode", "cfr"], scratch)
        let (a, b) = (try frames(ours, scratch), try frames(theirs, scratch))
        #expect(a.hashes == b.hashes, "\(a.hashes.count) frames, ffmpeg's \(b.hashes.count)")
        #expect(a.pts == b.pts, "\(a.pts) / \(b.pts)")
        #expect(try probe(ours, "stream=r_frame_rate", scratch)["r_frame_rate"] == "30/1")
        #expect(sink.stdout.contains("30 fps cfr, matroska): \(b.hashes.count) frames"), "\(sink.stdout)")
        #expect(sink.stdout.contains(" duplicated, ") && !sink.stdout.contains(" 0 duplicated"), "\(sink.stdout)")
        if millis.count > 5 { #expect(!sink.stdout.contains(" 0 dropped"), "\(sink.stdout)") }
    }

    /// An encoder that refuses the stream's time base (MPEG-4 part 2 and a capture clock's
    /// 1/1000000) records on the rate's grid instead, and says so in one note.
    @Test func refusedTimeBaseFallsBackToTheRateWithANote() throws {
        let scratch = try Scratch()
        let out = scratch.file("m4.mkv")
        let sink = try record(["--pattern", "--rate", "max", "--size", "64x48", "--frames", "5"],
                              ["--record", out, "-c:v", "mpeg4"], scratch)
        let notes = sink.stderr.split(separator: "\n").filter { $0.hasPrefix("framesrv: note: ") }
        #expect(notes.count == 1 && notes[0].contains("the mpeg4 encoder refused the stream's time base 1/1000000"), "\(sink.stderr)")
        #expect(try frames(out, scratch).hashes.count == 5)
    }

    struct FormatCase: CustomTestStringConvertible, Sendable {
        let source: String
        let codec: String
        let extraArgs: [String]
        let recorded: String
        let notes: Bool
        var testDescription: String { "\(source) \(codec) \(extraArgs.joined(separator: " ")) -> \(recorded)" }
    }

    /// H.264/H.265 record 4:2:0 by default, with one note when that drops chroma; `-pix_fmt`
    /// keeps ffmpeg's choice; FFV1 keeps the stream's format.
    @Test(arguments: [
        FormatCase(source: "rgb24", codec: "libx264", extraArgs: [], recorded: "yuv420p", notes: true),
        FormatCase(source: "yuv444p", codec: "libx264", extraArgs: [], recorded: "yuv420p", notes: true),
        FormatCase(source: "yuv422p10le", codec: "libx264", extraArgs: [], recorded: "yuv420p10le", notes: true),
        FormatCase(source: "gray", codec: "libx264", extraArgs: [], recorded: "yuv420p", notes: false),
        FormatCase(source: "yuv420p10le", codec: "libx264", extraArgs: [], recorded: "yuv420p10le", notes: false),
        FormatCase(source: "nv12", codec: "libx264", extraArgs: [], recorded: "nv12", notes: false),
        FormatCase(source: "rgb24", codec: "libx264", extraArgs: ["-pix_fmt", "yuv444p"], recorded: "yuv444p", notes: false),
        FormatCase(source: "gbrp", codec: "libx265", extraArgs: [], recorded: "yuv420p", notes: true),
        FormatCase(source: "yuv444p", codec: "ffv1", extraArgs: [], recorded: "yuv444p", notes: false),
        FormatCase(source: "gray", codec: "ffv1", extraArgs: [], recorded: "gray", notes: false),
    ])
    func defaultPixelFormat(_ c: FormatCase) throws {
        let scratch = try Scratch()
        let out = scratch.file("out.mkv")
        let sink = try record(["--pattern", "--pix-fmt", c.source, "--size", "64x48", "--rate", "25", "--frames", "5"],
                              ["--record", out, "-c:v", c.codec] + c.extraArgs, scratch)
        let info = try probe(out, "stream=pix_fmt", scratch)
        // H.264 in Matroska: ffprobe names nv12 input's stream by its decoder's format.
        let expected = c.recorded == "nv12" ? "yuv420p" : c.recorded
        #expect(info["pix_fmt"] == expected, "\(info)")
        let notes = sink.stderr.split(separator: "\n").filter { $0.hasPrefix("framesrv: note: ") }
        #expect(notes.count == (c.notes ? 1 : 0), "\(sink.stderr)")
        if c.notes { #expect(notes.first?.contains("frames as 4:2:0 (\(c.recorded)), which players expect; this drops ") == true, "\(notes)") }
    }

    /// `-pix_fmt` converts as ffmpeg does (libswscale, bicubic, the stream's matrix and range):
    /// the same frames as `ffmpeg -pix_fmt` for 4:2:0 to 4:4:4, RGB to 4:2:0 and 4:4:4 to gray.
    @Test(arguments: [("yuv420p", "yuv444p"), ("rgb24", "yuv420p"), ("yuv444p", "gray")])
    func pixFmtConvertsAsFFmpeg(_ source: String, _ target: String) throws {
        let scratch = try Scratch()
        let src = scratch.file("src.nut"), ours = scratch.file("ours.mkv"), theirs = scratch.file("theirs.mkv")
        _ = try text("ffmpeg -v error -f lavfi -i testsrc2=size=160x120:rate=25 -frames:v 5 -pix_fmt \(source) -c:v rawvideo '\(src)'", scratch)
        _ = try text("ffmpeg -v error -i '\(src)' -pix_fmt \(target) -c:v ffv1 '\(theirs)'", scratch)
        let sink = try record(["-i", src], ["--record", ours, "-c:v", "ffv1", "-pix_fmt", target], scratch)
        #expect(sink.stdout.contains("(ffv1 \(target) 160x120 25 fps, matroska (converted from \(source))): 5 frames"), "\(sink.stdout)")
        let (a, b) = (try frames(ours, scratch), try frames(theirs, scratch))
        #expect(a.hashes.count == 5 && a.hashes == b.hashes)
        #expect(try probe(ours, "stream=pix_fmt", scratch)["pix_fmt"] == target)
    }

    /// Bad -pix_fmt and -fps_mode values are one error line, before any stream is waited for.
    @Test func badRecordOptionsAreOneErrorLine() throws {
        let scratch = try Scratch()
        let cases: [([String], Int32, String)] = [
            (["--record", scratch.file("a.mkv"), "-pix_fmt", "nosuch"], 1, "refused -pix_fmt 'nosuch': FFmpeg knows no such pixel format"),
            (["--record", scratch.file("a.mkv"), "-pix_fmt", "rgb48le"], 1, "the libx264 encoder cannot carry rgb48le frames (it carries yuv420p"),
            (["--record", scratch.file("a.mkv"), "-fps_mode", "vfr"], 2, "-fps_mode takes passthrough or cfr, not 'vfr'"),
            (["--null", "-pix_fmt", "yuv420p"], 2, "-pix_fmt goes with --record"),
            (["--null", "-fps_mode", "cfr"], 2, "-fps_mode goes with --record"),
        ]
        for (args, status, message) in cases {
            let r = try scratch.run(["sink", "--in", "nothing", "--wait", "0"] + args, timeout: 30)
            #expect(r.status == status, "\(args): status \(r.status)")
            let lines = r.stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].hasPrefix("framesrv: error: ") && lines[0].contains(message), "\(args): \(r.stderr.prefix(300))")
        }
    }
}
