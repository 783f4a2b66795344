import Foundation
import FrameServer
import Glibc
import Testing

/// `framesrv filter`: libavfilter graphs between streams, real processes end to end, with
/// `ffmpeg -vf GRAPH -f framemd5 -` on the same input as the oracle for every frame.
@Suite(.serialized) struct FilterTests {
    func clip(_ file: String, frames: Int, _ scratch: Scratch, size: String = "320x240", extra: [String] = []) throws -> String {
        try generateClip(MediaInput(file: file, rate: "25", frames: frames,
                                            ffmpegArgs: ["-vf", "scale=\(size)", "-c:v", "libx264", "-pix_fmt", "yuv420p"] + extra), scratch)
    }

    /// What `ffmpeg -i PATH -vf GRAPH -f framemd5 -` writes.
    func ffmpeg(_ path: String, vf graph: String, _ scratch: Scratch) throws -> String {
        let quoted = "'" + graph.replacingOccurrences(of: "'", with: "'\\''") + "'"
        let (status, out, err) = try shell("ffmpeg -v error -i '\(path)' -map 0:v:0 -vf \(quoted) -f framemd5 -", scratch)
        guard status == 0 else { throw TestFailure("ffmpeg -vf \(graph) failed on \(path): \(err)") }
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `part` is `whole` with some lines left out (same order).
    func isOrderedSubset(_ part: [Substring], of whole: [Substring]) -> Bool {
        var i = whole.startIndex
        for line in part {
            guard let j = whole[i...].firstIndex(of: line) else { return false }
            i = j + 1
        }
        return true
    }

    /// produce -> filter -> ... -> sink --framemd5, every stage a process; returns the sink's
    /// output and the filter processes (all of them have exited 0).
    func chain(_ path: String, _ filters: [[String]], _ scratch: Scratch, producerArgs: [String] = [],
               sinkArgs: [String] = ["--framemd5", "-"], timeout: Double = 120) throws -> (md5: String, filters: [Spawned]) {
        let producer = try scratch.start(["produce", "-i", path, "--out", "s0", "--wait-for", "1", "--quiet"] + producerArgs)
        var procs: [Spawned] = []
        for (i, args) in filters.enumerated() {
            procs.append(try scratch.start(["filter", "--in", "s\(i)", "--out", "s\(i + 1)", "--wait-for", "1"] + args))
        }
        let sink = try scratch.start(["sink", "--in", "s\(filters.count)", "--quiet"] + sinkArgs)
        #expect(sink.wait(timeout: timeout) == 0, "sink: \(sink.stderr)")
        for p in procs { #expect(p.wait(timeout: 30) == 0, "filter: \(p.stderr)") }
        #expect(producer.wait(timeout: 30) == 0, "producer: \(producer.stderr)")
        return (sink.stdout, procs)
    }

    /// Four processes: produce -> filter gblur (two filter threads) -> filter format=rgb24 ->
    /// sink, byte for byte what one ffmpeg with both filters writes; frames go into each graph
    /// without a copy.
    @Test func twoFiltersInAChainMatchFFmpeg() throws {
        let scratch = try Scratch()
        let path = try clip("in.mp4", frames: 30, scratch)
        let expected = try ffmpeg(path, vf: "gblur=sigma=4,format=rgb24", scratch)
        #expect(frameLines(expected).count == 30)
        let (md5, filters) = try chain(path, [["--vf", "gblur=sigma=4", "--threads", "2"], ["--vf", "format=rgb24"]], scratch)
        #expect(md5 == expected, "the chain's framemd5 differs from ffmpeg's -vf gblur=sigma=4,format=rgb24")
        #expect(filters[0].stdout.contains("30 frames in (30 in place, 0 copied), published 30 frames of 320x240 yuv420p"),
                "\(filters[0].stdout)")
        #expect(filters[1].stdout.contains("30 frames in (30 in place, 0 copied), published 30 frames of 320x240 rgb24"),
                "\(filters[1].stdout)")
    }

    /// Rates that do not fit 1/1000 fps go through a filter exactly: the graph's source gets
    /// the stream's rate, the output's is the buffersink's, and framemd5's `#tb` is ffmpeg's.
    @Test(arguments: exactRateInputs) func exactRatesThroughANullFilter(_ input: MediaInput) throws {
        let scratch = try Scratch()
        let path = try generateClip(input, scratch)
        let expected = try ffmpeg(path, vf: "null", scratch)
        #expect(frameLines(expected).count == input.frames)
        let (md5, _) = try chain(path, [["--vf", "null"]], scratch)
        #expect(md5 == expected, "framemd5 through filter -vf null differs from ffmpeg's for \(input.file)")
    }

    /// A bottom-field-first H.264 clip (left-sited chroma): field order and chroma location go
    /// produce -> filter -> sink in the frame headers, so the y4m header is ffmpeg's (`Ib`,
    /// `C420mpeg2`), and so are the frames.
    @Test func fieldOrderAndChromaSurviveAChain() throws {
        let scratch = try Scratch()
        let path = try clip("bff.mp4", frames: 10, scratch, extra: ["-flags", "+ildct+ilme", "-x264opts", "bff=1"])
        let theirs = scratch.file("ffmpeg.y4m"), ours = scratch.file("ours.y4m")
        let (status, _, err) = try shell("ffmpeg -v error -i '\(path)' -vf null -f yuv4mpegpipe '\(theirs)'", scratch)
        #expect(status == 0, "\(err)")
        _ = try chain(path, [["--vf", "null"]], scratch, sinkArgs: ["--y4m", ours])
        let line = try y4mHeader(ours)
        #expect(line.contains(" Ib ") && line.contains(" C420mpeg2 XYSCSS=420MPEG2"), "\(line)")
        #expect(line == (try y4mHeader(theirs)))
        #expect(try ffmpegFramemd5(ours, scratch) == (try ffmpegFramemd5(theirs, scratch)))
    }

    /// yadif on a bottom-field-first clip (and a top-field-first one, where a frame without
    /// its field order would be deinterlaced with the wrong parity): the graph sees each
    /// frame's field order, as ffmpeg's does, so every frame equals ffmpeg's `-vf yadif`;
    /// its output is progressive.
    @Test(arguments: ["bff", "tff"]) func yadifOnBottomFieldFirstMatchesFFmpeg(_ order: String) throws {
        let scratch = try Scratch()
        let path = try clip("\(order).mp4", frames: 10, scratch, extra: ["-flags", "+ildct+ilme", "-x264opts", "\(order)=1"])
        let expected = try ffmpeg(path, vf: "yadif", scratch)
        #expect(frameLines(expected).count == 10)
        let (md5, _) = try chain(path, [["--vf", "yadif"]], scratch)
        #expect(md5 == expected, "filter --vf yadif differs from ffmpeg's on a bottom-field-first clip")
        let y4m = scratch.file("yadif.y4m")
        _ = try chain(path, [["--vf", "yadif"]], scratch, sinkArgs: ["--y4m", y4m])
        let head = try y4mHeader(y4m)
        #expect(head.contains(" Ip "), "\(head)")
    }

    /// A graph that holds frames (tmix keeps the last three, reverse all of them) on an input
    /// with one slot: a frame libavfilter kept in place would take the producer's only slot
    /// and the chain would stop, so every frame is copied; ffmpeg's frames, and the end.
    @Test(arguments: ["tmix=frames=3", "reverse"])
    func oneSlotInputCopiesAndEnds(_ graph: String) throws {
        let scratch = try Scratch()
        let path = try clip("in.mp4", frames: 20, scratch)
        let expected = try ffmpeg(path, vf: graph, scratch)
        #expect(frameLines(expected).count == 20)
        let (md5, filters) = try chain(path, [["--vf", graph]], scratch, producerArgs: ["--slots", "1"], timeout: 40)
        #expect(md5 == expected, "\(graph) on a one-slot input differs from ffmpeg's")
        #expect(filters[0].stdout.contains("20 frames in (0 in place, 20 copied), published 20 frames"), "\(filters[0].stdout)")
    }

    /// Where a graph's output ends, as ffmpeg's does. A graph whose output ends before its
    /// input (trim with an end) ends there: exactly ffmpeg's frames, not the graph run again
    /// on the rest of the stream. The end of the input closes the graph at the end of the
    /// last frame (its pts plus its duration): fps=30000/1001 on 2 s at 25 fps makes ffmpeg's
    /// 60 frames (closing at the last frame's pts would make 59).
    @Test(arguments: [("trim=start_frame=10:end_frame=30", 20), ("fps=30000/1001", 60)])
    func outputEndsWhereFFmpegsDoes(_ graph: String, frames: Int) throws {
        let scratch = try Scratch()
        let path = try clip("in.mp4", frames: 50, scratch)
        let expected = try ffmpeg(path, vf: graph, scratch)
        #expect(frameLines(expected).count == frames)
        let (md5, filters) = try chain(path, [["--vf", graph]], scratch)
        #expect(md5 == expected, "the chain's framemd5 differs from ffmpeg's -vf \(graph)")
        #expect(filters[0].stdout.contains("published \(frames) frames"), "\(filters[0].stdout)")
    }

    /// The input's producer SIGKILLed mid-stream and started again: the filter flushes the
    /// old run's graph into B (a prefix of ffmpeg's frames), and the new run, whose
    /// timestamps start again, goes through a new graph: all of ffmpeg's frames, the first
    /// one marked as a discontinuity, with no frame dropped for going back in time.
    @Test func producerRestartFlushesTheGraphAndANewOneTakesTheNewRun() throws {
        let scratch = try Scratch()
        let path = try clip("re.mp4", frames: 100, scratch, size: "160x120")
        let (status, raw, err) = try shell("ffmpeg -v error -i '\(path)' -map 0:v:0 -vf fps=10 -f rawvideo -pix_fmt yuv420p -", scratch)
        #expect(status == 0, "\(err)")
        let frameBytes = 160 * 120 * 3 / 2
        let clean = (0..<raw.count / frameBytes).map { raw.subdata(in: $0 * frameBytes..<($0 + 1) * frameBytes) }
        #expect(clean.count == 40)

        let first = try scratch.start(["produce", "-i", path, "--out", "a", "-re", "--wait-for", "1", "--quiet"])
        let filter = try scratch.start(["filter", "--in", "a", "--out", "b", "--vf", "fps=10", "--wait-for", "1", "--quiet"])
        // B's frames, read here: packed planes, pts, flags.
        struct Got { var bytes: Data; var pts: Int64?; var flags: FrameFlags }
        final class Box: @unchecked Sendable {
            let lock = NSLock()
            var frames: [Got] = []
            var error: String?
            var count: Int { lock.withLock { frames.count } }
        }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let directory = scratch.directory
        Thread {
            defer { done.signal() }
            do {
                let consumer = try Consumer(stream: "b", options: ConsumerOptions(mode: .lossless), directory: directory)
                while let frame = try consumer.next() {
                    let h = frame.header
                    var bytes = Data()
                    if let format = h.format {
                        for i in format.pixelFormat.planes.indices {
                            let plane = frame.plane(i)
                            for y in 0..<format.rows(plane: i) {
                                bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: plane[(y * h.stride(plane: i))...].prefix(format.rowBytes(plane: i))))
                            }
                        }
                    }
                    box.lock.withLock { box.frames.append(Got(bytes: bytes, pts: h.description.pts, flags: h.flags)) }
                }
            } catch {
                box.lock.withLock { box.error = "\(error)" }
            }
        }.start()
        // Killed a third of the way through (it keeps publishing at the clip's pace meanwhile).
        #expect(eventually(timeout: 20) { box.count >= 12 })
        let beforeKill = box.count
        first.kill()
        #expect(eventually(timeout: 10) { filter.stderr.contains("exited without ending the stream") })
        let second = try scratch.start(["produce", "-i", path, "--out", "a", "-re", "--wait-for", "1", "--quiet"])
        #expect(second.wait(timeout: 60) == 0, "\(second.stderr)")
        #expect(filter.wait(timeout: 30) == 0, "\(filter.stderr)")
        #expect(done.wait(timeout: .now() + 30) == .success)
        let frames = box.lock.withLock { box.frames }
        #expect(box.lock.withLock { box.error } == nil)

        // Whatever marks the runs: after the kill, B gets at least 80% of a clean run's frames
        // (the old graph, kept, dropped the new run's frames until its timestamps caught up).
        #expect(frames.count - beforeKill >= clean.count * 8 / 10, "\(frames.count - beforeKill) frames after the kill")
        let marks = frames.indices.filter { frames[$0].flags.contains(.discontinuity) }
        #expect(marks.count == 1, "one discontinuity, at the new run's first frame: \(marks)")
        let split = marks.first ?? frames.count
        let run1 = frames[..<split], run2 = frames[split...]
        #expect(run1.count >= 12 && run1.count < clean.count, "\(run1.count) frames of the first run")
        #expect(zip(run1, clean).allSatisfy { $0.bytes == $1 }, "the first run's frames are ffmpeg's first ones")
        #expect(run2.count >= clean.count * 8 / 10, "the second run made \(run2.count) of \(clean.count) frames")
        #expect(run2.map(\.bytes) == clean, "the second run's frames are all of ffmpeg's")
        #expect(run2.first?.pts == 0, "the new graph starts at the new run's timestamps")
        #expect(zip(run1, run1.dropFirst()).allSatisfy { ($0.pts ?? 0) < ($1.pts ?? 0) }
                && zip(run2, run2.dropFirst()).allSatisfy { ($0.pts ?? 0) < ($1.pts ?? 0) }, "timestamps go back only at the mark")
    }

    struct PresetCase: CustomTestStringConvertible, Sendable {
        let preset: String
        /// The graph ffmpeg runs (IMAGE: the scratch directory's image).
        let ffmpeg: String
        var testDescription: String { preset }
    }

    static let presets: [PresetCase] = [
        PresetCase(preset: "gray", ffmpeg: "format=gray"),
        PresetCase(preset: "sepia", ffmpeg: "colorchannelmixer=.393:.769:.189:0:.349:.686:.168:0:.272:.534:.131"),
        PresetCase(preset: "blur=2.5", ffmpeg: "gblur=sigma=2.5"),
        PresetCase(preset: "rgb", ffmpeg: "format=rgb24"),
        PresetCase(preset: "blend=IMAGE:0.4", ffmpeg: "movie=IMAGE,format=rgba,colorchannelmixer=aa=0.4[logo];[in][logo]overlay"),
    ]

    /// Each preset gives what ffmpeg gives with the graph the preset stands for.
    @Test(arguments: presets) func presetMatchesFFmpeg(_ c: PresetCase) throws {
        let scratch = try Scratch()
        let path = try clip("in.mp4", frames: 12, scratch)
        let image = scratch.file("logo.png")
        let (g, _, gerr) = try shell("ffmpeg -v error -y -f lavfi -i testsrc=size=96x64 -frames:v 1 '\(image)'", scratch)
        #expect(g == 0, "\(gerr)")
        let expected = try ffmpeg(path, vf: c.ffmpeg.replacingOccurrences(of: "IMAGE", with: image), scratch)
        #expect(frameLines(expected).count == 12)
        let (md5, _) = try chain(path, [["--preset", c.preset.replacingOccurrences(of: "IMAGE", with: image)]], scratch)
        #expect(md5 == expected, "--preset \(c.preset) differs from ffmpeg's -vf \(c.ffmpeg)")
    }

    /// The rgb preset converts with the stream's own matrix and range (BT.709 here): ffmpeg's
    /// bytes, which differ from a BT.601 conversion of the same frames.
    @Test func rgbPresetUsesTheStreamsMatrix() throws {
        let scratch = try Scratch()
        let path = try clip("bt709.mp4", frames: 6, scratch, extra: ["-colorspace", "bt709", "-color_range", "tv"])
        let expected = try ffmpeg(path, vf: "format=rgb24", scratch)
        let bt601 = try ffmpeg(path, vf: "scale=in_color_matrix=bt601,format=rgb24", scratch)
        #expect(frameLines(expected) != frameLines(bt601), "the clip must tell BT.709 from BT.601")
        let (md5, _) = try chain(path, [["--preset", "rgb"]], scratch)
        #expect(md5 == expected)
    }

    /// One filter output, two sinks: the lossless one gets every frame, identical to ffmpeg's;
    /// the live one (slow on purpose) a strictly increasing subset of the same frames.
    @Test func fanOutToALiveAndALosslessSink() throws {
        let scratch = try Scratch()
        let path = try clip("in.mp4", frames: 40, scratch)
        let expected = try ffmpeg(path, vf: "gblur=sigma=3", scratch)
        let producer = try scratch.start(["produce", "-i", path, "--out", "a", "--wait-for", "1", "--quiet"])
        let filter = try scratch.start(["filter", "--in", "a", "--out", "b", "--vf", "gblur=sigma=3", "--wait-for", "1"])
        let liveLog = scratch.file("live.log")
        let live = try scratch.start(["sink", "--in", "b", "--live", "--framemd5", "-", "--hold-us", "20000",
                                      "--seq-log", liveLog, "--quiet"])
        // The live sink is attached before the lossless one lets the filter publish.
        #expect(eventually { scratch.snapshot("b")?.consumers.contains { $0.mode == "live" } ?? false })
        let lossless = try scratch.start(["sink", "--in", "b", "--lossless", "--framemd5", "-", "--quiet"])
        #expect(lossless.wait(timeout: 60) == 0, "\(lossless.stderr)")
        #expect(live.wait(timeout: 60) == 0, "\(live.stderr)")
        #expect(filter.wait(timeout: 30) == 0, "\(filter.stderr)")
        #expect(producer.wait(timeout: 30) == 0, "\(producer.stderr)")
        #expect(lossless.stdout == expected)
        let seqs = readSeqLog(liveLog).attachments.flatMap { $0 }
        #expect(!seqs.isEmpty)
        #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }, "live sequence numbers must increase: \(seqs)")
        #expect(seqs.allSatisfy { (1...40).contains($0) })
        let liveLines = frameLines(live.stdout)
        #expect(liveLines.count == seqs.count)
        #expect(isOrderedSubset(liveLines, of: frameLines(expected)), "live frames must be ffmpeg's frames, in order")
    }

    /// A filter SIGKILLed mid-stream: its slots on the input go back to the producer, the
    /// downstream sink sees its producer gone and waits, and a restarted filter resumes the
    /// chain: the sink re-attaches, gets more frames (each one ffmpeg's) and ends with the input.
    @Test func killedFilterIsReclaimedAndARestartResumes() throws {
        let scratch = try Scratch()
        let path = try clip("long.mp4", frames: 200, scratch, size: "160x120")
        let expected = frameLines(try ffmpeg(path, vf: "gblur=sigma=2", scratch))
        #expect(expected.count == 200)
        // A lossless pacer keeps the input going at its pace (and waiting) while the filter is down.
        let producer = try scratch.start(["produce", "-i", path, "--out", "a", "--wait-for", "2", "--slots", "6", "--quiet"])
        let pacer = try scratch.start(["sink", "--in", "a", "--null", "--hold-us", "15000", "--quiet"])
        let filterArgs = ["filter", "--in", "a", "--out", "b", "--vf", "gblur=sigma=2", "--wait-for", "1", "--quiet"]
        let first = try scratch.start(filterArgs)
        let log = scratch.file("down.log")
        let down = try scratch.start(["sink", "--in", "b", "--framemd5", "-", "--seq-log", log, "--quiet"])
        #expect(eventually { (readSeqLog(log).attachments.first?.count ?? 0) >= 10 })
        let entry = try #require(scratch.snapshot("a")?.consumers.first { $0.pid == first.pid })
        #expect(entry.name == "filter gblur=sigma=2 -> b" && entry.mode == "lossless", "named by its role")
        first.kill()

        // The producer reclaims the dead filter's entry and every slot it held...
        #expect(eventually(timeout: 10) {
            guard let s = scratch.snapshot("a") else { return false }
            return !s.consumers.contains { $0.pid == first.pid } && !s.slotTable.contains { $0.holders.contains(entry.index) }
        })
        let (status, json, _) = try scratch.run(["inspect", "a", "--json"])
        #expect(status == 0)
        let inspected = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        let consumers = try #require(inspected["consumers"] as? [[String: Any]])
        #expect(!consumers.contains { $0["pid"] as? Int == Int(first.pid) })
        let slots = try #require(inspected["slotTable"] as? [[String: Any]])
        #expect(!slots.contains { ($0["holders"] as? [Int])?.contains(entry.index) ?? false })
        #expect((inspected["reclaimedConsumers"] as? Int ?? 0) >= 1)
        // ... and the downstream sink sees its producer gone, and waits.
        #expect(eventually(timeout: 10) { procFile(log).contains("gone \(first.pid)") })
        #expect(down.isRunning)

        let second = try scratch.start(filterArgs)
        #expect(down.wait(timeout: 120) == 0, "\(down.stderr)")
        #expect(second.wait(timeout: 30) == 0, "\(second.stderr)")
        #expect(producer.wait(timeout: 30) == 0 && pacer.wait(timeout: 30) == 0)
        let runs = readSeqLog(log).attachments
        #expect(runs.count == 2, "one attachment per filter run: \(runs.map(\.count))")
        #expect((runs.last?.count ?? 0) > 0, "the restarted filter's frames reach the sink")
        let got = frameLines(down.stdout)
        #expect(got.count == runs.reduce(0) { $0 + $1.count })
        #expect(isOrderedSubset(got, of: expected), "every frame through either filter is ffmpeg's, in order")
        #expect(got.last == expected.last, "the chain ends with the input's last frame")
    }

    /// A size change in the input mid-stream (a small clip, then a larger one) goes through
    /// the filter: the graph is rebuilt, the output stream grows into a new epoch, and the
    /// sink gets ffmpeg's frames of each part without restarting.
    @Test func sizeChangeGoesThroughTheFilter() throws {
        let scratch = try Scratch()
        let (part1, part2, joined) = try sizeChangeClip("176x144", "320x240", scratch)
        let expected1 = sizeAndHash(try ffmpeg(part1, vf: "gblur=sigma=2", scratch))
        let expected2 = sizeAndHash(try ffmpeg(part2, vf: "gblur=sigma=2", scratch))
        #expect(expected1.count == 12 && expected2.count == 10)
        let (md5, filters) = try chain(joined, [["--vf", "gblur=sigma=2"]], scratch)
        let got = sizeAndHash(md5)
        #expect(got.count == 22, "\(md5)")
        #expect(Array(got.prefix(12)) == expected1, "the frames before the change differ from ffmpeg's of part 1")
        #expect(Array(got.dropFirst(12)) == expected2, "the frames after the change differ from ffmpeg's of part 2")
        #expect(filters[0].stdout.contains("published 22 frames of 176x144 yuv420p, then 320x240 yuv420p"), "\(filters[0].stdout)")
    }

    /// SIGINT or SIGTERM: the filter flushes its graph, ends its output stream (whose sink
    /// then ends too, with every frame published) and exits 0. With --live on the input the
    /// output stream is a live source.
    @Test(arguments: [(SIGINT, "--lossless"), (SIGTERM, "--live")])
    func signalEndsTheOutputStream(_ signal: Int32, _ mode: String) throws {
        let scratch = try Scratch()
        // (A live consumer is not one --wait-for counts: the live filter's producer just runs.)
        let producer = try scratch.start(["produce", "--pattern", "--size", "160x120", "--rate", "100", "--out", "a",
                                          "--wait-for", mode == "--live" ? "0" : "1", "--quiet"])
        let filter = try scratch.start(["filter", "--in", "a", "--out", "b", "--vf", "hflip", mode, "--wait-for", "1"])
        let log = scratch.file("sink.log")
        let sink = try scratch.start(["sink", "--in", "b", "--null", "--stats-json", "--seq-log", log, "--quiet"])
        #expect(eventually { (readSeqLog(log).attachments.first?.count ?? 0) >= 10 })
        #expect(scratch.snapshot("b")?.liveSource == (mode == "--live"))
        filter.signal(signal)
        #expect(filter.wait(timeout: 20) == 0, "\(filter.stderr)")
        #expect(sink.wait(timeout: 20) == 0, "the output stream must end: \(sink.stderr)")
        let stats = try #require(SinkStats.parse(sink.stdout))
        #expect(filter.stdout.contains("published \(stats.received) frames of 160x120 yuv420p"), "\(filter.stdout) vs \(stats.received)")
        producer.signal(SIGINT)
        #expect(producer.wait(timeout: 20) == 0)
    }

    /// Mistakes: one "framesrv: error:" line each, exit status 2 (usage) or 1 (at run time),
    /// nothing crashes and no stream is created.
    @Test(arguments: [
        (["--vf", "nosuchfilter"], 2, "No such filter: 'nosuchfilter'"),
        (["--vf", "gblur=nosuchoption=3"], 2, "Option 'nosuchoption' not found"),
        (["--vf", "[in]gblur[x"], 2, "bad filter graph"),
        (["--vf", "split"], 2, "one video input and make one video output"),
        (["--vf", "anull"], 2, "its input is not video"),
        (["--vf", "nullsink"], 2, "0 unconnected outputs"),
        (["--vf", "testsrc"], 2, "0 unconnected inputs"),
        (["--vf", ""], 2, "needs a filter graph"),
        (["--preset", "nosuch"], 2, "unknown preset 'nosuch'"),
        (["--preset", "blur"], 2, "blur=SIGMA"),
        (["--preset", "blur=x"], 2, "blur=SIGMA"),
        (["--preset", "gray=3"], 2, "takes no argument"),
        (["--preset", "blend=logo.png"], 2, "blend=IMAGE:OPACITY"),
        (["--preset", "blend=logo.png:1.5"], 2, "blend=IMAGE:OPACITY"),
        (["--preset", "gray", "--vf", "hflip"], 2, "--vf GRAPH or --preset NAME"),
        ([], 2, "--vf GRAPH or --preset NAME"),
        (["--preset", "gray", "--live", "--lossless"], 2, "choose one of --live and --lossless"),
    ])
    func mistakesAreOneErrorLine(_ args: [String], _ expectedStatus: Int32, _ expected: String) throws {
        let scratch = try Scratch()
        let r = try scratch.run(["filter", "--in", "a", "--out", "b", "--wait", "0"] + args, timeout: 20)
        #expect(r.status == expectedStatus, "\(args): \(r.stderr)")
        #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.hasPrefix("framesrv: error: ") && r.stderr.contains(expected),
                "\(args): \(r.stderr)")
        #expect(scratch.snapshot("b") == nil)
    }

    /// A blend image that is missing, unreadable or not an image: exit status 1, one line
    /// naming it, before the filter touches any stream.
    @Test func badBlendImagesAreOneErrorLine() throws {
        let scratch = try Scratch()
        let junk = scratch.file("junk.png")
        try Data("not an image\n".utf8).write(to: URL(fileURLWithPath: junk))
        let locked = scratch.file("locked.png")
        let (g, _, gerr) = try shell("ffmpeg -v error -y -f lavfi -i testsrc=size=32x32 -frames:v 1 '\(locked)' && chmod 000 '\(locked)'", scratch)
        #expect(g == 0, "\(gerr)")
        var cases = [(scratch.file("missing.png"), "No such file or directory"), (junk, "no picture decodes from it")]
        if getuid() != 0 { cases.append((locked, "Permission denied")) }   // root reads anything
        for (image, why) in cases {
            let r = try scratch.run(["filter", "--in", "a", "--out", "b", "--preset", "blend=\(image):0.5", "--wait", "0"], timeout: 20)
            #expect(r.status == 1, "\(image): \(r.stderr)")
            #expect(r.stderr == "framesrv: error: cannot use '\(image)' as the blend image: \(why)\n")
        }
    }

    /// A graph that cannot take the stream's frames (a crop larger than the picture) fails
    /// when the first frame configures it: one line, exit status 1; the input goes on.
    @Test func graphThatCannotTakeTheFramesIsARuntimeError() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--size", "160x120", "--frames", "20", "--rate", "max",
                                          "--out", "a", "--wait-for", "1", "--quiet"])
        let r = try scratch.run(["filter", "--in", "a", "--out", "b", "--vf", "crop=400:300"], timeout: 30)
        #expect(r.status == 1)
        #expect(r.stderr.split(separator: "\n").count == 1, "\(r.stderr)")
        #expect(r.stderr.hasPrefix("framesrv: error: the filter graph 'crop=400:300' cannot filter 160x120 yuv420p frames: "), "\(r.stderr)")
        #expect(producer.wait(timeout: 30) == 0, "the input's producer goes on without the filter: \(producer.stderr)")
    }

    /// What the filter builds on, in one process: a `SharedFrame` (`Frame.share()`) counts as
    /// held (and toward a live consumer's hold limit) until its last reference goes; dropped
    /// on another thread, its slot is back with the producer at once, before any `next()`.
    @Test func sharedFramesAreReleasedOnceFromAnyThread() throws {
        let scratch = try Scratch()
        var po = ProducerOptions()
        po.slots = 4
        let producer = try Producer(stream: "s", options: po, directory: scratch.directory)
        defer { producer.close() }
        let consumer = try Consumer(stream: "s", options: ConsumerOptions(mode: .live), directory: scratch.directory)
        try consumer.attach()
        let format = FrameFormat(.gray8, width: 16, height: 16)
        final class Box: @unchecked Sendable { var frames: [SharedFrame] = [] }
        let box = Box()
        for _ in 0..<2 {
            try reserve(producer, format).publish()
            box.frames.append(try nextFrame(consumer).share())
        }
        #expect(consumer.heldFrames == 2)
        #expect(consumer.liveHoldLimit == 2)
        try reserve(producer, format).publish()
        #expect(throws: ConsumerError.self) { _ = try consumer.next() }
        let slot = Int(box.frames[0].slot)
        #expect(scratch.snapshot("s")?.slotTable[slot].holders == [consumer.consumerIndex!])
        let done = DispatchSemaphore(value: 0)
        Thread {
            box.frames.removeFirst()   // the last reference, dropped on this thread
            done.signal()
        }.start()
        done.wait()
        #expect(scratch.snapshot("s")?.slotTable[slot].holders == [], "the slot is released at once")
        #expect(consumer.heldFrames == 1)
        let third = try nextFrame(consumer)
        #expect(third.sequence == 3)
        third.release()
        box.frames.removeAll()
        #expect(consumer.heldFrames == 0)
    }

    @Test func helpListsThePresetsAndTheirGraphs() throws {
        let scratch = try Scratch()
        let (status, out, _) = try scratch.run(["filter", "--help"])
        #expect(status == 0 && out.contains("usage: framesrv filter"))
        for graph in ["format=gray", "colorchannelmixer=.393:.769:.189:0:.349:.686:.168:0:.272:.534:.131", "gblur=sigma=SIGMA",
                      "format=rgb24", "movie=IMAGE,format=rgba,colorchannelmixer=aa=OPACITY"] {
            #expect(out.contains(graph), "\(graph)")
        }
        let (_, root, _) = try scratch.run(["--help"])
        #expect(root.contains("filter  "))
    }
}
