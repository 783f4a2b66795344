// libFuzzer target: a recording's frame records (what replay reads from each packet's side
// data, docs/RECORDING.md: a video frame's, version 1, 112 bytes; an audio frame's, version 2,
// 136 bytes) and the timeline replay builds from records. Input: records back to back, each
// as long as the version at its bytes 4-5 says (the last one zero-padded). Oracle: no trap
// reading any of them; a record that parses describes a frame whose format validates (an
// audio record: sample format, rate, channels, order, mask and sample count within
// PROTOCOL.md 4.6, its packet size computable) and writes back to the bytes that read as
// itself; the timeline's duration and span are sane for whatever offsets and timestamps the
// records carry (a damaged record is beyond the span), three tracks, two of one producer.
@testable import FrameRecording
import FrameMedia
import FrameServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRecord(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: count)
    var records: [FrameRecord] = []
    var at = 0
    while at < count {
        let size = at + 5 < count && bytes[at + 4] == UInt8(FrameRecord.audioVersion) && bytes[at + 5] == 0
            ? FrameRecord.audioSize : FrameRecord.size
        var chunk = [UInt8](bytes[at..<min(count, at + size)])
        chunk += [UInt8](repeating: 0, count: size - chunk.count)
        if let r = chunk.withUnsafeBytes({ FrameRecord(bytes: $0, audio: true) }) {
            if let audio = r.audio {
                guard (try? audio.validate()) != nil, AudioPCM.packetBytes(audio) != nil, r.format == FrameRecord.noPicture else {
                    fatalError("an audio record of an invalid format parsed: \(audio)")
                }
            } else {
                guard (try? r.format.validate()) != nil else { fatalError("a record of an invalid format parsed: \(r.format)") }
                guard chunk.withUnsafeBytes({ FrameRecord(bytes: $0) }) == r else { fatalError("a video record reads otherwise as video only") }
            }
            guard r.bytes.count == size, r.bytes.withUnsafeBytes({ FrameRecord(bytes: $0, audio: true) }) == r else {
                fatalError("a record does not read back as itself: \(r)")
            }
            records.append(r)
        }
        at += size
    }
    let timeline = MediaTimeline(clocks: ["1", nil, "1"]) { body in for (i, r) in records.enumerated() { body(i % 3, r) } }
    guard timeline.durationNanos >= 0, timeline.lastOffsetNanos >= 0 || records.isEmpty else {
        fatalError("timeline duration \(timeline.durationNanos), last offset \(timeline.lastOffsetNanos)")
    }
    for (i, r) in records.enumerated() {
        _ = timeline.isBeyondSpan(media: timeline.mediaNanos(of: r, track: i % 3), offset: r.captureOffsetNanos)
        _ = timeline.captureOffset(atOrAfter: r.captureOffsetNanos)
    }
    return 0
}
