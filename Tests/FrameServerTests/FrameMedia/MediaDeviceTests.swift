import Foundation
import FrameServer
import Glibc
import Testing

/// Input devices (libavdevice: lavfi, x11grab), `--strict`, a mid-stream size change and
/// `bench decode`, each against what the ffmpeg CLI does.
extension MediaTests {
    /// `-f lavfi -i testsrc2=...`: libavdevice's lavfi input, frame for frame ffmpeg's.
    @Test func lavfiDeviceMatchesFFmpeg() throws {
        let scratch = try Scratch()
        let source = "testsrc2=size=320x240:rate=25"
        let (status, out, err) = try shell("ffmpeg -v error -f lavfi -i '\(source)' -frames:v 20 -map 0:v:0 -f framemd5 -", scratch)
        #expect(status == 0, "\(err)")
        let expected = String(decoding: out, as: UTF8.self)
        #expect(frameLines(expected).count == 20)
        let (md5, producer, _) = try framemd5Pipeline(["-f", "lavfi", "-i", source, "--frames", "20"], stream: "lavfi", scratch)
        #expect(md5 == expected, "framesrv's framemd5 of -f lavfi \(source) differs from ffmpeg's")
        // lavfi makes frames when asked: not a live source, nothing dropped.
        #expect(producer.stdout.contains("published 20 frames of 320x240 yuv420p") && producer.stdout.contains("dropped 0"),
                "\(producer.stdout)")
    }

    /// A display number with neither a socket nor a lock file.
    func freeDisplay() -> Int? {
        (90..<190).first { n in
            !FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(n)") && !FileManager.default.fileExists(atPath: "/tmp/.X\(n)-lock")
        }
    }

    /// `-f x11grab -i :N`: screen capture from a virtual X display with a white root window
    /// (Xvfb -wr). The producer is a live source (with 16 slots none of the 10 frames has to be
    /// dropped, even when x11grab catches up on the time spent waiting for consumers in one
    /// burst); a lossless sink and a lossless consumer get 10 frames of 320x240,
    /// converted from x11grab's bgr0 to bgra, each with the bytes ffmpeg captures
    /// (`-pix_fmt bgra`), and the top-left pixel is white.
    @Test
    func x11grabScreenCapture() throws {
        let scratch = try Scratch()
        let display = try #require(freeDisplay())
        let xvfb = try #require(DaemonProcess([try RequiredTool.xvfb.path(), ":\(display)", "-screen", "0", "320x240x24", "-nolisten", "tcp", "-wr"]))
        defer { xvfb.stop() }   // SIGTERM: Xvfb removes its socket and lock file
        #expect(eventually(timeout: 20) { FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(display)") })

        // What ffmpeg captures from the (still) screen, cursor included.
        let (status, out, err) = try shell("ffmpeg -v error -f x11grab -i :\(display) -frames:v 1 -pix_fmt bgra -f framemd5 -", scratch)
        #expect(status == 0, "\(err)")
        let ffmpegLine = try #require(frameLines(String(decoding: out, as: UTF8.self)).first)
        let ffmpegColumns = ffmpegLine.split(separator: ",").suffix(2).map { $0.trimmingCharacters(in: .whitespaces) }

        let producer = try scratch.start(["produce", "-f", "x11grab", "-i", ":\(display)", "--frames", "10", "--pix-fmt", "bgra",
                                          "--slots", "16", "--out", "screen", "--wait-for", "2"])
        #expect(eventually { scratch.snapshot("screen")?.liveSource == true }, "x11grab is not a live source: \(producer.stderr)")
        let sink = try scratch.start(["sink", "--in", "screen", "--framemd5", "-"])
        var options = ConsumerOptions(mode: .lossless)
        options.waitSeconds = 30
        let consumer = try Consumer(stream: "screen", options: options, directory: scratch.directory)
        var received = 0
        while let frame = try consumer.next() {
            #expect(frame.header.format == FrameFormat(.bgra, width: 320, height: 240))
            let pixels = frame.plane(0)
            #expect(Array(pixels.prefix(4)) == [255, 255, 255, 255], "top-left pixel: \(Array(pixels.prefix(4)))")
            received += 1
            frame.release()
        }
        #expect(received == 10)
        #expect(producer.wait(timeout: 60) == 0, "\(producer.stderr)")
        #expect(sink.wait(timeout: 60) == 0, "\(sink.stderr)")
        #expect(producer.stdout.contains("published 10 frames of 320x240 bgra"), "\(producer.stdout)")
        let lines = frameLines(sink.stdout)
        #expect(lines.count == 10, "\(sink.stdout)")
        for line in lines {
            let columns = line.split(separator: ",").suffix(2).map { $0.trimmingCharacters(in: .whitespaces) }
            #expect(columns == ffmpegColumns, "framesrv captured \(columns), ffmpeg \(ffmpegColumns)")
        }
    }

    /// An H.264 stream with bytes overwritten in the middle (not truncated): by default the
    /// producer publishes what decodes, as ffmpeg does, and reports the decode errors; with
    /// `--strict` the first decode error is one error line and exit status 1.
    @Test func strictMakesTheFirstDecodeErrorFatal() throws {
        let scratch = try Scratch()
        let full = try generateClip(Input(file: "full.h264", rate: "25", frames: 30, ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p"]), scratch)
        var data = try Data(contentsOf: URL(fileURLWithPath: full))
        for offset in stride(from: data.count * 4 / 10, to: data.count * 4 / 10 + 2000, by: 97) {
            data.replaceSubrange(offset..<offset + 16, with: [UInt8](repeating: 0x5a, count: 16))
        }
        let corrupt = scratch.file("corrupt.h264")
        try data.write(to: URL(fileURLWithPath: corrupt))
        // One decoder thread on both sides: how errors are concealed depends on the threading.
        let expected = try ffmpegFramemd5(corrupt, before: "-threads 1", scratch)
        let frames = frameLines(expected).count
        #expect(frames > 0)

        let (md5, producer, _) = try framemd5Pipeline(["-i", corrupt, "--threads", "1"], stream: "lenient", scratch)
        #expect(md5 == expected)
        #expect(producer.stdout.contains("published \(frames) frames"), "\(producer.stdout)")
        #expect(!producer.stdout.contains("decode errors 0"), "\(producer.stdout)")
        #expect(producer.stderr.contains("decode error"), "\(producer.stderr)")

        let strict = try scratch.run(["produce", "-i", corrupt, "--threads", "1", "--strict", "--no-wait", "--out", "strict"])
        #expect(strict.status == 1)
        #expect(strict.stderr.hasPrefix("framesrv: error: decode error in '\(corrupt)' (--strict): "), "\(strict.stderr)")
        #expect(strict.stderr.split(separator: "\n").count == 1, "\(strict.stderr)")
        #expect(strict.stdout.isEmpty, "\(strict.stdout)")

        // An intact file is not affected by --strict.
        let (md5Full, intact, _) = try framemd5Pipeline(["-i", full, "--strict"], stream: "intact", scratch)
        #expect(md5Full == (try ffmpegFramemd5(full, scratch)))
        #expect(intact.stdout.contains("published 30 frames") && intact.stdout.contains("decode errors 0"), "\(intact.stdout)")
        #expect(try scratch.run(["produce", "--pattern", "--strict", "--out", "p"]).status == 2)
    }

    /// An MPEG-TS file whose H.264 stream changes size mid-stream (two clips joined with
    /// cat, the second's timestamps following the first's): the frames before the change are
    /// ffmpeg's frames of part 1, those after it part 2's (sizes and hashes). In both
    /// directions: growing starts a new pool epoch while the decoder still references slots
    /// of the old one, and decoding in place resumes in the new epoch.
    @Test(arguments: [("320x240", "176x144"), ("176x144", "320x240")])
    func midStreamSizeChange(first: String, second: String) throws {
        let scratch = try Scratch()
        let (part1, part2, joined) = try sizeChangeClip(first, second, scratch)
        let expected1 = sizeAndHash(try ffmpegFramemd5(part1, scratch)), expected2 = sizeAndHash(try ffmpegFramemd5(part2, scratch))
        #expect(expected1.count == 12 && expected2.count == 10)
        let (md5, producer, _) = try framemd5Pipeline(["-i", joined, "--threads", "2"], stream: "resize", scratch)
        let got = sizeAndHash(md5)
        #expect(got.count == 22, "\(md5)")
        #expect(Array(got.prefix(12)) == expected1, "the frames before the change differ from ffmpeg's of part 1")
        #expect(Array(got.dropFirst(12)) == expected2, "the frames after the change differ from ffmpeg's of part 2")
        #expect(producer.stdout.contains("published 22 frames of \(first) yuv420p, then \(second) yuv420p"), "\(producer.stdout)")
        // At most the frames around the change are copied.
        let counts = try #require(pathCounts(producer.stdout), "\(producer.stdout)")
        #expect(counts.zeroCopy >= 16 && counts.zeroCopy + counts.copied == 22, "\(producer.stdout)")
    }

    /// `bench decode -i SMALL --threads 1` prints framesrv's and ffmpeg's figures and their ratio.
    @Test func benchDecodeSmoke() throws {
        let scratch = try Scratch()
        let path = try generateClip(Input(file: "small.mp4", rate: "25", frames: 25, ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p"]), scratch)
        let r = try scratch.run(["bench", "decode", "-i", path, "--threads", "1"], timeout: 120)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n")
        #expect(lines.contains { $0.contains("framesrv produce") && $0.contains("25 frames") && $0.contains("frames/s") }, "\(r.stdout)")
        #expect(lines.contains { $0.contains("ffmpeg -threads 1") && $0.contains("25 frames") && $0.contains("frames/s") }, "\(r.stdout)")
        #expect(lines.contains { $0.contains("ratio framesrv/ffmpeg") }, "\(r.stdout)")
        #expect(try scratch.run(["bench", "decode", "--quick"]).status == 2)
        #expect(try scratch.run(["bench", "transport", "--threads", "1"]).status == 2)
    }
}

/// A program started with no signal blocked (`spawnWithDefaultSignals`: Xvfb would
/// otherwise ignore SIGTERM), output discarded.
final class DaemonProcess {
    let pid: pid_t
    private var reaped = false

    init?(_ argv: [String]) {
        let environment = ProcessInfo.processInfo.environment.map { "\($0.key)=\($0.value)" }
        guard let child = try? spawnWithDefaultSignals(argv, environment: environment, stdout: "/dev/null", stderr: "/dev/null")
        else { return nil }
        pid = child
    }

    /// SIGTERM, then SIGKILL if it has not exited within 10 s; reaps it.
    func stop() {
        guard !reaped else { return }
        kill(pid, SIGTERM)
        var status: Int32 = 0
        let exited = eventually(timeout: 10) { waitpid(pid, &status, WNOHANG) == pid }
        if !exited {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
        }
        reaped = true
    }

    deinit { stop() }
}
