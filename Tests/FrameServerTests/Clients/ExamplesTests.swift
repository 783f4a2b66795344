import Foundation
import FrameServer
import Glibc
import Testing

// The examples/ directory, run as a user runs it, so none can rot: swift-invert built with
// `swift build` and put between `framesrv produce` and `framesrv sink`, every-stage.sh with a few
// frames, and the README's Swift snippets, which are the code of the example and of
// `publishRamp` below.

/// swift-invert's package, and where the tests build it (its own scratch path, so
/// repeated runs are incremental and nothing lands in the example's directory).
private let invertPackage = repositoryRoot.appendingPathComponent("examples/swift-invert").path
private let invertScratch = repositoryRoot.appendingPathComponent(".build/examples/swift-invert").path

/// Builds examples/swift-invert once per test run (the first build compiles FrameServer
/// again: about a minute) and returns its executable.
private let swiftInvert: Result<String, TestFailure> = {
    // The swift on PATH (as `swift test` was run), else the one scripts/setup expects.
    let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin") + ":/opt/swift/usr/bin"
    let build: (status: Int32, stdout: Data, stderr: String)
    do throws(TestFailure) {
        build = try Spawned.run(["PATH=" + path, "swift", "build", "--package-path", invertPackage, "--scratch-path", invertScratch])
    } catch { return .failure(error) }
    guard build.status == 0 else {
        return .failure(TestFailure("swift build of swift-invert failed:\n\(String(decoding: build.stdout, as: UTF8.self))\(build.stderr)"))
    }
    return .success(invertScratch + "/debug/swift-invert")
}()

// README: producer begin
/// Publishes `frames` frames of a moving gray ramp as stream `stream` (nominally 30 fps,
/// as fast as its readers take them), waiting first for one reader so it gets them all.
/// SIGINT/SIGTERM end the stream early, cleanly (after `StopSignal.install()`).
func publishRamp(_ stream: String, frames: Int, directory: RuntimeDirectory? = nil) throws {
    var options = ProducerOptions()
    options.nominalRate = Rational(30, 1)              // what readers see as the stream's rate
    let producer = try Producer(stream: stream, options: options, directory: directory)
    producer.shouldStop = StopSignal.shouldStop        // a stop ends the waits below
    defer { producer.close() }                         // ends the stream
    guard producer.waitForLosslessConsumers(1) else { return }
    let format = FrameFormat(.gray8, width: 320, height: 240)
    for n in 0..<frames {
        guard var frame = try producer.reserve(format) else { return }   // waits for a free slot
        for y in 0..<format.rows(plane: 0) {
            let row = frame.row(y, plane: 0)           // row y's pixel bytes, in the slot
            for x in 0..<row.count { row[x] = UInt8(truncatingIfNeeded: x + y + n) }
        }
        frame.description.pts = Int64(n)
        frame.description.timeBase = Rational(1, 30)
        frame.publish()                                // readers hold it from here
    }
}
// README: producer end

/// The text between `// README: NAME begin` and `// README: NAME end` in `file`.
private func region(_ name: String, in file: String) throws -> String {
    let text = try String(contentsOfFile: file, encoding: .utf8)
    guard let begin = text.range(of: "// README: \(name) begin\n"), let end = text.range(of: "// README: \(name) end\n"),
          begin.upperBound <= end.lowerBound else { throw TestFailure("no README region '\(name)' in \(file)") }
    return String(text[begin.upperBound..<end.lowerBound])
}

/// ffprobe's codec, pixel format, size and decoded frame count of a file's video stream.
private func probe(_ file: String, _ scratch: Scratch) throws -> String {
    let (status, out, err) = try shell("ffprobe -v error -count_frames -select_streams v:0 -show_entries"
                                       + " stream=codec_name,pix_fmt,width,height,nb_read_frames -of csv=p=0 '\(file)'", scratch)
    guard status == 0 else { throw TestFailure("ffprobe \(file): \(err)") }
    return String(decoding: out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

@Suite("Examples", .serialized)
struct ExamplesTests {
    /// A -> swift-invert -> B, with A also written as y4m: B's frames are what ffmpeg's
    /// negate filter makes of A's, bit for bit, with A's timestamps, time base and rate.
    @Test(arguments: ["yuv420p", "gray"])
    func swiftInvertNegatesEveryFrameAndPassesTimingThrough(_ pixFmt: String) throws {
        let invert = try swiftInvert.get()
        let scratch = try Scratch()
        let (a, aY4M, b) = (scratch.file("a.framemd5"), scratch.file("a.y4m"), scratch.file("b.framemd5"))
        let producer = try scratch.start(["produce", "--pattern", "--out", "A", "--size", "161x121", "--pix-fmt", pixFmt,
                                          "--frames", "24", "--rate", "30000/1001", "--wait-for", "2", "--quiet"])
        let sinkA = try scratch.start(["sink", "--in", "A", "--framemd5", a, "--y4m", aY4M, "--quiet"])
        let filter = try scratch.start(["--in", "A", "--out", "B", "--wait-for", "1"], executable: invert)
        let sinkB = try scratch.start(["sink", "--in", "B", "--framemd5", b, "--quiet"])
        for (name, p) in [("producer", producer), ("sink A", sinkA), ("swift-invert", filter), ("sink B", sinkB)] {
            #expect(p.wait(timeout: 60) == 0, "\(name): \(p.stderr)")
        }
        let (inMD5, outMD5) = (try String(contentsOfFile: a, encoding: .utf8), try String(contentsOfFile: b, encoding: .utf8))
        let negated = try ffmpegFramemd5(aY4M, after: "-vf negate", scratch)
        #expect(frameLines(outMD5).count == 24)
        // Same timestamps, durations and time base (the rate's: 1001/30000) as A ...
        let timing = { (md5: String) in frameLines(md5).map { $0.split(separator: ",").prefix(4).joined(separator: ",") } }
        #expect(timing(outMD5) == timing(inMD5))
        #expect(outMD5.contains("#tb 0: 1001/30000") && inMD5.contains("#tb 0: 1001/30000"))
        // ... and ffmpeg's negative of A's pixels.
        #expect(sizeAndHash(outMD5) == sizeAndHash(negated))
        #expect(sizeAndHash(outMD5) != sizeAndHash(inMD5))
    }

    /// A filter that gives its output `nominalRate` of its input passes the rate through
    /// exactly, down a chain (the control segment keeps num/den).
    @Test(arguments: [Rational(2997, 100), Rational(30000, 1001), Rational(45000, 1499), Rational(2997, 125),
                      Rational(1_000_000, 66667), Rational(24, 1), Rational(1, 2)])
    func nominalRatePassesThroughAFilterExactly(_ rate: Rational) throws {
        let scratch = try Scratch()
        var stage = ProducerOptions()
        stage.nominalRate = rate
        var rates: [Rational?] = []
        for name in ["a", "b", "c"] {
            let producer = try Producer(stream: name, options: stage, directory: scratch.directory)
            defer { producer.close() }
            let consumer = try Consumer(stream: name, directory: scratch.directory)
            try consumer.attach()
            rates.append(consumer.nominalRate)
            stage.nominalRate = consumer.nominalRate   // the next stage's output rate
        }
        #expect(rates == Array(repeating: rate, count: 3))
    }

    /// SIGTERM ends B cleanly: its reader gets the end of the stream and exits 0.
    @Test func swiftInvertEndsItsStreamOnSIGTERM() throws {
        let invert = try swiftInvert.get()
        let scratch = try Scratch()
        let log = scratch.file("b.seqlog")
        let producer = try scratch.start(["produce", "--pattern", "--out", "A", "--size", "64x48", "--rate", "100", "--quiet"])
        let filter = try scratch.start(["--in", "A", "--out", "B", "--wait-for", "1"], executable: invert)
        let sinkB = try scratch.start(["sink", "--in", "B", "--null", "--seq-log", log, "--quiet"])
        #expect(eventually { readSeqLog(log).attachments.first?.count ?? 0 >= 5 }, "B delivers frames")
        filter.signal(SIGTERM)
        #expect(filter.wait(timeout: 30) == 0, "swift-invert: \(filter.stderr)")
        #expect(sinkB.wait(timeout: 30) == 0, "sink B ends with B: \(sinkB.stderr)")
        producer.signal(SIGINT)
        #expect(producer.wait(timeout: 30) == 0, "producer: \(producer.stderr)")
    }

    /// A 10-bit stream: one error line, exit 1, and B ends as failed (its reader says so, exit 1).
    @Test func swiftInvertRefusesAFormatThatIsNotEightBit() throws {
        let invert = try swiftInvert.get()
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "A", "--size", "64x48", "--pix-fmt", "yuv420p10le",
                                          "--frames", "3", "--rate", "max", "--wait-for", "1", "--quiet"])
        let filter = try scratch.start(["--in", "A", "--out", "B", "--wait-for", "1"], executable: invert)
        let sinkB = try scratch.start(["sink", "--in", "B", "--null", "--quiet"])
        #expect(filter.wait(timeout: 30) == 1)
        #expect(filter.stderr == "swift-invert: error: yuv420p10le is not an 8-bit format: nothing to invert\n")
        #expect(sinkB.wait(timeout: 30) == 1)
        #expect(sinkB.stderr.contains("ended the stream after its input failed"), "sink B: \(sinkB.stderr)")
        producer.signal(SIGINT)
        #expect(producer.wait(timeout: 30) == 0, "producer: \(producer.stderr)")
    }

    /// every-stage.sh with its Python stage: the H.264 recording and the gray branch get every frame.
    @Test func everyStagePipelineRecordsEveryFrameOnBothBranches() throws {
        let python = try ClientTools.python()   // scripts/python-env's venv
        try runSeeds(["--python", python], try Scratch())
    }

    /// every-stage.sh without the Python stage (--no-python): the same files.
    @Test func everyStagePipelineWithoutPythonRecordsEveryFrame() throws {
        try runSeeds(["--no-python"], try Scratch())
    }

    /// SIGTERM to every-stage.sh stops its decoder: the chain drains, and both recordings hold every
    /// frame decoded (the same count), complete (ffprobe reads them to the end).
    @Test func everyStagePipelineStopsCleanlyOnSIGTERM() throws {
        let scratch = try Scratch()
        let everyStage = repositoryRoot.appendingPathComponent("examples/pipelines/every-stage.sh").path
        let out = scratch.file("out")
        // posix_spawn with SIGTERM unblocked (Foundation's Process passes on the test runner's
        // blocked signals, and bash cannot unblock them to run its trap).
        let script = try Spawned(everyStage, ["--frames", "100000", "--out", out, "--no-python"],
                                 environment: ["FRAMESRV": framesrvPath, "FRAMESRV_DIR": scratch.path], logDirectory: scratch.path)
        let run = "chain\(script.pid)"
        defer { killStages(of: run, scratch) }
        // The recorder's stream has passed on frames.
        #expect(eventually { (scratch.snapshot(run + "-sepia")?.published ?? 0) >= 10 }, "every-stage.sh: \(script.stderr)")
        script.signal(SIGTERM)
        #expect(script.outcome(timeout: 60) == .exited(0), "every-stage.sh: \(script.stderr)")
        let (recording, gray) = (try probe(out + "/chain.mp4", scratch), try probe(out + "/gray.mkv", scratch))
        let frames = { (probed: String) in Int(probed.split(separator: ",").last ?? "") ?? 0 }
        #expect(frames(recording) >= 10 && frames(recording) == frames(gray), "\(recording) / \(gray)")
    }

    /// SIGKILLs every process of every-stage.sh run `run` still attached to one of its streams (each
    /// stage produces or consumes one): the stages run in process groups of their own, so a
    /// script that failed the test would leave them behind.
    private func killStages(of run: String, _ scratch: Scratch) {
        for stream in ["src", "blur", "rgb", "blend", "sepia", "gray"] {
            guard let s = scratch.snapshot(run + "-" + stream) else { continue }
            for pid in [s.producerPID] + s.consumers.map(\.pid) where pid > 0 { kill(pid, SIGKILL) }
        }
    }

    private func runSeeds(_ options: [String], _ scratch: Scratch) throws {
        let everyStage = repositoryRoot.appendingPathComponent("examples/pipelines/every-stage.sh").path
        let out = scratch.file("out")
        let args = ([everyStage, "--frames", "12", "--out", out] + options).map { "'\($0)'" }.joined(separator: " ")
        let (status, _, err) = try shell("FRAMESRV='\(framesrvPath)' \(args)", scratch)
        #expect(status == 0, "every-stage.sh: \(err)")
        #expect(err.contains("every-stage: starting decode: "), "it says what it starts: \(err)")
        #expect(try probe(out + "/chain.mp4", scratch) == "h264,640,360,yuv420p,12")
        #expect(try probe(out + "/gray.mkv", scratch) == "ffv1,640,360,gray,12")
        // Every stage ended: nothing of this run is left running or in the runtime directory.
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.path).filter { $0.hasPrefix("chain") && !$0.hasSuffix(".lock") }
        #expect(left.isEmpty, "left behind: \(left)")
    }

    /// The README's Swift snippets are the code the tests run: `publishRamp` (this file) and
    /// swift-invert's filter (its main.swift), verbatim.
    @Test func readmeShowsTheExamplesCode() throws {
        let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let producer = try region("producer", in: #filePath)
        let filter = try region("filter", in: invertPackage + "/Sources/swift-invert/main.swift")
        let (showsProducer, showsFilter) = (readme.contains(producer), readme.contains(filter))
        #expect(showsProducer, "README.md shows publishRamp as in ExamplesTests.swift")
        #expect(showsFilter, "README.md shows swift-invert's filter as in its main.swift")
    }

    /// The README's producer, run: a sink gets every frame of the ramp, each byte as written.
    @Test func readmeProducerPublishesTheRamp() throws {
        let scratch = try Scratch()
        let raw = scratch.file("ramp.raw")
        let sink = try scratch.start(["sink", "--in", "ramp", "--raw", raw, "--quiet"])
        // publishRamp waits for its reader without a timeout: if the sink never attaches,
        // a stop request after 60 s ends that wait (the test then fails, it does not hang).
        let finished = Locked(false)
        Thread.detachNewThread {
            sleep(60)
            if !finished.withLock({ $0 }) { StopSignal.request() }
        }
        defer { finished.withLock { $0 = true } }
        try publishRamp("ramp", frames: 4, directory: scratch.directory)
        #expect(sink.wait(timeout: 30) == 0, "sink: \(sink.stderr)")
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: raw)))
        #expect(bytes.count == 4 * 320 * 240)
        let wrong = bytes.indices.first { i in
            let (n, y, x) = (i / (320 * 240), i / 320 % 240, i % 320)
            return bytes[i] != UInt8(truncatingIfNeeded: x + y + n)
        }
        #expect(wrong == nil, "first wrong byte at \(wrong ?? -1)")
    }
}
