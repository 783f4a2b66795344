// libFuzzer target: a recording's frame record (the 112 bytes replay reads from each packet's
// side data, docs/RECORDING.md) and the timeline replay builds from records. Input: records
// back to back (the last one zero-padded). Oracle: no trap reading any of them, a record that
// parses describes a frame whose format validates, and the timeline's duration and span are
// sane for whatever offsets and timestamps the records carry (a damaged record is beyond the span).
@testable import FrameRecording
import FrameServer

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRecord(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: count)
    var records: [FrameRecord] = []
    var at = 0
    while at < count {
        var chunk = [UInt8](bytes[at..<min(count, at + FrameRecord.size)])
        chunk += [UInt8](repeating: 0, count: FrameRecord.size - chunk.count)
        if let r = chunk.withUnsafeBytes({ FrameRecord(bytes: $0) }) {
            guard (try? r.format.validate()) != nil else { fatalError("a record of an invalid format parsed: \(r.format)") }
            records.append(r)
        }
        at += FrameRecord.size
    }
    let timeline = MediaTimeline { body in for (i, r) in records.enumerated() { body(i % 3, r) } }
    guard timeline.durationNanos >= 0, timeline.lastOffsetNanos >= 0 || records.isEmpty else {
        fatalError("timeline duration \(timeline.durationNanos), last offset \(timeline.lastOffsetNanos)")
    }
    for (i, r) in records.enumerated() {
        _ = timeline.isBeyondSpan(media: timeline.mediaNanos(of: r, track: i % 3), offset: r.captureOffsetNanos)
        _ = timeline.captureOffset(atOrAfter: r.captureOffsetNanos)
    }
    return 0
}
