import Foundation
import FrameServer
import Glibc
import Testing

/// `framesrv sink --y4m / --raw / --record`: real producer and sink processes, with the ffmpeg
/// and ffprobe command-line tools as the oracle for what was written.
@Suite(.serialized) struct SinkTests {
    func text(_ command: String, _ scratch: Scratch) throws -> String {
        let (status, out, err) = try shell(command, scratch)
        guard status == 0 else { throw TestFailure("'\(command)' failed: \(err)") }
        return String(decoding: out, as: UTF8.self)
    }

    /// A testsrc2 clip made by ffmpeg: `frames` frames at `rate`, then `args` (codec, pixel format, filters).
    func generate(_ name: String, rate: String = "25", frames: Int, _ args: [String], _ scratch: Scratch) throws -> String {
        let path = scratch.file(name)
        let all = ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=\(rate)", "-frames:v", String(frames)]
            + args + [path]
        _ = try text("ffmpeg " + all.map { "'\($0)'" }.joined(separator: " "), scratch)
        return path
    }

    /// ffmpeg's framemd5 of a file (extra input options before -i).
    func framemd5(_ path: String, input: String = "", _ scratch: Scratch) throws -> String {
        try text("ffmpeg -v error \(input) -i '\(path)' -map 0:v:0 -f framemd5 -", scratch)
    }

    /// One stream value per line from ffprobe (`entries` such as stream=width,height).
    func probe(_ path: String, _ entries: String, count: Bool = false, _ scratch: Scratch) throws -> [String: String] {
        let out = try text("ffprobe -v error \(count ? "-count_frames" : "") -select_streams v:0 -show_entries \(entries) "
                           + "-of default=noprint_wrappers=1 '\(path)'", scratch)
        var d: [String: String] = [:]
        for line in out.split(separator: "\n") {
            let kv = line.split(separator: "=", maxSplits: 1)
            if kv.count == 2 { d[String(kv[0])] = String(kv[1]) }
        }
        return d
    }

    /// Every frame's pts_time as ffprobe reports it.
    func ptsTimes(_ path: String, _ scratch: Scratch) throws -> [Double] {
        try text("ffprobe -v error -select_streams v:0 -show_entries frame=pts_time -of csv=p=0 '\(path)'", scratch)
            .split(separator: "\n").compactMap { Double($0.split(separator: ",").first ?? "") }
    }

    /// Starts the producer (`produceArgs`, waiting for `sinks` consumers) and the sinks; waits for all; returns the sinks.
    func run(_ produceArgs: [String], sinks: [[String]], stream: String, _ scratch: Scratch) throws -> [Spawned] {
        let producer = try scratch.start(["produce"] + produceArgs + ["--out", stream, "--wait-for", String(sinks.count)])
        let procs = try sinks.map { try scratch.start(["sink", "--in", stream, "--wait", "30"] + $0) }
        for p in procs { #expect(p.wait(timeout: 120) == 0, "sink: \(p.stderr.prefix(500))") }
        #expect(producer.wait(timeout: 60) == 0, "producer: \(producer.stderr.prefix(500))")
        return procs
    }

    struct Y4MCase: CustomTestStringConvertible, Sendable {
        let pixelFormat: String
        let tag: String
        var testDescription: String { pixelFormat }
    }

    /// y4m written from the slots decodes, in ffmpeg, to exactly the stream's frames (odd size).
    @Test(arguments: [Y4MCase(pixelFormat: "yuv420p", tag: "C420jpeg XYSCSS=420JPEG"),
                      Y4MCase(pixelFormat: "yuv422p", tag: "C422 XYSCSS=422"),
                      Y4MCase(pixelFormat: "gray", tag: "Cmono"),
                      Y4MCase(pixelFormat: "yuv420p10le", tag: "C420p10 XYSCSS=420P10")])
    func y4mDecodesToTheStreamsFrames(_ c: Y4MCase) throws {
        let scratch = try Scratch()
        let src = try generate("src.mkv", frames: 12, ["-vf", "scale=321:241", "-c:v", "ffv1", "-pix_fmt", c.pixelFormat], scratch)
        let oracle = try framemd5(src, scratch)
        let y4m = scratch.file("out.y4m")
        let sinks = try run(["-i", src], sinks: [["--framemd5", "-"], ["--y4m", y4m]], stream: "y", scratch)
        #expect(sinks[0].stdout == oracle)
        let header = try y4mHeader(y4m)
        #expect(header.hasPrefix("YUV4MPEG2 W321 H241 F25:1 Ip A1:1 \(c.tag)"), "\(header)")
        let decoded = try framemd5(y4m, scratch)
        #expect(decoded == sinks[0].stdout, "ffmpeg's framemd5 of the y4m output differs from the stream's")
        #expect(hashes(decoded).count == 12)
    }

    /// y4m's header is ffmpeg's for H.264 inputs, whose chroma is left-sited (`C420mpeg2`),
    /// progressive and bottom field first (`Ib`): the field order and chroma location travel
    /// in the frame header from the decoder to the sink. The frames are ffmpeg's too.
    @Test(arguments: [("h264.mp4", [String]()), ("bff.mp4", ["-vf", "setfield=bff", "-flags", "+ildct+ilme", "-x264opts", "bff=1"])])
    func y4mHeaderIsFFmpegsForH264(_ file: String, _ extra: [String]) throws {
        let scratch = try Scratch()
        let src = try generate(file, frames: 10, ["-c:v", "libx264", "-pix_fmt", "yuv420p"] + extra, scratch)
        let theirs = scratch.file("ffmpeg.y4m"), ours = scratch.file("ours.y4m")
        _ = try text("ffmpeg -v error -i '\(src)' -f yuv4mpegpipe '\(theirs)'", scratch)
        _ = try run(["-i", src], sinks: [["--y4m", ours]], stream: "h", scratch)
        let header = try y4mHeader(ours)
        #expect(header == (try y4mHeader(theirs)))
        #expect(header.contains(" C420mpeg2 XYSCSS=420MPEG2"), "\(header)")
        #expect(header.contains(file == "bff.mp4" ? " Ib " : " Ip "), "\(header)")
        #expect(try framemd5(ours, scratch) == (try framemd5(theirs, scratch)))
    }

    /// `--y4m -` into `ffmpeg -i -` through a pipe, NTSC rate and an aspect ratio.
    @Test func y4mThroughAPipe() throws {
        let scratch = try Scratch()
        let src = try generate("src.mp4", rate: "30000/1001", frames: 15,
                               ["-vf", "setsar=4/3", "-c:v", "libx264", "-pix_fmt", "yuv420p"], scratch)
        let oracle = try framemd5(src, scratch)
        let producer = try scratch.start(["produce", "-i", src, "--out", "pipe", "--wait-for", "1"])
        let (status, out, err) = try shell(
            "'\(framesrvPath)' sink --in pipe --wait 30 --y4m - | ffmpeg -v error -i - -f framemd5 -", scratch)
        #expect(status == 0, "\(err)")
        #expect(producer.wait(timeout: 60) == 0)
        #expect(String(decoding: out, as: UTF8.self) == oracle)
        #expect(err.contains("sink: pipe (lossless): received 15 frames"), "\(err)")
    }

    /// A pixel format y4m cannot carry is one error line, exit status 1.
    @Test func y4mRefusesRGB() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--pix-fmt", "rgb24", "--size", "64x48", "--frames", "5",
                                          "--out", "rgb", "--wait-for", "1", "--quiet"])
        let sink = try scratch.run(["sink", "--in", "rgb", "--wait", "30", "--y4m", scratch.file("x.y4m")])
        #expect(sink.status == 1)
        #expect(sink.stderr.hasPrefix("framesrv: error: y4m cannot carry rgb24 frames (it carries gray, yuv420p"), "\(sink.stderr)")
        #expect(sink.stderr.split(separator: "\n").count == 1, "\(sink.stderr)")
        #expect(producer.wait(timeout: 60) == 0)
    }

    /// `--raw` writes the bytes `ffmpeg -f rawvideo` writes, and the options it prints read them back.
    @Test func rawEqualsFFmpegRawvideo() throws {
        let scratch = try Scratch()
        let src = try generate("src.mkv", frames: 10, ["-vf", "scale=321:241", "-c:v", "ffv1", "-pix_fmt", "yuv422p"], scratch)
        let raw = scratch.file("out.yuv")
        let sinks = try run(["-i", src], sinks: [["--raw", raw]], stream: "r", scratch)
        let expected = try shell("ffmpeg -v error -i '\(src)' -f rawvideo -", scratch).stdout
        let written = try Data(contentsOf: URL(fileURLWithPath: raw))
        #expect(written.count == (321 + 2 * 161) * 241 * 10)
        #expect(written == expected, "raw output (\(written.count) bytes) differs from ffmpeg's (\(expected.count) bytes)")
        let hint = "-f rawvideo -pix_fmt yuv422p -s 321x241 -framerate 25"
        #expect(sinks[0].stderr.contains(hint), "\(sinks[0].stderr)")
        #expect(hashes(try framemd5(raw, input: hint, scratch)) == hashes(try framemd5(src, scratch)))
    }

    /// ffv1 in Matroska: lossless, every frame, timestamps of the stream.
    @Test func recordFFV1MatroskaIsLossless() throws {
        let scratch = try Scratch()
        let src = try generate("src.mkv", frames: 30, ["-c:v", "ffv1", "-pix_fmt", "yuv420p"], scratch)
        let out = scratch.file("rec.mkv")
        let sinks = try run(["-i", src], sinks: [["--framemd5", "-"], ["--record", out, "-c:v", "ffv1"]], stream: "rec", scratch)
        let stream = hashes(sinks[0].stdout)
        #expect(stream.count == 30)
        #expect(hashes(try framemd5(out, scratch)) == stream, "the recording's frames differ from the stream's")
        let info = try probe(out, "stream=codec_name,width,height,pix_fmt,nb_read_frames,r_frame_rate", count: true, scratch)
        #expect(info["codec_name"] == "ffv1" && info["pix_fmt"] == "yuv420p", "\(info)")
        #expect(info["nb_read_frames"] == "30" && info["r_frame_rate"] == "25/1", "\(info)")
        let pts = try ptsTimes(out, scratch)
        #expect(pts.count == 30)
        #expect(pts.enumerated().allSatisfy { abs($0.element - Double($0.offset) * 0.04) < 0.0015 }, "\(pts)")
        #expect(sinks[1].stdout.contains("record: \(out) (ffv1 yuv420p 320x240 25 fps, matroska): 30 frames"), "\(sinks[1].stdout)")
    }

    /// --record keeps what ffmpeg keeps of a bottom-field-first H.264 clip at 45000/1499 fps:
    /// the field order (bt, as ffmpeg gives its encoder), left-sited chroma, and the rates
    /// Matroska's millisecond timestamps make of the exact rate (ffprobe's, the same as ffmpeg's).
    @Test func recordKeepsFieldOrderChromaAndTheExactRate() throws {
        let scratch = try Scratch()
        let src = try generate("bff.mp4", rate: "45000/1499", frames: 10,
                               ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-flags", "+ildct+ilme", "-x264opts", "bff=1",
                                "-video_track_timescale", "45000"], scratch)
        let ours = scratch.file("ours.mkv"), theirs = scratch.file("ffmpeg.mkv")
        _ = try text("ffmpeg -v error -i '\(src)' -c:v ffv1 '\(theirs)'", scratch)
        _ = try run(["-i", src], sinks: [["--record", ours, "-c:v", "ffv1"]], stream: "rec", scratch)
        let entries = "stream=field_order,chroma_location,r_frame_rate,avg_frame_rate"
        let info = try probe(ours, entries, scratch)
        #expect(info == (try probe(theirs, entries, scratch)))
        #expect(info["field_order"] == "bt" && info["chroma_location"] == "left", "\(info)")
        #expect(hashes(try framemd5(ours, scratch)) == hashes(try framemd5(theirs, scratch)))
    }

    /// libx264 in MP4 (the defaults): frame count, size, NTSC frame rate, aspect ratio, timestamps from 0.
    @Test func recordX264MP4() throws {
        let scratch = try Scratch()
        let src = try generate("src.mp4", rate: "30000/1001", frames: 40,
                               ["-vf", "setsar=4/3", "-c:v", "libx264", "-pix_fmt", "yuv420p"], scratch)
        let out = scratch.file("rec.mp4")
        _ = try run(["-i", src], sinks: [["--record", out]], stream: "x", scratch)
        let info = try probe(out, "stream=codec_name,width,height,pix_fmt,nb_read_frames,avg_frame_rate,r_frame_rate,sample_aspect_ratio",
                             count: true, scratch)
        #expect(info["codec_name"] == "h264" && info["width"] == "320" && info["height"] == "240", "\(info)")
        #expect(info["nb_read_frames"] == "40", "\(info)")
        #expect(info["avg_frame_rate"] == "30000/1001" && info["r_frame_rate"] == "30000/1001", "\(info)")
        #expect(info["sample_aspect_ratio"] == "4:3", "\(info)")
        let pts = try ptsTimes(out, scratch)
        #expect(pts.count == 40)
        #expect(pts.enumerated().allSatisfy { abs($0.element - Double($0.offset) * 1001 / 30000) < 0.001 }, "\(pts.prefix(5))")
    }

    /// RGB frames into libx264 are converted to one of its formats; a size change mid-stream is
    /// scaled to the first size; neither stops the recording.
    @Test func recordConvertsFormatAndSizeChanges() throws {
        let scratch = try Scratch()
        let rgb = scratch.file("rgb.mkv")
        let sinks = try run(["--pattern", "--pix-fmt", "rgb24", "--size", "160x120", "--rate", "25", "--frames", "20", "--quiet"],
                            sinks: [["--record", rgb, "--preset", "ultrafast", "-g", "10", "--crf", "20"]], stream: "rgb", scratch)
        #expect(sinks[0].stdout.contains("converted from rgb24"), "\(sinks[0].stdout)")
        var info = try probe(rgb, "stream=codec_name,width,height,pix_fmt,nb_read_frames", count: true, scratch)
        #expect(info["codec_name"] == "h264" && info["nb_read_frames"] == "20", "\(info)")
        #expect(["yuv444p", "yuv420p", "yuv422p"].contains(info["pix_fmt"] ?? ""), "\(info)")

        let changed = scratch.file("changed.nut")
        _ = try run(["--pattern", "--size", "160x120", "--size-change-at", "8:96x64", "--rate", "25", "--frames", "16", "--quiet"],
                    sinks: [["--record", changed, "-c:v", "ffv1"]], stream: "chg", scratch)
        info = try probe(changed, "stream=width,height,nb_read_frames", count: true, scratch)
        #expect(info["width"] == "160" && info["height"] == "120" && info["nb_read_frames"] == "16", "\(info)")
        let sizes = try text("ffprobe -v error -show_entries frame=width,height -of csv=p=0 '\(changed)'", scratch)
        #expect(Set(sizes.split(separator: "\n")) == ["160,120"], "\(sizes)")
    }

    struct KillCase: CustomTestStringConvertible, Sendable {
        let file: String
        let args: [String]
        let lossless: Bool
        var testDescription: String { file }
    }

    /// A recorder killed with SIGKILL leaves a file ffmpeg decodes: some frames, none it had not
    /// received, and (lossless) exactly the stream's first frames.
    @Test(arguments: [KillCase(file: "killed.mkv", args: ["-c:v", "ffv1"], lossless: true),
                      KillCase(file: "killed.mp4", args: ["--preset", "veryfast"], lossless: false),
                      KillCase(file: "killed.mov", args: ["-c:v", "ffv1"], lossless: true)])
    func sigkillLeavesAReadableRecording(_ c: KillCase) throws {
        let scratch = try Scratch()
        let out = scratch.file(c.file)
        let log = scratch.file("recorder.log")
        let producer = try scratch.start(["produce", "--pattern", "--size", "320x240", "--rate", "50", "--frames", "3000",
                                          "--out", "k", "--wait-for", "2", "--quiet"])
        let md5 = try scratch.start(["sink", "--in", "k", "--wait", "30", "--framemd5", scratch.file("stream.md5")])
        let recorder = try scratch.start(["sink", "--in", "k", "--wait", "30", "--record", out, "--seq-log", log] + c.args)
        func received() -> Int {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").filter { $0.hasPrefix("frame ") }.count
        }
        func size() -> Int { ((try? FileManager.default.attributesOfItem(atPath: out))?[.size] as? Int) ?? 0 }
        #expect(eventually(timeout: 60) { received() >= 100 && size() > 20_000 }, "received \(received()), \(size()) bytes")
        recorder.signal(SIGKILL)
        #expect(recorder.wait(timeout: 10) == 128 + SIGKILL)
        let got = received()
        producer.signal(SIGINT)
        #expect(producer.wait(timeout: 60) == 0)
        #expect(md5.wait(timeout: 60) == 0, "\(md5.stderr)")

        let (status, data, err) = try shell("ffmpeg -v error -i '\(out)' -map 0:v:0 -f framemd5 -", scratch)
        let decoded = hashes(String(decoding: data, as: UTF8.self))
        #expect(status == 0, "\(err.prefix(300))")
        #expect(decoded.count > 0 && decoded.count <= got, "decoded \(decoded.count) of \(got) received")
        if c.lossless {
            let stream = hashes((try? String(contentsOfFile: scratch.file("stream.md5"), encoding: .utf8)) ?? "")
            #expect(Array(stream.prefix(decoded.count)) == decoded, "the killed recording is not the stream's first frames")
        }
    }

    /// SIGINT: the encoder is drained and the trailer written; every received frame is in the file.
    @Test func sigintCompletesTheRecording() throws {
        let scratch = try Scratch()
        let out = scratch.file("stopped.mp4")
        let log = scratch.file("recorder.log")
        let producer = try scratch.start(["produce", "--pattern", "--size", "320x240", "--rate", "50", "--frames", "3000",
                                          "--out", "s", "--wait-for", "1", "--quiet"])
        let recorder = try scratch.start(["sink", "--in", "s", "--wait", "30", "--record", out, "--seq-log", log])
        #expect(eventually(timeout: 60) {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").count > 60
        })
        recorder.signal(SIGINT)
        #expect(recorder.wait(timeout: 60) == 0, "\(recorder.stderr)")
        producer.signal(SIGINT)
        #expect(producer.wait(timeout: 60) == 0)
        let got = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").filter { $0.hasPrefix("frame ") }.count
        let info = try probe(out, "stream=nb_read_frames,avg_frame_rate", count: true, scratch)
        #expect(info["nb_read_frames"] == String(got), "\(info), received \(got)")
        #expect(info["avg_frame_rate"] == "50/1", "\(info)")
        #expect(recorder.stdout.contains("record: \(out) (libx264 yuv420p 320x240 50 fps, mp4): \(got) frames"), "\(recorder.stdout)")
    }

    /// Bad arguments are one error line and a non-zero status, before any stream is waited for.
    @Test func badInputsAreOneErrorLine() throws {
        let scratch = try Scratch()
        let cases: [([String], Int32, String)] = [
            (["--record", scratch.file("a.mkv"), "-c:v", "nosuchcodec"], 1, "FFmpeg has no video encoder 'nosuchcodec'"),
            (["--record", scratch.file("a.mkv"), "-c:v", "aac"], 1, "FFmpeg has no video encoder 'aac'"),
            (["--record", "/nonexistent-dir/a.mkv"], 1, "cannot write '/nonexistent-dir/a.mkv'"),
            (["--record", scratch.file("a.xyz")], 1, "cannot tell the container from the name"),
            (["--record", scratch.file("a.mkv"), "-f", "nosuchformat"], 1, "FFmpeg knows no output format 'nosuchformat'"),
            (["--record", scratch.file("a.mp4"), "-c:v", "ffv1"], 1, "mp4 cannot carry ffv1 video"),
            (["--record", scratch.file("a.mkv"), "--preset", "warpspeed"], 1, "refused --preset 'warpspeed'"),
            (["--record", scratch.file("a.mkv"), "-c:v", "ffv1", "--crf", "20"], 1, "the ffv1 encoder has no --crf option"),
            (["--record", scratch.file("a.mkv"), "-b:v", "fast"], 2, "-b:v must be a bit rate"),
            (["--record", scratch.file("a.mkv"), "--crf", "-3"], 2, "--crf must be a number"),
            (["--record", scratch.file("a.mkv"), "-g", "0"], 2, "-g must be an integer"),
            (["--y4m", "/nonexistent-dir/a.y4m"], 1, "cannot write '/nonexistent-dir/a.y4m'"),
            (["--raw", "-", "--y4m", "-"], 2, "only one output can go to standard output"),
            (["--y4m", scratch.file("b.y4m"), "-c:v", "ffv1"], 2, "-c:v goes with --record"),
            (["--record", "-"], 2, "--record needs a file name"),
        ]
        for (args, status, message) in cases {
            let r = try scratch.run(["sink", "--in", "nothing", "--wait", "0"] + args, timeout: 30)
            #expect(r.status == status, "\(args): status \(r.status)")
            let lines = r.stderr.split(separator: "\n")
            #expect(lines.count == 1 && lines[0].hasPrefix("framesrv: error: ") && lines[0].contains(message),
                    "\(args): \(r.stderr.prefix(300))")
        }
    }

    /// The status line appears on a terminal (ffmpeg's fields, \r refreshes, a final newline), never in a file.
    @Test func progressOnlyOnATerminal() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--size", "64x48", "--rate", "25", "--frames", "30",
                                          "--out", "pg", "--wait-for", "2", "--quiet"])
        let plain = try scratch.start(["sink", "--in", "pg", "--wait", "30", "--record", scratch.file("plain.mkv"), "-c:v", "ffv1"])
        // script(1) gives the sink a pseudo-terminal.
        let (status, out, err) = try shell(
            "script -qec \"'\(framesrvPath)' sink --in pg --wait 30 --record '\(scratch.file("tty.mkv"))' -c:v ffv1\" /dev/null", scratch)
        #expect(status == 0, "\(err)")
        #expect(plain.wait(timeout: 60) == 0)
        #expect(producer.wait(timeout: 60) == 0)
        let tty = String(decoding: out, as: UTF8.self)
        #expect(tty.contains("\rframe=   30 fps=") && tty.contains(" time=00:00:01.20 bitrate="), "\(tty.prefix(400))")
        #expect(!plain.stderr.contains("frame=") && !plain.stderr.contains("\r"), "\(plain.stderr.prefix(300))")
    }
}
