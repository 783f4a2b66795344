import Foundation
import Testing

/// The cross-language matrix: a producer in Swift (`framesrv produce --pattern`), C
/// (libframesrv's framesrv-produce) or Python (`python -m framesrv produce`) and a consumer in
/// each of the three (`framesrv sink --verify`, framesrv-consume and `python -m framesrv
/// consume` with --verify-pattern), every pair its own test case, each a real process.
///
/// Lossless is exactly once: the consumer's sequence log is 1...N in order and every byte of
/// every plane matched the test pattern (PROTOCOL.md 21). A missing tool (make, the venv) is
/// a failure, not a skip.
@Suite("Client matrix: Swift, C and Python producers x consumers", .serialized)
struct ClientMatrixTests {
    static let frames = 120

    @Test("lossless, exactly once, every byte verified", .timeLimit(.minutes(2)),
          arguments: ClientLanguage.allCases, ClientLanguage.allCases)
    func lossless(producer: ClientLanguage, consumer: ClientLanguage) throws {
        let scratch = try Scratch()
        let n = Self.frames
        // 4 slots for 120 frames: every slot is recycled 30 times under the consumer.
        let p = try startPatternProducer(producer, stream: "m", frames: n, slots: 4, scratch)
        let c = try ClientConsumer.start(consumer, stream: "m", scratch)
        let (pStatus, cStatus) = finishPair(producer: p, consumer: c.process)
        #expect(pStatus == 0, "\(producer) producer: \(p.stdout)\n\(p.stderr)")
        #expect(cStatus == 0, "\(consumer) consumer: \(c.process.stdout)\n\(c.process.stderr)")

        let report = try c.report()
        #expect(report.received == UInt64(n) && report.first == 1 && report.last == UInt64(n) && report.corrupt == 0,
                "\(producer) -> \(consumer): \(report)")
        #expect(report.seqs == Array(1...UInt64(n)), "\(producer) -> \(consumer): every frame once, in order")
        if producer != .swift {
            #expect(parsePublished(p.stdout, prefix: producer == .c ? "c" : "py") == n, "\(producer) producer: \(p.stdout)")
        }
        // The stream ended cleanly: its producer removed the control segment.
        #expect(!FileManager.default.fileExists(atPath: scratch.file("m.ctl")))
    }

    /// The C and Python test consumers read a sound stream with --audio: every frame of a
    /// 2-second 44.1 kHz WAV, and as many samples as ffmpeg decodes; without --audio they
    /// are refused in one line naming it.
    @Test("--audio reads a sound stream in C and Python", .timeLimit(.minutes(2)), arguments: [ClientLanguage.c, .python])
    func audio(consumer: ClientLanguage) throws {
        let scratch = try Scratch()
        let wav = scratch.file("sine.wav")
        let (g, _, err) = try shell("ffmpeg -v error -f lavfi -i sine=frequency=440:d=2 -c:a pcm_s16le '\(wav)'", scratch)
        try #require(g == 0, "\(err)")
        let producer = try scratch.start(["produce", "-i", wav, "--out", "snd", "--wait-for", "1", "--quiet"])
        let (tool, prefix): ([String], String) = consumer == .c ? ([try ClientTools.cTool("framesrv-consume")], "c")
                                                               : ([try ClientTools.python(), "-m", "framesrv", "consume"], "py")
        let refused = try scratch.start(Array(tool.dropFirst()) + ["--in", "snd", "--wait", "30"], executable: tool[0])
        #expect(refused.wait(timeout: 60) == 2 && refused.stderr.contains("carries audio"), "\(refused.stderr)")
        let read = try scratch.start(Array(tool.dropFirst()) + ["--in", "snd", "--audio", "--wait", "30"], executable: tool[0])
        #expect(read.wait(timeout: 60) == 0, "\(consumer): \(read.stderr)")
        #expect(producer.wait(timeout: 30) == 0, "\(producer.stderr)")
        #expect(read.stdout.contains("\(prefix): received ") && read.stdout.hasSuffix(", samples 88200\n"), "\(consumer): \(read.stdout)")
        let summary = parseClientSummary(read.stdout, prefix: prefix)
        #expect(summary.map { $0.received > 0 && $0.first == 1 && $0.last == $0.received && $0.corrupt == 0 } == true, "\(read.stdout)")
    }

    /// Every pixel format of the pattern across languages: a C or Python producer into a
    /// verifying Swift sink, and a Swift producer into a verifying C or Python consumer.
    @Test("pixel formats across languages", .timeLimit(.minutes(3)),
          arguments: [(ClientLanguage.c, ClientLanguage.swift), (.python, .swift), (.swift, .c), (.swift, .python)])
    func pixelFormats(pair: (producer: ClientLanguage, consumer: ClientLanguage)) throws {
        let scratch = try Scratch()
        let formats = ["gray", "nv12", "yuv422p", "yuv444p", "yuv420p10le", "rgb24", "bgra", "rgba", "p010le", "gray16le", "bgr24", "gbrp"]
        for (i, format) in formats.enumerated() {
            let stream = "f\(i)"
            let p = try startPatternProducer(pair.producer, stream: stream, size: "98x54", pixFmt: format, frames: 12, slots: 2, scratch)
            let c = try ClientConsumer.start(pair.consumer, stream: stream, scratch)
            let (pStatus, cStatus) = finishPair(producer: p, consumer: c.process)
            #expect(pStatus == 0, "\(format): \(pair.producer) producer: \(p.stderr)")
            #expect(cStatus == 0, "\(format): \(pair.consumer) consumer: \(c.process.stdout)\n\(c.process.stderr)")
            let report = try c.report()
            #expect(report.seqs == Array(1...12) && report.corrupt == 0, "\(format) \(pair.producer) -> \(pair.consumer): \(report)")
        }
    }

    /// A live consumer in each language next to a lossless Swift sink on one Swift producer:
    /// the sink gets every frame; the live consumer only intact frames, in increasing order.
    @Test("a live consumer next to a lossless sink", .timeLimit(.minutes(2)), arguments: ClientLanguage.allCases)
    func live(consumer: ClientLanguage) throws {
        let scratch = try Scratch()
        let n = 300
        // Frame 1 waits for the one lossless sink; the live consumer is admitted before it, so
        // it watches the whole stream.
        let p = try scratch.start(["produce", "--pattern", "--out", "v", "--size", "320x240", "--rate", "250",
                                   "--frames", "\(n)", "--wait-for", "1", "--quiet"])
        let live = try ClientConsumer.start(consumer, stream: "v", live: true, scratch)
        let attached = eventually(timeout: 30) {
            scratch.snapshot("v")?.consumers.contains { $0.pid == live.process.pid && $0.mode == "live" && $0.state == "active" } ?? false
        }
        try #require(attached, "the \(consumer) live consumer never attached: \(live.process.stderr)")
        #expect(scratch.snapshot("v")?.published == 0)
        let sink = try ClientConsumer.start(.swift, stream: "v", scratch)
        #expect(p.wait(timeout: 90) == 0, "producer: \(p.stderr)")
        #expect(sink.process.wait(timeout: 60) == 0, "sink: \(sink.process.stderr)")
        #expect(live.process.wait(timeout: 60) == 0, "\(consumer) live: \(live.process.stdout)\n\(live.process.stderr)")

        let all = try sink.report()
        #expect(all.seqs == Array(1...UInt64(n)) && all.corrupt == 0, "lossless sink: \(all)")
        let report = try live.report()
        #expect(report.corrupt == 0 && report.received >= 1, "\(consumer) live: \(report)")
        #expect(UInt64(report.seqs.count) == report.received, "\(consumer) live: one log line per frame")
        #expect(zip(report.seqs, report.seqs.dropFirst()).allSatisfy { $0 < $1 }, "\(consumer) live: sequence numbers must increase")
        #expect(report.seqs.allSatisfy { (1...UInt64(n)).contains($0) })
        #expect(report.seqs.first == report.first && report.seqs.last == report.last)
    }
}
