import Foundation
import FrameControl
import FrameServer
@testable import framesrv
import Glibc
import Testing

/// The command line itself: option parsing (each command's `XOptions(parsing:)`, a pure
/// function of the arguments), usage errors, exit statuses, and a parent of stages (demo)
/// that stops its children when one fails or when it dies.
@Suite struct CommandLineTests {
    // MARK: Parsing, in process

    @Test func optionsParseWithoutIO() throws {
        let produce = try ProduceOptions(parsing: ["--pattern", "--out", "p", "--stall-timeout", "2.5", "--frames", "3"])
        #expect(produce.out == "p" && produce.stallTimeout == 2.5 && produce.pattern.frames == 3 && produce.media == nil)
        let media = try ProduceOptions(parsing: ["-i", "/nonexistent.mp4", "--out", "m", "-ss", "1.5", "--copy"])
        #expect(media.media?.input == "/nonexistent.mp4" && media.media?.inputOptions.start == 1_500_000 && media.media?.copy == true)
        let nvdec = try ProduceOptions(parsing: ["-i", "a.mp4", "--out", "g", "--hwaccel", "cuda", "--hwaccel-device", "1"])
        #expect(nvdec.media?.cuda?.device == 1 && nvdec.media?.cuda?.nvdec == true && nvdec.media?.inputOptions.cudaDevice == 1
                && nvdec.media?.audioOut == "g-audio")   // the sound beside the CUDA stream, as on the host path
        #expect(try ProduceOptions(parsing: ["-i", "a.mp4", "--out", "g", "--hwaccel", "cuda", "-an"]).media?.audioOut == nil)
        let uploaded = try ProduceOptions(parsing: ["-i", "a.mp4", "--out", "g", "--memory", "cuda"])
        #expect(uploaded.media?.cuda?.nvdec == false && uploaded.media?.inputOptions.cudaDevice == nil)
        #expect(try InspectOptions(parsing: ["--", "-x"]).stream == "-x")
        #expect(try SinkOptions(parsing: ["--in", "a", "--framemd5", "-"]).outputs == ["-"])
        #expect(try SinkOptions(parsing: ["--in", "a", "--null", "--warmup", "50"]).settings.latencyWarmup == 50)
        #expect(try FilterOptions(parsing: ["--in", "a", "--out", "b", "--preset", "gray"]).graph == "format=gray")
        #expect(try BenchOptions(parsing: ["transport", "--quick"]).benchmark == .transport(.init(frames: nil, seconds: 0.25, rounds: 1)))
        #expect(try BenchOptions(parsing: ["transport", "--quick", "--section", "5,1"]).benchmark
                == .transport(.init(frames: nil, seconds: 0.25, rounds: 1, sections: [1, 5])))
        for bad in [["transport", "--section", "7"], ["transport", "--section", "5,"], ["clients", "--section", "5"], ["gpu", "--section", "4"]] {
            #expect(throws: UsageError.self) { try BenchOptions(parsing: bad) }
        }
        #expect(try BenchOptions(parsing: ["gpu", "--quick"]).benchmark == .gpu(seconds: 0.5, sections: []))
        #expect(try BenchOptions(parsing: ["gpu", "--section", "2,1"]).benchmark == .gpu(seconds: 2, sections: [1, 2]))
        #expect(try BenchOptions(parsing: ["gpu", "--seconds", "3", "--python", "/p"]).settings.python == "/p")
        #expect(try DemoOptions(parsing: ["-o", "/nonexistent/x.mp4", "--frames", "2"]).frames == 2)
        _ = try ListOptions(parsing: ["--json"])
        _ = try TopOptions(parsing: ["-n", "1", "-b"])
        _ = try CleanOptions(parsing: [])
    }

    @Test(arguments: [
        ["--pattern", "--out", "x", "--out", "y"],
        ["--pattern", "--out", "x", "-o", "y"],
        ["--pattern", "--out=x", "--out", "y"],
        ["--pattern", "--out", "-x"],
        ["--pattern", "--out", "p", "--stall-timeout", "0"],
        ["--pattern", "--out", "p", "--stall-timeout", "nan"],
        ["-i", "a.mp4", "--out", "p", "--rate", "5"],
        ["-i", "a.mp4", "--out", "p", "--hwaccel", "vaapi"],
        ["-i", "a.mp4", "--out", "p", "--memory", "gpu"],
        ["-i", "a.mp4", "--out", "p", "--hwaccel", "cuda", "--memory", "host"],
        ["-i", "a.mp4", "--out", "p", "--hwaccel", "cuda", "--size", "64x64"],
        ["-i", "a.mp4", "--out", "p", "--memory", "cuda", "--copy"],
        ["-i", "a.mp4", "--out", "p", "--hwaccel-device", "1"],
        ["-i", "a.mp4", "--out", "p", "--hwaccel", "cuda", "--hwaccel-device", "64"],
        ["--pattern", "--out", "p", "--memory", "cuda"],
    ])
    func produceUsageErrors(_ arguments: [String]) {
        #expect(throws: UsageError.self) { try ProduceOptions(parsing: arguments) }
    }

    /// Times from a command line are bounded in one place (TimeBound): what trapped on an
    /// arithmetic overflow (SIGILL) is one usage line.
    @Test func hugeTimesAreOneUsageLine() throws {
        let huge = "9223372036854"
        func refusal(_ parse: () throws -> Void) -> String {
            do { try parse(); return "parsed" } catch { return "\(error)" }
        }
        for (what, text) in [
            ("replay -ss", refusal { _ = try ReplayCommandOptions(parsing: ["rec.nut", "-ss", huge]) }),
            ("replay -t", refusal { _ = try ReplayCommandOptions(parsing: ["rec.nut", "-t", "9300000000"]) }),
            ("produce -ss", refusal { _ = try ProduceOptions(parsing: ["-i", "a.mp4", "--out", "a", "-ss", huge]) }),
            ("record --snapshot", refusal { _ = try RecordCommandOptions(parsing: ["--in", "a", "-o", "x.nut", "--snapshot", "9300000000"]) }),
        ] {
            #expect(text.contains("out of range (a time is at most 365 days"), "\(what): \(text)")
        }
        #expect(throws: ControlRequestError.outOfRange(.seek, huge)) { try ControlRequest.parse("seek \(huge)") }
        #expect(throws: ControlRequestError.outOfRange(.seek, "+" + huge)) { try ControlRequest.parse("seek +\(huge)") }
        #expect(try ControlRequest.parse("seek 8760:00:00") == .seek(.absolute(365 * 86_400)))
    }

    /// record --segment-size: bytes with K/M/G/T (powers of 1024), 0 for one file, 1 GiB by
    /// default; too small, too large, negative or not a size is one usage line.
    @Test func segmentSizeIsABytesCount() throws {
        func segment(_ args: [String]) throws -> Int64? {
            try RecordCommandOptions(parsing: ["--in", "a", "-o", "x.nut"] + args).settings.segmentBytes
        }
        #expect(try segment([]) == 1 << 30)
        #expect(try segment(["--segment-size", "0"]) == nil)
        #expect(try segment(["--segment-size", "256M"]) == 256 << 20)
        #expect(try segment(["--segment-size", "2g"]) == 2 << 30)
        #expect(try segment(["--segment-size", "1048576"]) == 1 << 20)
        for bad in ["1K", "1023K", "-1M", "1.5G", "G", "9999999999T", "1X", "nan", "1ß", "1ﬁ"] {
            #expect(throws: UsageError.self, "--segment-size \(bad)") { try segment(["--segment-size", bad]) }
        }
        #expect(throws: UsageError.self) { try segment(["--segment-size", "1G", "--snapshot", "10"]) }
    }

    @Test func everyParserRejectsGarbageWithAUsageError() {
        // What the libFuzzer targets do, a little: any argument array parses or throws UsageError.
        var rng = SystemRandomNumberGenerator()
        let words = ["--out", "--in", "-i", "--", "-", "--frames", "-1", "1e400", "=", "--size=0x0", "--pattern",
                     "--null", "--framemd5", "--vf", "--preset", "blend=:", "--hold-us", "5-1", "\u{0}", "x"]
        for _ in 0..<2000 {
            let args = (0..<Int.random(in: 0...6, using: &rng)).map { _ in words.randomElement(using: &rng)! }
            for parse in [{ _ = try ProduceOptions(parsing: args) }, { _ = try SinkOptions(parsing: args) },
                          { _ = try FilterOptions(parsing: args) }, { _ = try InspectOptions(parsing: args) },
                          { _ = try BenchOptions(parsing: args) }, { _ = try TopOptions(parsing: args) },
                          { _ = try DemoOptions(parsing: args) }] as [() throws -> Void] {
                do { try parse() } catch { #expect(error is UsageError, "\(args): \(error)") }
            }
        }
    }

    // MARK: The executable

    @Test func noCommandIsAUsageErrorOnStandardError() throws {
        let scratch = try Scratch()
        let r = try scratch.run([])
        #expect(r.status == 2)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.contains("usage: framesrv <command>"))
        #expect(try scratch.run(["--help"]).status == 0)
    }

    @Test func versionPrintsTheReleaseAndProtocol() throws {
        let scratch = try Scratch()
        let r = try scratch.run(["--version"])
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)")
        #expect(r.stdout == "framesrv \(FrameServerVersion.release) (protocol version \(FrameServerVersion.protocolVersion))\n")
        let pyproject = try String(contentsOf: repositoryRoot.appendingPathComponent("clients/python/pyproject.toml"), encoding: .utf8)
        #expect(pyproject.contains("version = \"\(FrameServerVersion.release)\""), "the Python package's version differs from framesrv's")
    }

    @Test func repeatedOptionsAndDashNamesAreUsageErrors() throws {
        let scratch = try Scratch()
        let twice = try scratch.run(["produce", "--pattern", "--out", "x", "--out", "y", "--frames", "1"])
        #expect(twice.status == 2)
        #expect(twice.stderr == "framesrv: error: --out given twice ('x' and 'y'): say it once\n")
        #expect(try scratch.run(["sink", "--in", "a", "--null", "--frames", "1", "--frames", "2"]).status == 2)
        let dash = try scratch.run(["produce", "--pattern", "--out", "-x", "--frames", "1"])
        #expect(dash.status == 2 && dash.stderr.contains("starts with '-'"), "\(dash.stderr)")
        #expect(try scratch.run(["filter", "--in", "a", "--out", "-x", "--preset", "gray"]).status == 2)
        // After `--` a name is a name, not an option.
        let inspect = try scratch.run(["inspect", "--", "-x"])
        #expect(inspect.status == 1 && inspect.stderr.contains("no stream named '-x'"), "\(inspect.stderr)")
    }

    @Test func invalidUTF8ArgumentIsNamedAsSuch() throws {
        let scratch = try Scratch()
        let r = try shell("'\(framesrvPath)' produce -i \"$(printf '/tmp/\\377.mp4')\" --out u", scratch)
        #expect(r.status == 2)
        #expect(r.stderr.contains("is not valid UTF-8") && !r.stderr.contains("No such file"), "\(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
    }

    /// An H.264 clip whose media data, but the last 20 KB, is overwritten with a pattern:
    /// most packets fail to decode, more than ffmpeg's -max_error_rate allows.
    private func damagedClip(_ scratch: Scratch) throws -> String {
        let clip = scratch.file("clip.mp4"), damaged = scratch.file("damaged.mp4")
        try #require(try shell("ffmpeg -v error -f lavfi -i testsrc2=size=160x120:rate=25 -t 2 -c:v libx264 -g 5 '\(clip)'", scratch).status == 0)
        var data = try Data(contentsOf: URL(fileURLWithPath: clip))
        let mdat = try #require(data.range(of: Data("mdat".utf8))).upperBound
        for i in mdat..<max(mdat, data.count - 20_000) { data[i] = UInt8(truncatingIfNeeded: i &* 131) }
        try data.write(to: URL(fileURLWithPath: damaged))
        return damaged
    }

    @Test func damagedInputExitsAsFFmpegDoes() throws {
        let scratch = try Scratch()
        let damaged = try damagedClip(scratch)
        let ffmpeg = try shell("ffmpeg -v quiet -i '\(damaged)' -map 0:v:0 -f null -", scratch)
        let produce = try scratch.run(["produce", "-i", damaged, "--no-wait", "--out", "d", "--quiet"])
        #expect(ffmpeg.status == 69)
        #expect(produce.status == ffmpeg.status, "\(produce.stderr)")
        #expect(produce.stderr.contains("decoding errors"), "\(produce.stderr)")
    }

    /// A producer whose input failed ends its stream as failed: the frames it published still
    /// arrive, and every stage below (a filter, then a sink) exits non-zero with one line.
    @Test func failedInputFailsTheChainBelowIt() throws {
        let scratch = try Scratch()
        let damaged = try damagedClip(scratch)
        let producer = try scratch.start(["produce", "-i", damaged, "--out", "d", "--wait-for", "1", "--quiet"])
        let filter = try scratch.start(["filter", "--in", "d", "--out", "g", "--vf", "format=gray", "--wait-for", "1", "--quiet"])
        let sink = try scratch.start(["sink", "--in", "g", "--null", "--quiet"])
        #expect(producer.wait(timeout: 60) == 69, "\(producer.stderr)")
        #expect(filter.wait(timeout: 60) == 1, "\(filter.stderr)")
        #expect(sink.wait(timeout: 60) == 1, "\(sink.stderr)")
        #expect(filter.stderr.contains("input failed") && filter.stderr.split(separator: "\n").count == 1, "\(filter.stderr)")
        #expect(sink.stderr.contains("input failed") && sink.stderr.split(separator: "\n").count == 1, "\(sink.stderr)")
    }

    @Test func framemd5ToAFailingDeviceFailsAtTheFirstFrame() throws {
        let scratch = try Scratch()
        // An endless stream at 5 fps: 64 KB of lines would take minutes, so the error must come
        // from the first frames, not from a full buffer or the end.
        let producer = try scratch.start(["produce", "--pattern", "--out", "full", "--size", "64x64", "--rate", "5", "--quiet"])
        let sink = try scratch.run(["sink", "--in", "full", "--framemd5", "/dev/full", "--quiet"], timeout: 30)
        producer.signal(SIGINT)
        #expect(sink.status == 1, "\(sink.stderr)")
        #expect(sink.stderr.contains("/dev/full"), "\(sink.stderr)")
        #expect(producer.wait() == 0)
    }

    @Test func sinkStoppedWhileItsProducerIsGoneExitsNonZero() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "g", "--size", "64x64", "--rate", "50", "--quiet"])
        let sink = try scratch.start(["sink", "--in", "g", "--null", "--quiet"])
        #expect(eventually { scratch.snapshot("g")?.consumers.count == 1 })
        producer.kill()
        #expect(eventually { sink.stderr.contains("exited without ending the stream") })
        // One SIGINT is enough, wherever it lands: even one just before the wait for a new
        // producer begins is seen at the wait's next re-check (Consumer.stopRecheckMillis).
        sink.signal(SIGINT)
        #expect(sink.wait(timeout: 30) == 1, "\(sink.stderr)")
    }

    // MARK: A parent of stages

    @Test func demoStopsEveryStageWhenOneFails() throws {
        let scratch = try Scratch()
        let r = try scratch.run(["demo", "-o", "/nonexistent/x.mp4", "--frames", "2"], timeout: 60)
        #expect(r.status == 1)
        #expect(r.stderr.hasPrefix("framesrv: error: the record stage failed: "), "\(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        // Every stage ended its stream and removed its files.
        #expect(eventually { streamFiles(scratch).isEmpty }, "\(streamFiles(scratch))")
    }

    @Test func stagesDieWithTheirParent() throws {
        let scratch = try Scratch()
        let demo = try scratch.start(["demo", "-o", scratch.file("demo.mp4"), "--frames", "100000"])
        #expect(eventually { streamFiles(scratch).filter { $0.hasSuffix(".ctl") }.count == 3 })
        let stages = children(of: demo.pid)
        #expect(stages.count == 4, "\(stages)")
        demo.kill()
        #expect(eventually { stages.allSatisfy { !isAlive($0) } }, "stages left running after the demo died")
        #expect(eventually { streamFiles(scratch).allSatisfy { !$0.hasSuffix(".ctl") } }, "\(streamFiles(scratch))")
    }

    /// Control segments, pools and sockets in the scratch directory (lock files stay by design).
    func streamFiles(_ scratch: Scratch) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: scratch.path)) ?? [])
            .filter { $0.hasSuffix(".ctl") || $0.contains(".pool.") || $0.hasSuffix(".sock") }
    }

    func children(of pid: Int32) -> [Int32] {
        procFile("/proc/\(pid)/task/\(pid)/children").split(separator: " ").compactMap { Int32($0) }
    }

    /// Running (a zombie or a missing process is not).
    func isAlive(_ pid: Int32) -> Bool {
        let stat = procFile("/proc/\(pid)/stat")
        guard let close = stat.lastIndex(of: ")") else { return false }
        return !stat[stat.index(after: close)...].hasPrefix(" Z")
    }
}

extension CommandLineTests {
    /// Monitors look without touching: with no runtime directory they report no streams,
    /// exit 0, and leave no directory behind.
    @Test func monitorsDoNotCreateTheRuntimeDirectory() throws {
        let scratch = try Scratch()
        let absent = scratch.file("absent")
        func run(_ args: [String]) throws -> (status: Int32, stdout: String, stderr: String) {
            let p = try scratch.start(args, environment: ["FRAMESRV_DIR": absent])
            return (p.wait(timeout: 60), p.stdout, p.stderr)
        }
        let ls = try run(["ls"])
        #expect(ls.status == 0 && ls.stdout == "no streams in \(absent)\n", "\(ls)")
        let json = try run(["ls", "--json"])
        #expect(json.status == 0 && json.stdout == "[]\n", "\(json)")
        let top = try run(["top", "-n", "1", "-b"])
        #expect(top.status == 0 && top.stdout.contains("no streams"), "\(top)")
        let clean = try run(["clean"])
        #expect(clean.status == 0 && clean.stdout == "nothing to clean in \(absent)\n", "\(clean)")
        let inspect = try run(["inspect", "s"])
        #expect(inspect.status == 1 && inspect.stderr.contains("no stream named 's'"), "\(inspect)")
        #expect(!FileManager.default.fileExists(atPath: absent))
    }

    /// --framemd5 into a FIFO whose reader never reads: a stop signal ends the blocked write
    /// with one line (exit 1), as it does for y4m.
    @Test func framemd5BlockedOnAReaderThatDoesNotReadStops() throws {
        let scratch = try Scratch()
        let fifo = scratch.file("stuck.framemd5")
        #expect(mkfifo(fifo, 0o600) == 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        #expect(reader >= 0)
        defer { close(reader) }
        let sink = try scratch.start(["sink", "--in", "md5", "--framemd5", fifo, "--lossless", "--quiet"])
        // About 90 bytes a line: 2,000 frames fill the 64 KiB pipe.
        let source = try scratch.start(["produce", "--pattern", "--out", "md5", "--size", "64x64", "--frames", "2000",
                                        "--rate", "max", "--wait-for", "1", "--quiet"])
        func delivered() -> UInt64 { (try? StreamSnapshot.read("md5", in: scratch.directory))?.consumers.first?.delivered ?? 0 }
        // Blocked in write() with the pipe full: frames were delivered, and no more come.
        #expect(eventually(timeout: 30) {
            let before = delivered()
            usleep(300_000)
            return before > 0 && delivered() == before
        })
        sink.signal(SIGINT)
        #expect(sink.wait(timeout: 20) == 1)
        let lines = sink.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("stopped while writing"), "\(sink.stderr)")
        source.kill()
    }
}
