import Foundation
import Testing

// Media fixtures shared by the media, filter, zero-copy and chain suites: clips made with
// the ffmpeg CLI, ffmpeg's own framemd5 as the oracle, and a producer -> sink pipeline.

/// A clip a test generates with the ffmpeg CLI (testsrc2 at 320x240, then `ffmpegArgs`).
struct MediaInput: CustomTestStringConvertible, Sendable {
    let file: String
    let rate: String
    let frames: Int
    let ffmpegArgs: [String]
    var testDescription: String { file }
}

/// Clips whose frame durations are 1499/45000, 125/2997 and 66667/1000000 s (the issue's
/// real-file rates): H.264 in MP4 with the rate's own timescale, 30 frames each.
let exactRateInputs: [MediaInput] = [("45000/1499", "45000"), ("2997/125", "2997"), ("1000000/66667", "1000000")].map { rate, scale in
    MediaInput(file: "rate-\(rate.replacingOccurrences(of: "/", with: "-")).mp4", rate: rate, frames: 30,
               ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-video_track_timescale", scale])
}

/// The encoders `ffmpeg -encoders` lists.
let ffmpegEncoders: Set<String> = {
    guard let listing = try? Spawned.run(["ffmpeg", "-hide_banner", "-encoders"]) else { return [] }
    return Set(String(decoding: listing.stdout, as: UTF8.self).split(separator: "\n").compactMap { line in
        let fields = line.split(separator: " ")
        return fields.count >= 2 && fields[0].count == 6 ? String(fields[1]) : nil
    })
}()

/// Generates `input` in the scratch directory; returns its path.
func generateClip(_ input: MediaInput, _ scratch: Scratch) throws -> String {
    let path = scratch.file(input.file)
    let args = (["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc2=size=320x240:rate=\(input.rate)",
                 "-frames:v", String(input.frames)] + input.ffmpegArgs + [path]).map { "'\($0)'" }
    let (status, _, err) = try shell("ffmpeg " + args.joined(separator: " "), scratch)
    guard status == 0 else { throw TestFailure("ffmpeg could not generate \(input.file): \(err)") }
    return path
}

/// Two H.264 clips, 12 frames of size `first` then 10 of size `second`, joined into one
/// MPEG-TS file with cat (the second's timestamps following the first's).
func sizeChangeClip(_ first: String, _ second: String, _ scratch: Scratch) throws -> (part1: String, part2: String, joined: String) {
    let part1 = scratch.file("part1.ts"), part2 = scratch.file("part2.ts"), joined = scratch.file("joined.ts")
    for (path, size, frames, offset) in [(part1, first, 12, "0"), (part2, second, 10, "0.6")] {
        let (status, _, err) = try shell("ffmpeg -v error -y -f lavfi -i testsrc2=size=\(size):rate=25 -frames:v \(frames)"
                                         + " -c:v libx264 -pix_fmt yuv420p -output_ts_offset \(offset) '\(path)'", scratch)
        guard status == 0 else { throw TestFailure("ffmpeg could not generate \(path): \(err)") }
    }
    let (status, _, err) = try shell("cat '\(part1)' '\(part2)' > '\(joined)'", scratch)
    guard status == 0 else { throw TestFailure("cat failed: \(err)") }
    return (part1, part2, joined)
}

/// What FFmpeg itself writes for the input's first video stream, with `before` as input
/// options and `after` as output options.
func ffmpegFramemd5(_ path: String, before: String = "", after: String = "", _ scratch: Scratch) throws -> String {
    let (status, out, err) = try shell("ffmpeg -v error \(before) -i '\(path)' -map 0:v:0 \(after) -f framemd5 -", scratch)
    guard status == 0 else { throw TestFailure("ffmpeg \(before) ... \(after) -f framemd5 failed on \(path): \(err)") }
    return String(decoding: out, as: UTF8.self)
}

/// Producer and sink as separate processes; returns the sink's framemd5 and both processes.
func framemd5Pipeline(_ produceArgs: [String], stream: String, _ scratch: Scratch) throws -> (md5: String, producer: Spawned, sink: Spawned) {
    let producer = try scratch.start(["produce"] + produceArgs + ["--out", stream, "--wait-for", "1"])
    let sink = try scratch.start(["sink", "--in", stream, "--framemd5", "-"])
    #expect(sink.wait(timeout: 60) == 0, "sink: \(sink.stderr)")
    #expect(producer.wait(timeout: 60) == 0, "producer: \(producer.stderr)")
    return (sink.stdout, producer, sink)
}

/// The first line of a y4m file (its stream header).
func y4mHeader(_ path: String) throws -> String {
    try String(decoding: Data(contentsOf: URL(fileURLWithPath: path)).prefix(200), as: UTF8.self)
        .split(separator: "\n").first.map(String.init) ?? ""
}

/// The frame lines of framemd5 output (without the # header).
func frameLines(_ framemd5: String) -> [Substring] {
    framemd5.split(separator: "\n").filter { !$0.hasPrefix("#") }
}

/// Each frame line's size and hash (framemd5's last two fields).
func sizeAndHash(_ framemd5: String) -> [[String]] {
    frameLines(framemd5).map { $0.split(separator: ",").suffix(2).map { $0.trimmingCharacters(in: .whitespaces) } }
}

/// "N zero-copy, M copied" from a producer's summary line.
func pathCounts(_ summary: String) -> (zeroCopy: Int, copied: Int)? {
    guard let r = summary.range(of: #"(\d+) zero-copy, (\d+) copied"#, options: .regularExpression) else { return nil }
    let numbers = summary[r].split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }
    return numbers.count == 2 ? (numbers[0], numbers[1]) : nil
}

/// The hash column of framemd5 output (SinkTests, RecordReplayTests).
func hashes(_ md5: String) -> [Substring] {
    md5.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { $0.split(separator: ",").last }
}
