import Foundation
import FrameServer
import Glibc
import Testing

/// Own stages in C and Python inside framesrv chains, in real processes: a Python numpy filter
/// between `produce -i` and `sink --framemd5`, Python and C processes SIGKILLed mid-stream,
/// the Python package installed with pip into fresh venvs and as a wheel, libframesrv's own C
/// tests under ASan + UBSan, the Python package's pytest suite, and the C examples built with
/// pkg-config against an installed libframesrv. (The pair-by-pair matrix is ClientMatrixTests.)
@Suite("Cross-language stages", .serialized)
struct CrossLanguageTests {
    // MARK: A Python filter in a chain

    /// 255 - x on every plane, written into the output frame in place, with the input's
    /// header (timestamps, colour) copied over. (A Consumer and a Producer rather than
    /// framesrv.filter, whose output does not wait for its consumer: the chain is lossless end
    /// to end only if the output waits for the sink, as `framesrv filter --wait-for 1` does.)
    static let negateFilter = """
        import sys
        import numpy as np
        import framesrv

        producer = None
        with framesrv.Consumer(sys.argv[1], mode="lossless", timeout=30) as consumer:
            for frame in consumer:
                if producer is None:
                    producer = framesrv.Producer(sys.argv[2], frame.width, frame.height, frame.pix_fmt, rate=consumer.rate)
                    producer.wait_for_consumers(1, timeout=30)
                with producer.reserve() as out:
                    out.copy_header_from(frame)
                    for src, dst in zip(frame.planes, out.planes):
                        np.subtract(255, src, out=dst)
        producer.close()
        """

    /// The same operation on ffmpeg's rawvideo frames: one md5 per frame.
    static let negateOracle = """
        import hashlib, sys
        import numpy as np
        size = int(sys.argv[1])
        data = sys.stdin.buffer.read()
        assert len(data) % size == 0, (len(data), size)
        for i in range(len(data) // size):
            frame = np.frombuffer(data, dtype=np.uint8, count=size, offset=i * size)
            print(hashlib.md5((255 - frame).tobytes()).hexdigest())
        """

    /// `produce -i clip` -> a Python numpy filter -> `sink --framemd5`: every frame of the
    /// sink is ffmpeg's decoded frame with the same numpy operation applied, and the
    /// timestamps pass through the Python stage.
    @Test("produce -i -> Python numpy filter -> sink --framemd5 equals numpy on ffmpeg's frames", .timeLimit(.minutes(2)))
    func pythonFilterInChain() throws {
        let python = try ClientTools.python()
        let scratch = try Scratch()
        let clip = try generateClip(MediaInput(file: "clip.mp4", rate: "25", frames: 30,
                                               ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p"]), scratch)
        let filter = scratch.file("negate.py"), oracle = scratch.file("oracle.py")
        try Self.negateFilter.write(toFile: filter, atomically: true, encoding: .utf8)
        try Self.negateOracle.write(toFile: oracle, atomically: true, encoding: .utf8)

        let producer = try scratch.start(["produce", "-i", clip, "--out", "a", "--wait-for", "1", "--quiet"])
        let stage = try scratch.start([filter, "a", "b"], executable: python)
        let sink = try scratch.start(["sink", "--in", "b", "--framemd5", "-", "--no-reattach", "--wait", "30", "--quiet"])
        #expect(sink.wait(timeout: 90) == 0, "sink: \(sink.stderr)")
        #expect(stage.wait(timeout: 30) == 0, "python filter: \(stage.stdout)\n\(stage.stderr)")
        #expect(producer.wait(timeout: 30) == 0, "producer: \(producer.stderr)")

        let (status, raw, err) = try shell("ffmpeg -v error -i '\(clip)' -map 0:v:0 -f rawvideo -pix_fmt yuv420p - | "
                                           + "'\(python)' '\(oracle)' \(320 * 240 * 3 / 2)", scratch)
        try #require(status == 0, "ffmpeg | numpy failed: \(err)")
        let expected = String(decoding: raw, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(expected.count == 30)
        let got = sizeAndHash(sink.stdout).map { $0.last ?? "" }
        #expect(got == expected, "the Python stage's frames are not numpy's 255 - x of ffmpeg's frames")
        // Timestamps pass through: the same pts column as ffmpeg's own framemd5 of the clip.
        let ptsOf = { (md5: String) in frameLines(md5).map { $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }[2] } }
        #expect(ptsOf(sink.stdout) == ptsOf(try ffmpegFramemd5(clip, scratch)))
    }

    // MARK: Processes killed mid-stream

    /// A lossless Python consumer that takes two frames and keeps their arrays (an array keeps
    /// its frame held), says so, and sleeps: the producer stalls on it until it is reclaimed.
    static let holdingConsumer = """
        import sys, time
        import framesrv

        consumer = framesrv.Consumer(sys.argv[1], mode="lossless")
        held = []
        for frame in consumer:
            held.append((frame.seq, frame.array()))
            if len(held) == 2:
                print("holding", held[0][0], held[1][0], flush=True)
                time.sleep(600)
        """

    /// The entry of `pid` in the stream's consumer table and the slots it holds are gone, and the
    /// stream counted a reclaimed consumer: through the monitor API and `framesrv inspect --json`.
    func expectReclaimed(_ pid: Int32, index: Int, stream: String, _ scratch: Scratch) throws {
        #expect(eventually(timeout: 10) {
            guard let s = scratch.snapshot(stream) else { return false }
            return !s.consumers.contains { $0.pid == pid } && !s.slotTable.contains { $0.holders.contains(index) }
                && s.reclaimedConsumers >= 1
        }, "consumer \(pid) of \(stream) was not reclaimed")
        let (status, json, _) = try scratch.run(["inspect", stream, "--json"])
        #expect(status == 0)
        let inspected = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(!((inspected["consumers"] as? [[String: Any]]) ?? []).contains { $0["pid"] as? Int == Int(pid) })
        #expect((inspected["reclaimedConsumers"] as? Int ?? 0) >= 1)
    }

    /// A Python consumer holding two slots is SIGKILLed: the producer (stalled on it) reclaims
    /// its entry and slots, and the stream goes on to a new consumer.
    @Test("a SIGKILLed Python consumer's slots are reclaimed and the stream goes on", .timeLimit(.minutes(2)))
    func killedPythonConsumer() throws {
        let python = try ClientTools.python()
        let scratch = try Scratch()
        let script = scratch.file("hold.py")
        try Self.holdingConsumer.write(toFile: script, atomically: true, encoding: .utf8)
        let producer = try scratch.start(["produce", "--pattern", "--out", "k", "--size", "160x120", "--rate", "200",
                                          "--frames", "100000", "--slots", "4", "--wait-for", "1", "--quiet"])
        let held = try scratch.start([script, "k"], executable: python)
        try #require(eventually { held.stdout.contains("holding") }, "the Python consumer: \(held.stdout)\n\(held.stderr)")
        let entry = try #require(scratch.snapshot("k")?.consumers.first { $0.pid == held.pid })
        #expect(entry.mode == "lossless")
        #expect(scratch.snapshot("k")?.slotTable.contains { $0.holders.contains(entry.index) } ?? false,
                "the Python consumer's frames are held in the slot table")
        held.kill()
        try expectReclaimed(held.pid, index: entry.index, stream: "k", scratch)

        // The stream goes on: a new lossless consumer gets 50 fresh, intact frames.
        let after = try scratch.start(["sink", "--in", "k", "--null", "--lossless", "--verify", "--frames", "50",
                                       "--stats-json", "--no-reattach", "--quiet"])
        #expect(after.wait(timeout: 60) == 0, "sink: \(after.stderr)")
        let stats = try #require(SinkStats.parse(after.stdout), "sink: \(after.stdout)")
        #expect(stats.received == 50 && stats.corrupt == 0 && stats.first > 2)
        #expect(producer.isRunning)
        producer.signal(SIGINT)
        #expect(producer.wait(timeout: 30) == 0, "producer: \(producer.stderr)")
    }

    /// A Python producer SIGKILLed mid-stream under a re-attaching Swift sink: the sink sees it
    /// gone, the next producer of the name takes over the dead one's segments, and the sink
    /// re-attaches and gets every frame of the new one, intact.
    @Test("a SIGKILLed Python producer is replaced and the sink re-attaches", .timeLimit(.minutes(2)))
    func killedPythonProducer() throws {
        let scratch = try Scratch()
        let first = try startPatternProducer(.python, stream: "p", size: "160x120", frames: 100_000, rate: "200", slots: 4, scratch)
        let sink = try ClientConsumer.start(.swift, stream: "p", reattach: true, scratch)
        try #require(eventually { (readSeqLog(sink.seqLog).attachments.first?.count ?? 0) >= 10 },
                     "the sink got no frames from the Python producer: \(first.stderr)\n\(sink.process.stderr)")
        first.kill()
        #expect(eventually(timeout: 10) { procFile(sink.seqLog).contains("gone \(first.pid)") }, "the sink did not see the producer gone")
        #expect(sink.process.isRunning, "the sink waits for the next producer")

        let second = try startPatternProducer(.swift, stream: "p", size: "160x120", frames: 60, slots: 4, scratch)
        #expect(second.wait(timeout: 60) == 0, "second producer: \(second.stderr)")
        sink.process.signal(SIGINT)
        #expect(sink.process.wait(timeout: 30) == 0, "sink: \(sink.process.stderr)")
        let (runs, corrupt) = readSeqLog(sink.seqLog)
        #expect(corrupt.isEmpty)
        #expect(runs.count == 2, "one attachment per producer: \(runs.map(\.count))")
        #expect(runs.last == Array(1...60), "the new producer's frames, every one")
        let firstRun = runs.first ?? []
        #expect(zip(firstRun, firstRun.dropFirst()).allSatisfy { $0 + 1 == $1 }, "the Python producer's frames in order")
    }

    /// A lossless Python consumer that waits for the next producer when its producer dies
    /// (`Consumer(reattach=True)`), checks every frame against the test pattern and logs it.
    static let reattachingConsumer = """
        import sys
        import framesrv

        seqs, corrupt = [], 0
        with open(sys.argv[2], "w", buffering=1) as log:
            for frame in framesrv.Consumer(sys.argv[1], mode="lossless", timeout=30, reattach=True):
                corrupt += 1 if frame.pattern_check() else 0
                seqs.append(frame.seq)
                print(frame.seq, file=log)
        print(f"py: received {len(seqs)} frames, first {seqs[0] if seqs else 0}, last {seqs[-1] if seqs else 0}, corrupt {corrupt}")
        """

    /// A C producer SIGKILLed mid-stream under a C consumer (examples/c/consumer, which
    /// re-opens on GONE) and a Python one (`reattach=True`): both see it gone, re-attach to
    /// the next C producer of the name and receive every frame of it.
    @Test("a SIGKILLed C producer: C and Python consumers re-attach to the next one", .timeLimit(.minutes(2)))
    func killedCProducer() throws {
        let scratch = try Scratch()
        let (cConsumer, python) = (try ClientTools.cExample("consumer"), try ClientTools.python())
        let script = scratch.file("reattach.py"), pyLog = scratch.file("py.seq")
        try Self.reattachingConsumer.write(toFile: script, atomically: true, encoding: .utf8)
        let first = try startPatternProducer(.c, stream: "q", size: "160x120", frames: 100_000, rate: "200", slots: 4,
                                             waitFor: 2, scratch)
        let c = try scratch.start(["q"], executable: cConsumer)
        let py = try scratch.start([script, "q", pyLog], executable: python)
        let cFrames = { c.stdout.split(separator: "\n").filter { $0.hasPrefix("frame ") }
            .compactMap { $0.split(separator: " ").dropFirst().first.flatMap { UInt64($0) } } }
        try #require(eventually { cFrames().count >= 10 && (readClientSeqLog(pyLog).first?.count ?? 0) >= 10 },
                     "the consumers got no frames from the C producer: \(first.stderr)\n\(c.stderr)\n\(py.stderr)")
        first.kill()
        #expect(eventually(timeout: 10) { c.stderr.contains("waiting for a new producer") }, "the C consumer: \(c.stderr)")
        #expect(c.isRunning && py.isRunning, "both wait for the next producer")

        let second = try startPatternProducer(.c, stream: "q", size: "160x120", frames: 60, slots: 4, waitFor: 2, scratch)
        #expect(second.wait(timeout: 60) == 0, "second producer: \(second.stdout)\n\(second.stderr)")
        #expect(c.wait(timeout: 30) == 0, "C consumer: \(c.stderr)")
        #expect(py.wait(timeout: 30) == 0, "Python consumer: \(py.stdout)\n\(py.stderr)")
        let cRuns = splitRuns(cFrames())
        #expect(cRuns.count == 2 && cRuns.last == Array(1...60), "C: every frame of the second producer: \(cRuns.map(\.count))")
        let pyRuns = readClientSeqLog(pyLog)
        #expect(pyRuns.count == 2 && pyRuns.last == Array(1...60), "Python: every frame of the second producer: \(pyRuns.map(\.count))")
        #expect(parseClientSummary(py.stdout, prefix: "py")?.corrupt == 0, "Python: \(py.stdout)")
    }

}
