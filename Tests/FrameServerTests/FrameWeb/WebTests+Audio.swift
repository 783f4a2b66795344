import Foundation
import Glibc
import Testing

/// An audio stream in the web view (issue 25): levels.json gives each channel's peak and RMS
/// of the newest frame, and the page draws level meters where a picture's preview would be.
extension WebTests {
    @Test func audioStreamsHaveLevelMeters() throws {
        let scratch = try Scratch()
        // lavfi's sine: amplitude 1/8 (-18.06 dBFS), mono; ffmpeg's -ac 2 puts it in both channels
        // 3.01 dB lower: a peak of -21.07 dBFS and an RMS 3.01 dB below that.
        let tone = scratch.file("tone.wav")
        let (g, _, err) = try shell("ffmpeg -v error -f lavfi -i sine=frequency=1000:d=60 -ac 2 -c:a pcm_s16le '\(tone)'", scratch)
        try #require(g == 0, "\(err)")
        let producer = try scratch.start(["produce", "-i", tone, "--out", "tone", "-re", "--quiet"])
        defer { producer.kill() }
        #expect(eventually { (scratch.snapshot("tone")?.published ?? 0) > 2 })
        let (web, port, url) = try startWeb(scratch)
        defer { web.kill() }
        let reply = try #require(http(port, "/api/streams/tone/levels.json"))
        #expect(reply.status == 200, "\(reply.status) \(reply.text)")
        let levels = try #require(reply.json as? [String: Any], "\(reply.text)")
        let peaks = try #require(levels["peakDB"] as? [Double], "\(reply.text)")
        let rms = try #require(levels["rmsDB"] as? [Double], "\(reply.text)")
        #expect(peaks.count == 2 && peaks.allSatisfy { abs($0 + 21.07) < 0.1 }, "peaks \(peaks)")
        #expect(rms.count == 2 && zip(peaks, rms).allSatisfy { abs($0 - $1 - 3.01) < 0.1 }, "rms \(rms)")
        #expect(levels["sampleRate"] as? Int == 44100 && levels["layout"] as? String == "stereo")
        // A picture's routes refuse it in one line; the page draws meters, not a preview.
        let snapshot = try #require(http(port, "/api/streams/tone/snapshot.png"))
        #expect(snapshot.status == 503 && snapshot.text.contains("carries audio"), "\(snapshot.text)")
        let dom = try dumpDOM(scratch, url)
        #expect(dom.contains("data-media=\"audio\"") && dom.contains("class=\"meter\""), "no meter in the page")
        #expect(!dom.contains("alt=\"preview of tone\""), "a picture preview for a sound stream")
        let drawn = dom.range(of: "data-peak=\"").map { String(dom[$0.upperBound...].prefix { $0 != "\"" }) }
        #expect(drawn?.split(separator: ",").count == 2, "the meters were not drawn: \(drawn ?? "none")")
    }
}
