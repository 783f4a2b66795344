import CFFmpeg
import FrameServer
import Glibc

/// A recording written as several files (docs/RECORDING.md, "Segments"): the first at the
/// path asked for, each later one beside it with its number before the extension (rec.nut,
/// rec.001.nut, rec.002.nut, ...). Every file is a whole NUT file with its own header and
/// index; they share one series (a random id in each header), so a reader never takes a
/// file left by another recording for the next part of this one.
///
/// Why: libavformat's NUT muxer keeps its syncpoint index in memory until the file closes
/// (a syncpoint at least every 32 KB written, and before every larger frame): about 7 MB per
/// GiB of small frames (make soak's 64x48 FFV1, 1.07 KB each). One file per
/// `RecordSettings.segmentBytes` bounds that, where one file of a recording that lasts days
/// would grow without end.
public enum RecordingSegments {
    /// The most files one recording may have (segment numbers are three digits or more; this
    /// bounds what a reader opens).
    public static let maxCount = 100_000

    /// The path of segment `n` of the recording whose first file is `first` (n = 0: `first`).
    public static func path(_ first: String, segment n: Int) -> String {
        guard n > 0 else { return first }
        let number = String(n).count >= 3 ? String(n) : String(repeating: "0", count: 3 - String(n).count) + String(n)
        return inserting(".\(number)", beforeExtensionOf: first)
    }

    /// `path` with `infix` before its extension, the base name's last '.' part (rec.nut,
    /// ".001": rec.001.nut; after the name when it has none: "rec" or ".hidden").
    static func inserting(_ infix: String, beforeExtensionOf path: String) -> String {
        let slash = path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex
        guard let dot = path[slash...].lastIndex(of: "."), dot > slash else { return path + infix }
        return "\(path[..<dot])\(infix)\(path[dot...])"
    }

    /// A new series id: 16 hex digits from the system's random source.
    static func newSeries() -> String {
        let hex = String(UInt64.random(in: .min ... .max), radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// One file of a recording, as its header describes it.
    struct Segment {
        var path: String
        /// The capture offset (ns) of its first packet; Int64.min for the first file.
        var start: Int64
    }

    /// The files after `first` that belong to its recording, in order: each exists and is a
    /// NUT file of series `series` numbered as its place, with the same tracks (`names`). The
    /// search stops at the first that is not; `stop` says why when a file is there that is not
    /// the next (another recording's, or damaged), or the next is missing and one after it is
    /// there. (Starts need not increase: a capture clock may go back.)
    static func followers(of first: String, series: String, names: [String]) -> (found: [Segment], stop: String?) {
        var found: [Segment] = []
        for n in 1..<maxCount {
            let path = path(first, segment: n)
            guard access(path, F_OK) == 0 else {
                let after = Self.path(first, segment: n + 1)
                return (found, access(after, F_OK) == 0 ? "\(path) is missing (\(after) is there): the recording ends before it" : nil)
            }
            guard let start = Self.start(of: path, segment: n, series: series, names: names) else {
                return (found, "\(path) is not the next file of \(first) (another recording's, or damaged): not played")
            }
            found.append(Segment(path: path, start: start))
        }
        return (found, nil)
    }

    /// Segment `n`'s first capture offset, read from its header, when the header says it is
    /// segment `n` of `series` with tracks named `names`.
    private static func start(of path: String, segment n: Int, series: String, names: [String]) -> Int64? {
        var ic: UnsafeMutablePointer<AVFormatContext>?
        guard avformat_open_input(&ic, path, nil, nil) >= 0, let c = ic else { return nil }
        defer { avformat_close_input(&ic) }
        let tag = RecordingReader.tag
        guard tag(c.pointee.metadata, RecordingKeys.series) == series,
              tag(c.pointee.metadata, RecordingKeys.segment) == String(n),
              let start = tag(c.pointee.metadata, RecordingKeys.segmentStart).flatMap({ Int64($0) }),
              Int(c.pointee.nb_streams) == names.count else { return nil }
        for (i, name) in names.enumerated() where tag(c.pointee.streams[i]!.pointee.metadata, RecordingKeys.stream) != name {
            return nil
        }
        return start
    }
}
