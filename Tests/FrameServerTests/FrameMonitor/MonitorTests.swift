import Foundation
import CFrameServer
@testable import FrameServer
import Glibc
import Testing

/// The monitoring client: `framesrv top` and `framesrv ls` against real pipelines, each
/// test in its own FRAMESRV_DIR. The only waits are the monitor's own refresh intervals.
@Suite(.serialized) struct MonitorTests {
    // MARK: Latency percentiles

    /// A percentile is the upper bound of the bucket that contains it: 1 us buckets under
    /// 100 us, then 100 us, 1 ms and 10 ms steps, open from 100 ms.
    @Test func latencyPercentileIsTheUpperBoundOfItsBucket() {
        func p(_ q: Double, _ hist: [UInt64]) -> UInt64? { ConsumerSnapshot.latencyPercentileMicros(q, histogram: hist) }
        #expect([0, 1, 12, 99, 100, 199, 999, 1000, 9999, 10000, 99_999, 100_000, 5_000_000].map { fs_latency_bucket($0) }
                == [0, 1, 12, 99, 100, 100, 108, 109, 117, 118, 126, 127, 127])
        #expect([0, 12, 99, 100, 108, 109, 117, 118, 126].map { fs_latency_bucket_bound($0) }
                == [1, 13, 100, 200, 1000, 2000, 10000, 20000, 100_000])
        var hist = [UInt64](repeating: 0, count: Int(FS_LATENCY_BUCKETS))
        #expect(p(0.5, hist) == nil, "no frame yet")
        hist[Int(fs_latency_bucket(23))] = 99      // 23 us
        hist[Int(fs_latency_bucket(650))] = 1      // 600..699 us
        #expect(p(0.5, hist) == 24)
        #expect(p(0.99, hist) == 24, "the 99th of 100 samples is still in the 23 us bucket")
        #expect(p(1.0, hist) == 700)
        #expect(p(0, hist) == 24, "p0 is the first sample")
        hist[0] = 100     // under 1 us
        #expect(p(0.5, hist) == 1)
        #expect(p(0.75, hist) == 24)
        hist[Int(FS_LATENCY_BUCKETS) - 1] = 1000   // 100 ms and more: no upper bound
        #expect(p(0.99, hist) == ConsumerSnapshot.latencyUnbounded)
        #expect(ConsumerSnapshot.latencyUnboundedFromMicros == 100_000)
    }

    // MARK: top

    /// A consumer stuck on a frame shows the slot it holds, and its hold time grows from one
    /// refresh to the next.
    @Test func stalledConsumerShowsAGrowingHold() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "st", "--size", "64x48", "--rate", "200", "--slots", "4"])
        let stuck = try scratch.start(["sink", "--in", "st", "--null", "--lossless", "--hold-us", "10000000", "--name", "stuck"])
        #expect(eventually { scratch.snapshot("st")?.consumers.first?.held ?? 0 >= 1 })
        let refreshes = try top(scratch, ["--json", "-n", "2", "-d", "0.3"])
        try #require(refreshes.count == 2)
        let holds = try refreshes.map { try #require(consumer(stuck.pid, of: "st", in: $0)) }
        #expect(holds.allSatisfy { ($0["held"] as? Int ?? 0) >= 1 }, "\(holds)")
        let first = holds[0]["holdMillis"] as? Double ?? 0, second = holds[1]["holdMillis"] as? Double ?? 0
        #expect(second > first, "the hold grew from \(first) to \(second) ms")
        #expect(holds[0]["fps"] == nil && holds[1]["fps"] is Double, "fps from the second refresh on")
        producer.signal(SIGINT)
        stuck.kill()
        #expect(producer.wait() == 0)
    }

    /// `inspect` lists exactly the slots a consumer holds: a stuck lossless consumer holds
    /// one frame, and the frames reserved for it behind that one (its lag) are not its holds.
    @Test func inspectListsOnlyTheHeldSlots() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "hs", "--size", "64x48", "--rate", "500", "--slots", "8"])
        let stuck = try scratch.start(["sink", "--in", "hs", "--null", "--lossless", "--hold-us", "10000000", "--name", "stuck"])
        #expect(eventually { scratch.snapshot("hs").map { $0.freeSlots == 0 && ($0.consumers.first?.lag ?? 0) > 2 } ?? false })
        let c = try #require(scratch.snapshot("hs")?.consumers.first)
        #expect(c.held == 1 && c.heldSlots.count == 1, "held \(c.held), slots \(c.heldSlots)")
        let (status, out, _) = try scratch.run(["inspect", "hs"])
        #expect(status == 0 && out.contains("held 1 (slot \(c.heldSlots.first ?? -1)) for "), "\(out)")
        producer.signal(SIGINT)
        stuck.kill()
        #expect(producer.wait() == 0)
    }

    /// Long slot lists are runs: `0-3,7`.
    @Test func heldSlotsAreListedAsRanges() {
        #expect(ConsumerSnapshot.ranges([0, 1, 2, 3, 7]) == "0-3,7")
        #expect(ConsumerSnapshot.ranges([9, 10, 4, 12, 13, 14]) == "4,9-10,12-14")
        #expect(ConsumerSnapshot.ranges([5]) == "5" && ConsumerSnapshot.ranges([]) == "")
    }

    /// A consumer killed with SIGKILL is gone from what top prints: listed before, not after
    /// the producer reclaimed it. (How soon the producer reclaims it: Timing/LatencyTests.)
    @Test func killedConsumerDisappearsFromTop() throws {
        let scratch = try Scratch()
        let (producer, victim) = try producerAndHolder("kt", scratch)
        let before = try top(scratch, ["--json", "-n", "1"])
        #expect(before.count == 1 && consumer(victim.pid, of: "kt", in: before[0]) != nil)
        victim.kill()
        #expect(eventually(timeout: 10) { isReclaimed(victim.pid, of: "kt", in: scratch) })
        let after = try top(scratch, ["--json", "-n", "1"])
        #expect(after.count == 1 && consumer(victim.pid, of: "kt", in: after[0]) == nil)
        #expect(streams(in: after[0]).first?["name"] as? String == "kt")
        producer.signal(SIGINT)
        #expect(producer.wait() == 0)
    }

    /// A live consumer slower than its producer shows misses, and both rates are measured.
    @Test func slowLiveConsumerShowsMisses() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "lv", "--size", "64x48", "--rate", "1000"])
        let slow = try scratch.start(["sink", "--in", "lv", "--null", "--live", "--hold-us", "5000", "--name", "slow"])
        #expect(eventually { scratch.snapshot("lv")?.consumers.first?.missed ?? 0 > 0 })
        let refreshes = try top(scratch, ["--json", "-n", "2", "-d", "0.3"])
        try #require(refreshes.count == 2)
        let last = try #require(consumer(slow.pid, of: "lv", in: refreshes[1]))
        #expect(last["missed"] as? Int ?? 0 > 0, "\(last)")
        #expect(last["mode"] as? String == "live")
        let streamFPS = streams(in: refreshes[1]).first?["fps"] as? Double ?? 0
        let consumerFPS = last["fps"] as? Double ?? 0
        #expect(streamFPS > 0 && consumerFPS > 0 && consumerFPS < streamFPS, "stream \(streamFPS) fps, consumer \(consumerFPS) fps")
        #expect(last["latencyP50"] as? String ?? "-" != "-")
        producer.signal(SIGINT)
        #expect(producer.wait() == 0 && slow.wait() == 0)
    }

    /// A producer that waits for consumers (--wait-for 2, one attached) says so in ls, top,
    /// inspect and the JSON rows, instead of looking like a stream playing nothing.
    @Test func waitingProducerSaysWhatItWaitsFor() throws {
        let scratch = try Scratch()
        let clip = try generateClip(MediaInput(file: "w.mp4", rate: "25", frames: 10, ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p"]), scratch)
        let producer = try scratch.start(["produce", "-i", clip, "--out", "w", "--wait-for", "2"])
        let sink = try scratch.start(["sink", "--in", "w", "--null"])
        #expect(eventually { scratch.snapshot("w")?.consumers.filter { $0.mode == "lossless" }.count == 1 })
        let line = "waiting for 2 lossless consumers (1 attached)"
        let ls = try scratch.run(["ls"]), inspect = try scratch.run(["inspect", "w"]), top = try scratch.run(["top", "-b", "-n", "1"])
        for (what, out) in [("ls", ls.stdout), ("inspect", inspect.stdout), ("top", top.stdout)] {
            #expect(out.contains(line), "\(what): \(out)")
        }
        let json = try scratch.run(["ls", "--json"]).stdout
        #expect(json.contains("\"waiting\":\"\(line)\"") && json.contains("\"waiting_for\":2") && json.contains("\"attached\":1"), "\(json)")
        producer.signal(SIGINT)
        #expect(producer.wait() == 130, "\(producer.stderr)")
        sink.signal(SIGINT)
        _ = sink.wait()
    }

    /// A live source that drops frames for want of a free slot says who holds them: the
    /// slow lossless consumer by name and pid, once at the first drop and then once a second.
    @Test func droppingLiveSourceNamesTheConsumerHoldingThePool() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "dr", "--size", "64x48", "--rate", "200", "--slots", "4", "--live-source"])
        let slow = try scratch.start(["sink", "--in", "dr", "--null", "--lossless", "--hold-us", "50000", "--name", "slowstage"])
        let want = "framesrv: dr: dropped "
        #expect(eventually { producer.stderr.contains(want) }, "\(producer.stderr)")
        let first = try #require(producer.stderr.split(separator: "\n").first { $0.hasPrefix(want) })
        #expect(first.contains("frame") && first.contains("(no free slot): consumer 'slowstage' (pid \(slow.pid)) holds ")
                && first.contains(" of 4 slots"), "\(first)")
        producer.signal(SIGINT)
        #expect(producer.wait() == 0)
        _ = slow.wait()
        let lines = producer.stderr.split(separator: "\n").filter { $0.hasPrefix(want) }
        #expect(lines.count >= 1, "\(producer.stderr)")
    }

    /// `ls --json` and `top --json` are valid JSON and agree with the shared statistics.
    @Test func jsonOutputsMatchTheSnapshot() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "js", "--size", "64x48", "--rate", "200", "--slots", "6"])
        let a = try scratch.start(["sink", "--in", "js", "--null", "--lossless"])
        let b = try scratch.start(["sink", "--in", "js", "--null", "--live"])
        #expect(eventually { scratch.snapshot("js")?.consumers.filter { $0.delivered > 0 }.count == 2 })
        let known = try #require(scratch.snapshot("js")).published

        let (status, ls, _) = try scratch.run(["ls", "--json"])
        #expect(status == 0)
        let listed = try #require(try JSONSerialization.jsonObject(with: Data(ls.utf8)) as? [[String: Any]])
        #expect(listed.count == 1)
        let stream = try #require(listed.first)
        #expect(stream["name"] as? String == "js")
        #expect(stream["slots"] as? Int == 6)
        #expect((stream["consumers"] as? [Any])?.count == 2)
        #expect(UInt64(stream["published"] as? Int ?? 0) >= known)
        #expect(stream["fps"] as? Double ?? 0 > 0, "ls measures the rate: \(stream["fps"] ?? "none")")

        let refreshes = try top(scratch, ["--json", "-n", "1"])
        #expect(refreshes.count == 1)
        let report = try #require(refreshes.first)
        #expect(report["time"] is Double)
        let top = try #require(streams(in: report).first)
        #expect(streams(in: report).count == 1)
        #expect(top["slots"] as? Int == 6)
        #expect(UInt64(top["published"] as? Int ?? 0) >= known)
        let consumers = try #require(top["consumers"] as? [[String: Any]])
        #expect(Set(consumers.compactMap { $0["pid"] as? Int }) == [Int(a.pid), Int(b.pid)])
        #expect(Set(consumers.compactMap { $0["mode"] as? String }) == ["lossless", "live"])
        producer.signal(SIGINT)
        #expect(producer.wait() == 0 && a.wait() == 0 && b.wait() == 0)
    }

    /// Without a terminal, top prints plain text blocks separated by a blank line, with or
    /// without -b, and never an escape character.
    @Test func batchOutputIsPlainText() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "plain", "--size", "64x48", "--rate", "100"])
        #expect(eventually { scratch.snapshot("plain")?.published ?? 0 > 0 })
        for args in [["top", "-b", "-n", "2", "-d", "0.2"], ["top", "-n", "2", "-d", "0.2"]] {
            let (status, out, err) = try scratch.run(args)
            #expect(status == 0, "\(args): \(err)")
            #expect(!out.utf8.contains(0x1B), "\(args) printed an escape character")
            let blocks = out.split(separator: "\n\n", omittingEmptySubsequences: false)
            #expect(blocks.count == 2, "\(args): \(out)")
            #expect(blocks.allSatisfy { $0.hasPrefix("NAME") && $0.contains("\nplain ") }, "\(args): \(out)")
            let rates = blocks.map { $0.split(separator: "\n")[1].split(separator: " ", omittingEmptySubsequences: true)[3] }
            #expect(rates.first == "-" && Double(rates.last ?? "") != nil, "fps from the second refresh on: \(rates)")
        }
        producer.signal(SIGINT)
        #expect(producer.wait() == 0)
    }

    /// On a terminal (a pseudo-terminal from script(1)), top clears the screen, hides the
    /// cursor and shows it again at the end, and cuts rows to the width (80 here: the
    /// pseudo-terminal has no size).
    @Test func terminalOutputRedrawsTheScreen() throws {
        let script = try RequiredTool.script.path()
        try #require(FileManager.default.isExecutableFile(atPath: script), "this test needs script(1) from util-linux at \(script)")
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "tty-stream-with-a-long-name", "--size", "64x48",
                                          "--rate", "100"])
        #expect(eventually { scratch.snapshot("tty-stream-with-a-long-name")?.published ?? 0 > 0 })
        let command = "'\(framesrvPath)' top -n 2 -d 0.2"
        let tty = try scratch.start(["-qfec", command, "/dev/null"], executable: script)
        #expect(tty.wait(timeout: 20) == 0, "script: \(tty.stderr)")
        let out = tty.stdout
        let clearScreen = "\u{1B}[H\u{1B}[2J", hideCursor = "\u{1B}[?25l", showCursor = "\u{1B}[?25h"
        #expect(out.components(separatedBy: clearScreen).count == 3, "two screens: \(out.debugDescription)")
        #expect(out.contains(hideCursor) && out.hasSuffix(showCursor + "\r\n"))
        #expect(out.contains("tty-stream-with-a-long-name"))
        // Each screen ends without a newline (it would scroll a full screen): split at the redraws first.
        let rows = out.components(separatedBy: clearScreen).flatMap { screen in
            screen.replacingOccurrences(of: "\u{1B}\\[[0-9;?]*[A-Za-z]", with: "", options: .regularExpression)
                .replacingOccurrences(of: "\r", with: "").split(separator: "\n")
        }
        let widest = rows.map(\.count).max() ?? 0
        #expect(widest > 0 && widest <= 80, "rows cut to 80 columns, widest \(widest)")
        producer.signal(SIGINT)
        #expect(producer.wait() == 0)
    }

    // MARK: A monitor people can read

    /// `top -b` at 80 columns ($COLUMNS): no row is wider, the columns that say who lags at
    /// what rate stay, streams come in pipeline order (not by name) and consumers by their
    /// role or --name; `ls` lists the same order and `inspect` says what is held.
    @Test func topAt80ColumnsFollowsThePipeline() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "zz-src", "--size", "64x48", "--rate", "100", "--wait-for", "2"])
        let stages = [try scratch.start(["filter", "--in", "zz-src", "--out", "aa-mid", "--preset", "gray", "--wait-for", "1", "-q"]),
                      try scratch.start(["sink", "--in", "zz-src", "--null", "--name", "watcher", "-q"]),
                      try scratch.start(["filter", "--in", "aa-mid", "--out", "mm-out", "--vf", "hflip", "--wait-for", "1", "-q"]),
                      try scratch.start(["sink", "--in", "mm-out", "--null", "-q"])]
        #expect(eventually { (scratch.snapshot("mm-out")?.consumers.first?.delivered ?? 0) > 0 })
        let top = try scratch.start(["top", "-b", "-n", "1"], environment: ["COLUMNS": "80"])
        #expect(top.wait() == 0, "top: \(top.stderr)")
        let lines = top.stdout.split(separator: "\n").map(String.init)
        #expect(lines.allSatisfy { $0.count <= 80 }, "rows wider than 80:\n\(top.stdout)")
        let header = try #require(lines.first).split(separator: " ").map(String.init)
        #expect(["NAME", "STATE", "FPS", "LAG", "DROP", "HELD"].allSatisfy(header.contains), "\(header)")
        // (indented: a consumer, its name) for each row
        let rows = lines.dropFirst().map { ($0.hasPrefix(" "), $0.drop { $0 == " " }.components(separatedBy: "  ")[0]) }
        #expect(rows.filter { !$0.0 }.map(\.1) == ["zz-src", "aa-mid", "mm-out"], "\(top.stdout)")
        #expect(Set(rows.filter(\.0).map(\.1)) == ["filter gray -> aa-mid", "watcher", "filter hflip -> mm-out", "sink null"], "\(rows)")
        let wide = try scratch.start(["top", "-b", "-n", "1", "-w", "160"])
        #expect(wide.wait() == 0)
        let wideLines = wide.stdout.split(separator: "\n")
        #expect(wideLines.allSatisfy { $0.count <= 160 } && wideLines.first?.contains("COLOUR") == true, "\(wide.stdout)")
        let (status, ls, _) = try scratch.run(["ls", "-w", "80"])
        #expect(status == 0 && ls.split(separator: "\n").dropFirst().map { String($0.prefix { $0 != " " }) } == ["zz-src", "aa-mid", "mm-out"], "\(ls)")
        let (_, inspect, _) = try scratch.run(["inspect", "mm-out"])
        #expect(inspect.contains("sink null pid") && !inspect.contains("(slots )"), "\(inspect)")
        #expect(inspect.contains("producer 'filter hflip -> mm-out' pid"), "\(inspect)")
        #expect(scratch.snapshot("zz-src")?.producerName == "produce pattern")
        producer.signal(SIGINT)
        #expect(producer.wait() == 0)
        #expect(stages.map { $0.wait() } == [0, 0, 0, 0])
    }

    /// `top -w 80` keeps FPS and LAG (and DROP, HELD) and leaves out P99 and FORMAT first:
    /// a narrow terminal still says who lags and at what rate.
    @Test func narrowTopKeepsRateAndLag() throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "--pattern", "--out", "narrow-stream", "--size", "64x48", "--rate", "100"])
        let sink = try scratch.start(["sink", "--in", "narrow-stream", "--null", "--lossless", "--name", "a-consumer-with-a-long-name", "-q"])
        #expect(eventually { (scratch.snapshot("narrow-stream")?.consumers.first?.delivered ?? 0) > 0 })
        let (status, out, err) = try scratch.run(["top", "-b", "-n", "1", "-w", "80"])
        #expect(status == 0, "top: \(err)")
        let lines = out.split(separator: "\n").map(String.init)
        #expect(lines.allSatisfy { $0.count <= 80 }, "rows wider than 80:\n\(out)")
        let header = try #require(lines.first).split(separator: " ").map(String.init)
        #expect(["NAME", "STATE", "FPS", "LAG", "DROP", "HELD"].allSatisfy(header.contains), "\(header)")
        let wide = try scratch.run(["top", "-b", "-n", "1", "-w", "200"]).stdout.split(separator: "\n").first ?? ""
        #expect(wide.contains("P99") && wide.contains("FORMAT"), "\(wide)")
        producer.signal(SIGINT)
        #expect(producer.wait() == 0)
        _ = sink.wait()
    }

    /// A stream whose files are gone stays in a refreshing monitor for `keepSeconds`,
    /// ended, with its last totals; then it goes.
    @Test func endedStreamStaysForAFewSeconds() {
        func stream(_ name: String, pid: Int32, published: UInt64) -> StreamSnapshot {
            StreamSnapshot(name: name, producerPID: pid, producerName: "produce pattern", state: "running", liveSource: false, memory: "host", media: "video", device: nil, slots: 4, slotBytes: 4096, epoch: 1,
                           published: published, dropped: 0, minFreeSlots: 4, freeSlots: 2, reclaimedConsumers: 0,
                           demotedConsumers: 0, blockedMillis: 0, nominalRate: nil, format: nil, lastSequence: published,
                           consumers: [], slotTable: [])
        }
        var recent = RecentStreams(keepSeconds: 5)
        let second: UInt64 = 1_000_000_000
        #expect(recent.update([stream("a", pid: 1, published: 10), stream("b", pid: 2, published: 7)], nanos: second).map(\.name) == ["a", "b"])
        let after = recent.update([stream("a", pid: 1, published: 20)], nanos: 2 * second)
        let gone = after.first { $0.name == "b" }
        #expect(gone?.vanished == true && gone?.state == "ended" && gone?.published == 7 && gone?.freeSlots == 4)
        #expect(recent.update([stream("a", pid: 1, published: 30)], nanos: 5 * second).contains { $0.name == "b" })
        #expect(recent.update([stream("a", pid: 1, published: 40)], nanos: 7 * second).map(\.name) == ["a"])
    }

    /// Role names fit the shared 31-byte field by losing their middle.
    @Test func clientNamesFitTheField() {
        #expect(ClientName.filter("blur=4", out: "soft") == "filter blur=4 -> soft")
        #expect(ClientName.sink([("record", "/tmp/x/out.mp4")]) == "sink record out.mp4")
        #expect(ClientName.sink([("framemd5", "-"), ("y4m", "a.y4m")]) == "sink framemd5 - +1")
        let long = ClientName.filter("scale=1920:1080:flags=lanczos", out: "big-output-stream")
        #expect(long.utf8.count == ClientName.maxBytes && long.hasPrefix("filter scale") && long.hasSuffix("output-stream"), "\(long)")
    }

    // MARK: Helpers

    /// Runs `framesrv top ARGS` and parses each line of its output as one JSON object.
    func top(_ scratch: Scratch, _ args: [String]) throws -> [[String: Any]] {
        let (status, out, err) = try scratch.run(["top"] + args)
        #expect(status == 0, "top: \(err)")
        return try out.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "not a JSON object: \(line)")
        }
    }

    func streams(in report: [String: Any]) -> [[String: Any]] { report["streams"] as? [[String: Any]] ?? [] }

    /// The consumer with process id `pid` of stream `name` in one top refresh.
    func consumer(_ pid: Int32, of name: String, in report: [String: Any]) -> [String: Any]? {
        let stream = streams(in: report).first { $0["name"] as? String == name }
        return (stream?["consumers"] as? [[String: Any]])?.first { $0["pid"] as? Int == Int(pid) }
    }
}
