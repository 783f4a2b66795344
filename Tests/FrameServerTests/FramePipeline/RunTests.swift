import Foundation
import FramePipeline
import FrameServer
import Glibc
import Testing

// `framesrv run`: a described pipeline started as processes, wired, supervised and drained.
@Suite(.serialized) struct RunTests {
    func clip(_ scratch: Scratch, frames: Int = 30) throws -> String {
        try generateClip(MediaInput(file: "in.mp4", rate: "25", frames: frames, ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p"]), scratch)
    }

    /// A produce's sound (audio=NAME) is a stream of the graph: branches start from it, a sink
    /// records it with --audio NAME (a lossless consumer of it), and produce's --wait-for counts
    /// the consumers of both its streams; without audio= it publishes none (-an, said by produce).
    @Test func audioBranchesAreStreamsOfTheGraph() throws {
        let p = try Pipeline(parsing: "produce -i m.mp4 audio=snd ! filter --vf gblur ! sink --record o.mkv --audio snd"
                             + "  snd. ! filter --af volume=2 ! sink --framemd5 a.md5", base: "run1")
        #expect(p.streams.map(\.name) == ["run1-1", "snd", "run1-3", "run1-4"])
        #expect(p.streams.map(\.waitFor) == [1, 2, 1, 1])
        #expect(p.commandLine(0).arguments == ["produce", "-i", "m.mp4", "--out", "run1-1", "--audio-out", "snd", "--wait-for", "3"])
        #expect(p.stages[2].inputs == [2, 1], "the recording sink reads the pictures and the sound")
        #expect(p.streamOrder.contains(1))
        #expect(throws: PipelineError.self) { try Pipeline(parsing: "produce -i m.mp4 audio=snd ! sink --null", base: "r") }
        #expect(throws: PipelineError.self) { try Pipeline(parsing: "produce -i m.mp4 ! sink --record o.mkv --audio nosuch", base: "r") }
        #expect(throws: PipelineError.self) { try Pipeline(parsing: "produce -i m.mp4 -an ! sink --null", base: "r") }
    }

    /// The sound through run: recorded beside blurred pictures, and filtered on its own branch.
    @Test func runCarriesAudioBranches() throws {
        let scratch = try Scratch()
        let movie = scratch.file("movie.mp4")
        let (g, _, gerr) = try shell("ffmpeg -v error -f lavfi -i testsrc2=size=160x120:rate=25 -f lavfi -i sine -t 1 "
                                     + "-c:v libx264 -pix_fmt yuv420p -c:a aac '\(movie)'", scratch)
        try #require(g == 0, "\(gerr)")
        let out = scratch.file("out.mkv"), md5 = scratch.file("a.md5")
        let run = try scratch.run(["run", "--quiet", "produce -i \(movie) audio=snd ! filter --vf gblur ! sink --record \(out) --audio snd"
                                   + "  snd. ! filter --af volume=0.5 ! sink --framemd5 \(md5)"])
        #expect(run.status == 0, "\(run.stderr)")
        let pcm = { (file: String) throws -> String in String(decoding: try shell("ffmpeg -v error -i '\(file)' -map 0:a -c:a pcm_s16le -f md5 -", scratch).stdout, as: UTF8.self) }
        #expect(try pcm(out) == (try pcm(movie)) && !(try pcm(out)).isEmpty, "the recording's sound")
        let (f, expected, ferr) = try shell("ffmpeg -v error -i '\(movie)' -map 0:a -af volume=0.5 -f framemd5 -", scratch)
        try #require(f == 0, "\(ferr)")
        #expect(try String(contentsOfFile: md5, encoding: .utf8) == String(decoding: expected, as: UTF8.self))
    }

    /// The description's graph: stream names, --wait-for from the lossless consumers, sinks started first.
    @Test func descriptionBecomesAGraph() throws {
        let p = try Pipeline(parsing: "produce -i a.mp4 ! tee name=t  t. ! sink --null  t. ! filter --preset gray ! sink --live --null"
                             + "  t. ! exec my_filter --in {in} --out {out} --n {wait-for} ! sink --null", base: "run1")
        #expect(p.streams.map(\.name) == ["t", "run1-2", "run1-3"])
        #expect(p.streams.map(\.waitFor) == [3, 0, 1])
        #expect(p.commandLine(0).arguments == ["produce", "-i", "a.mp4", "--out", "t", "-an", "--wait-for", "3"])
        #expect(p.commandLine(2).arguments == ["filter", "--preset", "gray", "--in", "t", "--out", "run1-2"])
        #expect(p.commandLine(4) == (false, ["my_filter", "--in", "t", "--out", "run1-3", "--n", "1"]))
        #expect(p.startOrder.last == 0 && p.sources == [0])
        // A join: {in:NAME} reads named streams; their --wait-for counts it; it starts before both sources.
        let j = try Pipeline(parsing: "produce -i a.mp4 ! tee name=a  a. ! sink --null  produce -i b.mp4 name=b"
                             + "  exec avg {in:a} --b={in:b} --out {out} ! sink --null", base: "run1")
        #expect(j.streams.map(\.name) == ["a", "b", "run1-3"] && j.streams.map(\.waitFor) == [2, 1, 1])
        #expect(j.stages[3].joins == [0, 1] && j.stages[3].inputs == [0, 1] && j.sources == [0, 2])
        #expect(j.commandLine(3) == (false, ["avg", "a", "--b=b", "--out", "run1-3"]))
        let join = try #require(j.startOrder.firstIndex(of: 3)), sources = try [0, 2].map { try #require(j.startOrder.firstIndex(of: $0)) }
        #expect(sources.allSatisfy { join < $0 }, "the join starts before both its sources: \(j.startOrder)")
        // exec --live reads live: its producer does not wait for it; a queue is a null filter with its own slots.
        let live = try Pipeline(parsing: "produce -i a.mp4 ! tee name=t  t. ! sink --null  t. ! exec --live py --in {in}"
                                + "  t. ! queue size=5 ! sink --null", base: "run1")
        #expect(live.streams.map(\.waitFor) == [2, 1] && live.commandLine(2) == (false, ["py", "--in", "t"]))
        #expect(live.commandLine(3).arguments == ["filter", "--vf", "null", "--slots", "5", "--name", "queue", "--in", "t", "--out", "run1-2", "--wait-for", "1"])
        #expect(try Pipeline(parsing: "produce -i a ! queue ! sink --null", base: "r").commandLine(1).arguments.prefix(5) == ["filter", "--vf", "null", "--slots", "30"])
        // A stream its producer named keeps its name through a tee, which names it too.
        let cam = try Pipeline(parsing: "produce -i a.mp4 name=cam ! tee name=t  t. ! sink --null  t. ! sink --null", base: "run1")
        #expect(cam.streams.map(\.name) == ["cam"] && cam.streams[0].waitFor == 2)
        #expect(live.prefixes == ["produce", "sink.2", "py", "queue", "sink.5"])
        for bad in ["produce -i a ! exec --live", "produce -i a ! exec --live --lossless x {in}", "produce -i a ! queue size=0 ! sink",
                    "produce -i a ! queue 5 ! sink", "produce -i a ! queue size=65 ! sink", "produce -i a ! queue"] {
            #expect(throws: PipelineError.self, "\(bad)") { try Pipeline(parsing: bad, base: "run1") }
        }
        for bad in ["", "sink --null", "produce -i a ! filter --preset gray", "produce -i a ! filter --out x ! sink",
                    "produce -i a ! ! sink", "produce -i a name=x ! sink  x. ! y. ! sink", "bogus ! sink", "produce -i 'a ! sink",
                    "produce -i a name=a  exec j {in:a} {in:c}", "produce -i a name=a  a. ! exec j {in} {in:a}",
                    "exec j {in:a} {out} name=a ! sink --null", "produce -i a name=a ! exec j {in:a}"] {
            #expect(throws: PipelineError.self, "\(bad)") { try Pipeline(parsing: bad, base: "run1") }
        }
    }

    /// produce ! filter ! sink: the sink's framemd5 is ffmpeg's -vf format=gray, from the first frame.
    @Test func linearChainMatchesFFmpeg() throws {
        let scratch = try Scratch()
        let input = try clip(scratch)
        let md5 = scratch.file("gray.md5")
        let r = try scratch.run(["run", "--quiet", "produce -i '\(input)' ! filter --preset gray ! sink --framemd5 '\(md5)'"], timeout: 120)
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        #expect(try String(contentsOfFile: md5, encoding: .utf8) == ffmpegFramemd5(input, after: "-vf format=gray", scratch))
        try expectNothingLeft(scratch, r.stdout)
    }

    /// A fan-out to 3 sinks, described in a file: every sink's framemd5 is ffmpeg's for its branch.
    @Test func fanOutToThreeSinksMatchesFFmpeg() throws {
        let scratch = try Scratch()
        let input = try clip(scratch)
        let file = scratch.file("fan.pipeline")
        try """
        # one source, three branches
        produce -i '\(input)' ! tee name=src
        src. ! sink --framemd5 '\(scratch.file("plain.md5"))'
        src. ! filter --preset gray ! sink --framemd5 '\(scratch.file("gray.md5"))'
        src. ! filter --preset sepia name=old ! sink --framemd5 '\(scratch.file("sepia.md5"))'
        """.write(toFile: file, atomically: true, encoding: .utf8)
        let r = try scratch.run(["run", "--quiet", "-f", file], timeout: 120)
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        let sepia = "colorchannelmixer=.393:.769:.189:0:.349:.686:.168:0:.272:.534:.131"
        for (name, vf) in [("plain", ""), ("gray", "-vf format=gray"), ("sepia", "-vf \(sepia)")] {
            let got = try String(contentsOfFile: scratch.file("\(name).md5"), encoding: .utf8)
            #expect(got == (try ffmpegFramemd5(input, after: vf, scratch)), "branch \(name)")
            #expect(frameLines(got).count == 30, "branch \(name)")
        }
        try expectNothingLeft(scratch, r.stdout)
    }

    /// A filter whose blend image is missing fails at start: run exits with its status and its line.
    @Test func stageFailingAtStartStopsTheRest() throws {
        let scratch = try Scratch()
        let input = try clip(scratch)
        let r = try scratch.run(["run", "--quiet", "produce -i '\(input)' ! filter --preset blend=/nonexistent.png:0.5 ! sink --null"], timeout: 60)
        #expect(r.status == 1, "\(r.stdout)\n\(r.stderr)")
        // The filter's own line, passed through under its name, then run's.
        let lines = r.stderr.split(separator: "\n")
        #expect(lines.count == 2 && lines[0].hasPrefix("filter  | framesrv: error: cannot use '/nonexistent.png'")
                && lines[1].hasPrefix("framesrv: error: stage 2 'filter --preset blend=/nonexistent.png:0.5' failed: cannot use '/nonexistent.png'"),
                "\(r.stderr)")
        try expectNothingLeft(scratch, r.stdout)
    }

    /// A user's program that fails after 10 frames of an endless source: run exits with its status and line.
    @Test func stageFailingMidStreamStopsTheRest() throws {
        let scratch = try Scratch()
        let check = "\"$0\" sink --in \"$1\" --null --frames 10 >/dev/null && echo 'checker: frame 11 is wrong' >&2 && exit 3"
        let r = try scratch.run(["run", "--quiet", "produce -f lavfi -i testsrc2=size=320x240:rate=25 ! filter --preset gray"
                                 + " ! exec sh -c '\(check.replacingOccurrences(of: "'", with: "'\\''"))' '\(framesrvPath)' {in}"], timeout: 60)
        #expect(r.status == 3, "\(r.stdout)\n\(r.stderr)")
        #expect(r.stderr.hasSuffix("failed: checker: frame 11 is wrong\n"), "\(r.stderr)")
        try expectNothingLeft(scratch, r.stdout)
    }

    /// A join: examples/python/average.py reads streams a and b ({in:a} {in:b}); a also
    /// fans out to a sink. The average's framemd5 is ffmpeg's blend=all_mode=average of the
    /// two clips, and a's sink gets every frame too: a's --wait-for counted both readers.
    @Test func joinAveragesTwoStreamsAsFFmpegBlends() throws {
        let scratch = try Scratch()
        let a = try clip(scratch)
        let b = scratch.file("b.mp4")
        let made = try shell("ffmpeg -v error -f lavfi -i smptebars=size=320x240:rate=25 -frames:v 30 -c:v libx264 -pix_fmt yuv420p '\(b)'", scratch)
        #expect(made.0 == 0, "\(made.2)")
        let (avg, plain) = (scratch.file("avg.md5"), scratch.file("plain.md5"))
        let example = repositoryRoot.appendingPathComponent("examples/python/average.py").path
        let r = try scratch.run(["run", "--quiet", "produce -i '\(a)' ! tee name=a  a. ! sink --framemd5 '\(plain)'  produce -i '\(b)' name=b"
                                 + "  exec '\(try ClientTools.python())' '\(example)' {in:a} {in:b} --out {out} --wait-for {wait-for}"
                                 + " ! sink --framemd5 '\(avg)'"], timeout: 120)
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        let (status, want, err) = try shell("ffmpeg -v error -i '\(a)' -i '\(b)' -filter_complex '[0:v][1:v]blend=all_mode=average' -f framemd5 -", scratch)
        #expect(status == 0, "\(err)")
        let got = try String(contentsOfFile: avg, encoding: .utf8)
        #expect(got == String(decoding: want, as: UTF8.self) && frameLines(got).count == 30)
        #expect(try String(contentsOfFile: plain, encoding: .utf8) == ffmpegFramemd5(a, scratch))
        try expectNothingLeft(scratch, r.stdout)
    }

    /// A lossless consumer that exits before reading (0 without attaching, or failing at
    /// start) beside a sink that keeps waiting: its producer waits for both forever, so run
    /// fails with the stage's line instead of hanging.
    @Test func consumerExitingBeforeReadingFailsTheRun() throws {
        let scratch = try Scratch()
        let source = "produce -f lavfi -i testsrc2=size=320x240:rate=25 ! tee name=t  t. ! sink --null  t. ! "
        for (stage, line, passed) in [("exec true {in}", "it exited before reading a frame of stream 't',"
                                                 + " whose producer (stage 1) would wait for its 2 lossless consumers forever", ""),
                              ("sink --framemd5 /nonexistent/x.md5", "cannot write '/nonexistent/x.md5': No such file or directory",
                               "sink.3  | framesrv: error: cannot write '/nonexistent/x.md5': No such file or directory\n")] {
            let r = try scratch.run(["run", "--quiet", source + stage], timeout: 60)
            #expect(r.status == 1, "\(stage): \(r.stderr)")
            #expect(r.stderr == passed + "framesrv: error: stage 3 '\(stage)' failed: \(line)\n", "\(stage)")
            try expectNothingLeft(scratch, r.stdout)
        }
        // Further down a chain, after a filter that already started its own stream.
        let r = try scratch.run(["run", "--quiet", "produce -f lavfi -i testsrc2=size=320x240:rate=25 ! filter --preset gray ! exec true {in}"], timeout: 60)
        #expect(r.status == 1 && r.stderr.hasPrefix("framesrv: error: stage 3 'exec true {in}' failed: it exited before reading"), "\(r.stderr)")
        try expectNothingLeft(scratch, r.stdout)
    }

    /// An exec stage that reads live (exec --live) is no lossless consumer: the producer
    /// waits for the sink alone, publishes, the exec stage gets frames, and run ends.
    @Test func liveExecStageDoesNotHoldBackItsProducer() throws {
        let scratch = try Scratch()
        let input = try clip(scratch, frames: 60)
        let (all, live) = (scratch.file("all.md5"), scratch.file("live.md5"))
        let reader = "exec --live sh -c '\"$0\" sink --in \"$1\" --live --framemd5 \"$2\"' '\(framesrvPath)' {in} '\(live)'"
        // -re: the stream lasts 2.4 s, so the live reader (whom nobody waits for) surely comes while it runs.
        let out = try runSucceeding(scratch, "produce -re -i '\(input)' ! tee name=t  t. ! sink --framemd5 '\(all)'  t. ! " + reader)
        #expect(try String(contentsOfFile: all, encoding: .utf8) == ffmpegFramemd5(input, scratch))
        #expect(frameLines((try? String(contentsOfFile: live, encoding: .utf8)) ?? "").count >= 1, "the live reader got no frame")
        try expectNothingLeft(scratch, out)
    }

    /// Every line an exec stage writes on standard error reaches run's as it comes, after the
    /// stage's name; when it fails, run's error has the traceback's exception line (not its
    /// last line) and the traceback under it.
    @Test func stageErrorsPassThroughPrefixedAndTheTracebackIsReported() throws {
        let scratch = try Scratch()
        let input = try clip(scratch)
        let script = scratch.file("edges.py")
        try """
        import sys, logging, warnings
        print("a print to stderr", file=sys.stderr, flush=True)
        logging.warning("a logging line")
        warnings.warn("a warning")
        def detect(img):
            raise ValueError("the real cause\\n> Overload resolution failed:\\n>  - Expected Ptr<cv::UMat> for argument 'img'")
        detect(None)
        """.write(toFile: script, atomically: true, encoding: .utf8)
        let r = try runExpecting(1, scratch, "produce -i '\(input)' ! exec '\(try ClientTools.python())' '\(script)' {in}")
        let lines = r.stderr.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        for want in ["edges.py | a print to stderr", "edges.py | WARNING:root:a logging line", "edges.py | Traceback (most recent call last):",
                     "edges.py | ValueError: the real cause", "edges.py | >  - Expected Ptr<cv::UMat> for argument 'img'"] {
            #expect(lines.contains(want), "\(want): \(r.stderr)")
        }
        #expect(lines.contains { $0.hasPrefix("edges.py | ") && $0.contains("UserWarning: a warning") }, "\(r.stderr)")
        let failure = try #require(lines.firstIndex { $0.hasPrefix("framesrv: error: ") }, "\(r.stderr)")
        #expect(lines[failure].hasSuffix("failed: ValueError: the real cause; its last lines:"), "\(r.stderr)")
        #expect(lines[failure + 1] == "    Traceback (most recent call last):" && lines.dropLast().last == "    >  - Expected Ptr<cv::UMat> for argument 'img'",
                "\(r.stderr)")
        try expectNothingLeft(scratch, r.stdout)
    }

    /// A stage killed by a signal: run says which, by name, and exits 128 + N as a shell does.
    @Test func stageKilledBySignalIsReportedByName() throws {
        let scratch = try Scratch()
        let r = try runExpecting(139, scratch, "produce -i '\(try clip(scratch))' ! exec sh -c 'kill -SEGV $$' seg {in}")
        #expect(r.stderr.hasSuffix("failed: killed by SIGSEGV\n"), "\(r.stderr)")
        try expectNothingLeft(scratch, r.stdout)
    }

    /// A queue buffers a branch: its frames are the input's, bit-exact, on both branches of a tee.
    @Test func queuePassesFramesBitExactly() throws {
        let scratch = try Scratch()
        let input = try clip(scratch)
        let (q, plain) = (scratch.file("q.md5"), scratch.file("plain.md5"))
        let out = try runSucceeding(scratch, "produce -i '\(input)' ! tee name=t  t. ! queue size=12 ! sink --framemd5 '\(q)'"
                                    + "  t. ! queue ! sink --framemd5 '\(plain)'")
        let want = try ffmpegFramemd5(input, scratch)
        #expect(try String(contentsOfFile: q, encoding: .utf8) == want && String(contentsOfFile: plain, encoding: .utf8) == want)
        try expectNothingLeft(scratch, out)
    }

    /// produce name=cam ! tee name=t: the stream stays 'cam' (t. reads it too).
    @Test func producerNameSurvivesATee() throws {
        let scratch = try Scratch()
        let input = try clip(scratch)
        let md5 = scratch.file("cam.md5")
        let out = try runSucceeding(scratch, "produce -i '\(input)' name=cam ! tee name=t  t. ! sink --framemd5 '\(md5)'  t. ! sink --null")
        #expect(out.contains("produce: cam: published 30 frames"), "\(out)")
        try expectNothingLeft(scratch, out)
    }

    /// Off a terminal, run's status is one timestamped line per interval, each written whole
    /// as it happens (read while run runs), none cut short before the stages' summaries.
    @Test func statusLinesOffATerminalAreTimestampedAndWhole() throws {
        let scratch = try Scratch()
        let run = try scratch.start(["run", "produce -f lavfi -i testsrc2=size=64x48:rate=25 -re name=src ! sink --null"])
        let status = #/^\d\d:\d\d:\d\d src \d+ frames [-0-9.]+ fps/#
        #expect(eventually(timeout: 30) { run.stdout.split(separator: "\n").contains { $0.firstMatch(of: status) != nil } }, "\(run.stdout)")
        #expect(run.isRunning)
        run.signal(SIGINT)
        #expect(run.wait(timeout: 30) == 0, "\(run.stderr)")
        let out = run.stdout
        #expect(out.hasSuffix("\n"))
        for line in out.split(separator: "\n") {
            #expect(line.firstMatch(of: status) != nil || line.hasPrefix("produce: ") || line.hasPrefix("sink: "), "a cut or stray line: \(line)")
        }
        try expectNothingLeft(scratch, out)
    }

    /// SIGINT to run stops the source; the rest drains: both recordings hold every frame published.
    @Test func interruptDrainsIntoCompleteRecordings() throws {
        let scratch = try Scratch()
        let (a, b) = (scratch.file("a.mp4"), scratch.file("b.mp4"))
        let run = try scratch.start(["run", "--quiet", "produce -f lavfi -i testsrc2=size=320x240:rate=25 ! tee name=t"
                                     + "  t. ! sink --record '\(a)'  t. ! filter --preset gray ! sink --record '\(b)'"])
        #expect(eventually(timeout: 60) { [a, b].allSatisfy { (regularFileSize($0) ?? 0) > 10_000 } }, "\(run.stderr)")
        run.signal(SIGINT)
        #expect(run.wait(timeout: 60) == 0, "\(run.stdout)\n\(run.stderr)")
        let published = run.stdout.split(separator: "\n").first { $0.hasPrefix("produce: t: published ") }
            .flatMap { Int($0.split(separator: " ")[3]) }
        #expect(published != nil && published! > 0, "\(run.stdout)")
        for path in [a, b] {
            let (status, out, err) = try shell("ffprobe -v error -count_frames -show_entries stream=nb_read_frames -of csv=p=0 '\(path)'", scratch)
            #expect(status == 0, "\(err)")
            #expect(Int(String(decoding: out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) == published, "\(path)")
        }
        try expectNothingLeft(scratch, run.stdout)
    }

    /// SIGINT while the source still waits for a consumer that never attaches: the source
    /// stops before its first frame, and its consumers are stopped with it instead of
    /// waiting out the drain for a stream that will never publish. run exits 0.
    @Test func interruptBeforeTheFirstFrameStopsTheWaitingConsumers() throws {
        let scratch = try Scratch()
        let run = try startRun(scratch, "produce -f lavfi -i testsrc2=size=320x240:rate=25 ! tee name=t"
                                   + "  t. ! sink --null  t. ! exec sh -c 'sleep 1000' never {in}", until: "t") { $0.consumers.count == 1 }
        run.signal(SIGINT)
        #expect(run.wait(timeout: 20) == 0, "\(run.stdout)\n\(run.stderr)")
        #expect(run.stderr == stoppingLine)
        try expectNothingLeft(scratch, run.stdout)
    }

    /// A second SIGINT forces: a source that ignores SIGINT, and a sink blocked on a pipe
    /// nobody reads (its filter blocked behind it), keep the drain from finishing; the second
    /// kills every stage's process group (the shells' own children too), removes the streams
    /// the killed filter left, and run exits 130.
    @Test func secondInterruptForcesTheEnd() throws {
        let scratch = try Scratch()
        let stuckSource = "exec sh -c 'trap \"\" INT; sleep 1000' src {out} ! sink --null"
        let stuckSink = "exec sh -c '\"$0\" sink --in \"$1\" --framemd5 /dev/stdout | sleep 1000' '\(framesrvPath)' {in}"
        let run = try startRun(scratch, stuckSource + "  produce -f lavfi -i testsrc2=size=320x240:rate=25"
                                   + " ! filter --preset gray name=gray ! " + stuckSink, until: "gray") { $0.published > 0 }
        run.signal(SIGINT)
        #expect(eventually { run.stderr == stoppingLine }, "\(run.stderr)")
        #expect(run.isRunning && FileManager.default.fileExists(atPath: scratch.path + "/gray.ctl"))
        run.signal(SIGINT)
        #expect(run.wait(timeout: 20) == 130, "\(run.stdout)\n\(run.stderr)")
        #expect(run.stderr == stoppingLine)
        try expectNothingLeft(scratch, run.stdout)
    }

    /// `framesrv run --quiet DESCRIPTION`, expected to exit 0; its standard output.
    func runSucceeding(_ scratch: Scratch, _ description: String) throws -> String {
        try runExpecting(0, scratch, description).stdout
    }

    /// `framesrv run --quiet DESCRIPTION`, expected to exit `status`.
    func runExpecting(_ status: Int32, _ scratch: Scratch, _ description: String) throws -> (stdout: String, stderr: String) {
        let r = try scratch.run(["run", "--quiet", description], timeout: 120)
        #expect(r.status == status, "\(r.stdout)\n\(r.stderr)")
        return (r.stdout, r.stderr)
    }

    /// run's line at the first SIGINT.
    let stoppingLine = "framesrv: stopping sources; Ctrl-C again to force\n"

    /// `framesrv run --quiet DESCRIPTION`, once stream `name` is `ready`.
    func startRun(_ scratch: Scratch, _ description: String, until name: String,
                  _ ready: @escaping (StreamSnapshot) -> Bool) throws -> Spawned {
        let run = try scratch.start(["run", "--quiet", description])
        let dir = try RuntimeDirectory(path: scratch.path)
        #expect(eventually(timeout: 60) { (try? StreamSnapshot.read(name, in: dir)).map(ready) == true }, "\(run.stderr)")
        return run
    }

    /// A sink that is done (--frames 10) stops the filter and the endless source above it.
    @Test func finishedConsumersStopTheirProducers() throws {
        let scratch = try Scratch()
        let r = try scratch.run(["run", "--quiet", "produce -f lavfi -i testsrc2=size=320x240:rate=25"
                                 + " ! filter --preset gray ! sink --null --frames 10"], timeout: 60)
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        #expect(r.stdout.contains("received 10 frames (first 1, last 10)"), "\(r.stdout)")
        try expectNothingLeft(scratch, r.stdout)
    }

    /// The supervision is the library's: PipelineRun started and polled in this process runs
    /// a chain to its end, and reports a failing stage's status and line.
    @Test func pipelineRunSupervisesInProcess() throws {
        let scratch = try Scratch()
        let dir = try RuntimeDirectory(path: scratch.path)
        func outcome(_ text: String) throws -> PipelineRun.Outcome {
            let run = try PipelineRun(try Pipeline(parsing: text, base: "lib"), directory: dir, framesrv: framesrvPath)
            while run.poll(interrupts: 0) { usleep(50_000) }
            return run.finish()
        }
        let done = try outcome("produce -f lavfi -i testsrc2=size=64x48:rate=25 ! filter --preset gray ! sink --null --frames 5")
        #expect(done.status == 0 && done.error == nil, "\(done)")
        let failed = try outcome("produce -f lavfi -i testsrc2=size=64x48:rate=25 ! tee name=t  t. ! sink --null"
                                 + "  t. ! exec sh -c 'echo \"checker: no\" >&2; exit 4' {in}")
        #expect(failed.status == 4 && failed.error == "stage 3 'exec sh -c echo \"checker: no\" >&2; exit 4 {in}' failed: checker: no", "\(failed)")
        try expectNothingLeft(scratch, "")
    }

    /// Bad descriptions: one line, exit status 2, nothing started.
    @Test func badDescriptionsAreUsageErrors() throws {
        let scratch = try Scratch()
        for bad in [["produce -i x.mp4 ! filter --preset gray"], ["produce -i x.mp4 ! sink --in y"], ["t. ! sink --null"], [], ["-f", "/nonexistent"]] {
            let r = try scratch.run(["run"] + bad)
            #expect(r.status == 2, "\(bad): \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.hasPrefix("framesrv: error: "), "\(bad): \(r.stderr)")
        }
    }

    /// run --help says the per-user inotify limit that bounds the stages waiting at once
    /// (issue 26 item 10), with its value on this machine, and the 63 lossless consumers of a stream.
    @Test func helpSaysTheLimitsOnStages() throws {
        let help = try Scratch().run(["run", "--help"]).stdout
        let limit = try String(contentsOfFile: "/proc/sys/fs/inotify/max_user_instances", encoding: .utf8).filter(\.isNumber)
        #expect(help.contains("fs.inotify.max_user_instances") && help.contains("(\(limit) here,"), "\(help)")
        #expect(help.contains("63 lossless consumers at most"), "\(help)")
    }

    /// No stage of the run still running, and no file of its streams (but the lock files, see issue 12's install part).
    func expectNothingLeft(_ scratch: Scratch, _ output: String) throws {
        let streams = try FileManager.default.contentsOfDirectory(atPath: scratch.path)
            .filter { !$0.hasSuffix(".lock") && !$0.hasPrefix(".") && !$0.hasSuffix(".mp4") && !$0.hasSuffix(".md5") && !$0.hasSuffix(".pipeline") && !$0.hasSuffix(".py")
                      && !$0.hasSuffix(".out") && !$0.hasSuffix(".err") && !$0.hasSuffix(".log") }
        #expect(streams == [], "stream files left: \(streams)")
        let children = processesLeft(scratch)
        #expect(children == [], "processes left: \(children)")
    }

    /// Every live process (not a zombie) with FRAMESRV_DIR set to the scratch directory, as
    /// "PID COMMAND LINE": what a run started there (its stages inherit it, and so do their children).
    func processesLeft(_ scratch: Scratch) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return names.filter { name in
            guard Int(name) != nil, let env = FileManager.default.contents(atPath: "/proc/\(name)/environ") else { return false }
            return String(decoding: env, as: UTF8.self).split(separator: "\0").contains { $0.hasPrefix("FRAMESRV_DIR=\(scratch.path)") }
                && (try? String(contentsOfFile: "/proc/\(name)/stat", encoding: .utf8))?.contains(") Z ") != true
        }.map { name in
            let line = FileManager.default.contents(atPath: "/proc/\(name)/cmdline").map { String(decoding: $0, as: UTF8.self) } ?? ""
            return name + " " + line.split(separator: "\0").joined(separator: " ")
        }
    }
}
