import CFrameServer
import Glibc

/// A small, fast, seedable generator (SplitMix64), so that every fuzz input can be
/// reproduced from a seed.
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What a field is set to.
enum FieldValue: Sendable, CustomStringConvertible {
    case zero, allOnes, signedMax, signedMin, plusOne, minusOne
    case number(UInt64)
    /// A number that only means something on an audio stream (a sample format code).
    case audio(UInt64)
    case text(String)

    var isAudioCase: Bool { if case .audio = self { true } else { false } }

    var description: String {
        switch self {
        case .zero: "0"
        case .allOnes: "-1"
        case .signedMax: "max"
        case .signedMin: "min"
        case .plusOne: "+1"
        case .minusOne: "-1 off"
        case .number(let n), .audio(let n): "0x" + String(n, radix: 16)
        case .text(let s): s.count > 20 ? "\"\(s.prefix(4))...\" (\(s.count) chars, no NUL)" : "\"\(s)\""
        }
    }

    static let integers: [FieldValue] = [.zero, .allOnes, .signedMax, .signedMin, .plusOne, .minusOne]

    /// Texts for a character array of `size` bytes: empty, unterminated, other real
    /// formats (wider samples than the slot was sized for), unknown, a path.
    static func texts(size: Int) -> [FieldValue] {
        [.text(""), .text(String(repeating: "A", count: size)), .text("yuv444p16le"), .text("rgba64le"),
         .text("gray"), .text("nonexistent_fmt"), .text("../../x"), .text("good")]
    }

    /// The bytes for `field`, whose current value is `current`.
    func bytes(for field: SharedField, current: UInt64) -> [UInt8] {
        if case .text(let s) = self {
            return Array((Array(s.utf8) + [UInt8](repeating: 0, count: field.size)).prefix(field.size))
        }
        let mask: UInt64 = field.size >= 8 ? .max : (1 << UInt64(8 * field.size)) - 1
        let value: UInt64 = switch self {
        case .zero: 0
        case .allOnes: mask
        case .signedMax: mask >> 1
        case .signedMin: (mask >> 1) + 1
        case .plusOne: (current &+ 1) & mask
        case .minusOne: (current &- 1) & mask
        case .number(let n), .audio(let n): n & mask
        case .text: 0
        }
        return (0..<field.size).map { UInt8(truncatingIfNeeded: value >> UInt64(8 * $0)) }
    }
}

/// Which of a stream's files.
enum StreamFile: String, Sendable { case control = "ctl", pool }

/// One change to a stream's files, described symbolically (`symbol`: the same for every
/// run, the key of a crash signature); `apply` returns what it actually wrote.
enum FileMutation: Sendable {
    /// Fields of one record (several for a compound change): in the newest frame's slot for
    /// slot records, in every slot's frame header, in consumer entry 0 for consumers.
    case fields([(SharedField, FieldValue)])
    /// 1 to 32 random bytes at a random offset: anywhere in the file, or (pool) in a frame header.
    case randomBytes(StreamFile, headerOnly: Bool)
    /// The file cut (or grown) to a length.
    case truncate(StreamFile, Length)
    /// A FIFO in place of the control segment.
    case fifoControl

    /// A length relative to a file and its layout.
    enum Length: String, Sendable {
        case zero = "0", one = "1", headerMinusOne = "header-1", header = "header", recordMinusOne = "first record-1",
             sizeMinusOne = "size-1", half = "size/2", grown = "size+4096"
    }

    var symbol: String {
        switch self {
        case .fields(let changes): changes.map { "\($0.0) = \($0.1)" }.joined(separator: ", ")
        case .randomBytes(let file, let header): "random bytes in \(file.rawValue)\(header ? " frame header" : "")"
        case .truncate(let file, let length): "\(file.rawValue) truncated to \(length.rawValue)"
        case .fifoControl: "FIFO in place of ctl"
        }
    }

    /// Whether the change is to frame headers (applied to every slot).
    /// A change an audio stream's files must survive (its own fields, the issue-25 cases):
    /// the fuzzer runs it on a stream of `-f lavfi -i sine` instead of the test pattern.
    var isAudio: Bool {
        if case .fields(let changes) = self {
            return changes.contains { SharedLayout.audioFieldNames.contains($0.0.name) } || changes.contains { $0.1.isAudioCase }
        }
        return false
    }

    var isFrameHeader: Bool {
        if case .fields(let changes) = self { return changes.contains { $0.0.structure == .frame } }
        return false
    }

    /// Whether a consumer attached before the change would meet it (worth attaching one).
    var reachesConsumers: Bool {
        switch self {
        case .fields(let changes): changes.contains { $0.0.structure == .consumer || $0.0.structure == .frame }
        case .randomBytes(let file, _), .truncate(let file, _): file == .pool
        case .fifoControl: false
        }
    }

    /// Applies the change to `files`; returns what was written, or why nothing was.
    func apply(to files: StreamFiles, rng: inout SplitMix64) -> String {
        switch self {
        case .fields(let changes): return changes.map { applyField($0.0, $0.1, files) }.joined(separator: "; ")
        case .randomBytes(let file, let headerOnly): return applyRandom(file, headerOnly: headerOnly, files, &rng)
        case .truncate(let file, let length): return applyTruncate(file, length, files)
        case .fifoControl:
            unlink(files.control)
            return mkfifo(files.control, 0o600) == 0 ? "mkfifo \(files.control)" : "mkfifo failed: errno \(errno)"
        }
    }

    /// Sets `field` (every slot's, for a frame header) to `value`.
    private func applyField(_ field: SharedField, _ value: FieldValue, _ files: StreamFiles) -> String {
        guard field.structure == .frame else { return applyField(field, value, files, index: field.structure == .slot ? files.latestSlot : 0) }
        let slots = min(Int(files.read(SharedLayout.field(.control, "slot_count")) ?? 1), Int(FS_MAX_SLOTS))
        return (0..<max(slots, 1)).map { applyField(field, value, files, index: $0) }.joined(separator: "; ")
    }

    private func applyField(_ field: SharedField, _ value: FieldValue, _ files: StreamFiles, index: Int) -> String {
        guard let path = files.file(of: field.structure), let base = files.recordBase(field.structure, index: index) else {
            return "\(field): file not found"
        }
        let current = files.read(field, index: index) ?? 0
        let bytes = value.bytes(for: field, current: current)
        let at = base + field.offset
        let ok = writeBytes(bytes, to: path, at: at)
        let shown = field.kind == .text ? "\(value)" : "0x" + String(bytes.reversed().reduce(0) { $0 << 8 | UInt64($1) }, radix: 16)
        return "\(field)[\(index)] \(current) -> \(shown) at \(path.split(separator: "/").last!)+\(at)\(ok ? "" : " (write failed)")"
    }

    private func applyRandom(_ file: StreamFile, headerOnly: Bool, _ files: StreamFiles, _ rng: inout SplitMix64) -> String {
        guard let path = file == .pool ? files.currentPool : files.control, let size = regularFileSize(path), size > 0 else {
            return "\(file.rawValue): file not found"
        }
        let count = Int.random(in: 1...32, using: &rng)
        var offset = Int.random(in: 0..<size, using: &rng)
        if headerOnly, let stride = files.read(SharedLayout.field(.control, "slot_stride")), stride > 0 {
            offset = files.latestSlot * Int(stride) + Int.random(in: 0..<SharedStructure.frame.size, using: &rng)
        }
        let bytes = (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
        writeBytes(bytes, to: path, at: offset)
        return "\(count) bytes at \(path.split(separator: "/").last!)+\(offset): \(bytes.map { String($0, radix: 16) }.joined(separator: " "))"
    }

    private func applyTruncate(_ file: StreamFile, _ length: Length, _ files: StreamFiles) -> String {
        guard let path = file == .pool ? files.currentPool : files.control, let size = regularFileSize(path) else {
            return "\(file.rawValue): file not found"
        }
        let header = file == .pool ? SharedStructure.frame.size : SharedStructure.control.size
        let firstRecord = file == .pool ? Int(files.read(SharedLayout.field(.control, "slot_stride")) ?? 1)
            : header + SharedStructure.slot.size
        let to: Int = switch length {
        case .zero: 0
        case .one: 1
        case .headerMinusOne: header - 1
        case .header: header
        case .recordMinusOne: firstRecord - 1
        case .sizeMinusOne: size - 1
        case .half: size / 2
        case .grown: size + 4096
        }
        let ok = Glibc.truncate(path, off_t(to)) == 0
        return "truncate \(path.split(separator: "/").last!) \(size) -> \(to)\(ok ? "" : " failed: errno \(errno)")"
    }

    /// Every mutation the fuzzer rotates through, in a fixed order.
    static let catalogue: [FileMutation] = {
        var all: [FileMutation] = []
        for field in SharedLayout.control + SharedLayout.slot + SharedLayout.consumer + SharedLayout.frame {
            let values = field.kind == .text ? FieldValue.texts(size: field.size) : FieldValue.integers
            all += values.map { .fields([(field, $0)]) }
        }
        all += compounds + audioCompounds
        for file in [StreamFile.control, .pool] {
            all += [FileMutation.Length.zero, .one, .headerMinusOne, .header, .recordMinusOne, .sizeMinusOne, .half, .grown]
                .map { .truncate(file, $0) }
        }
        all.append(.fifoControl)
        // Random bytes: about one mutation in twelve.
        for i in 0..<(all.count / 12) {
            all.append(.randomBytes(i % 3 == 0 ? .control : .pool, headerOnly: i % 3 == 1))
        }
        return all
    }()

    /// Pixel format code 0 with a name of wider samples than the planes were made for
    /// (yuv444p16le on yuv420p planes) and the largest height: a reader that takes the rows
    /// from FFmpeg without `FrameHeader.plane(_:holds:rowBytes:)` reads megabytes past the pool.
    static let wideSamplesUnderCodeZero: FileMutation = .fields([
        (SharedLayout.field(.frame, "pix_fmt"), .zero), (SharedLayout.field(.frame, "pix_fmt_name"), .text("yuv444p16le")),
        (SharedLayout.field(.frame, "height"), .number(16384)),
    ])

    /// Issue 25's bad audio headers: sizes that overflow, no channels or 255, a sample format
    /// code of another kind (a pixel format's) or a name that is not a sample format's.
    static let audioCompounds: [FileMutation] = {
        let f = { (n: String) in SharedLayout.field(.frame, n) }
        return [
            .fields([(f("channels"), .zero)]),
            .fields([(f("channels"), .number(255)), (f("channel_mask"), .zero)]),
            .fields([(f("pix_fmt"), .audio(UInt64(FS_PIX_YUV420P)))]),
            .fields([(f("pix_fmt"), .audio(UInt64(FS_SAMPLE_S16))), (f("pix_fmt_name"), .text("yuv420p"))]),
            .fields([(f("pix_fmt"), .audio(UInt64(FS_SAMPLE_DBLP))), (f("pix_fmt_name"), .text("dblp"))]),
            .fields([(f("nb_samples"), .allOnes), (f("plane_stride[0]"), .allOnes), (f("plane_size[0]"), .allOnes)]),
            .fields([(f("nb_samples"), .number(1 << 20)), (f("channels"), .number(64))]),
            .fields([(f("media"), .number(UInt64(FS_MEDIA_VIDEO))), (f("width"), .number(64)), (f("height"), .number(48))]),
        ]
    }()

    /// The combinations issues 9 and 27 found crashes with, which no single field reaches.
    static let compounds: [FileMutation] = {
        let f = { (s: SharedStructure, n: String) in SharedLayout.field(s, n) }
        return [
            .fields([(f(.frame, "pix_fmt"), .zero), (f(.frame, "pix_fmt_name"), .text("yuv420p")), (f(.frame, "height"), .number(16384))]),
            .fields([(f(.frame, "pix_fmt"), .zero), (f(.frame, "pix_fmt_name"), .text("rgba64le"))]),
            // Issue 27 item 2: FFmpeg's geometry for the name read past the pool (web previews, snapshots, sinks).
            .fields([(f(.frame, "pix_fmt"), .zero), (f(.frame, "pix_fmt_name"), .text("yuv444p16le"))]),
            wideSamplesUnderCodeZero,
            .fields([(f(.frame, "plane_stride[0]"), .allOnes), (f(.frame, "height"), .allOnes)]),
            .fields([(f(.frame, "pts"), .signedMax), (f(.frame, "duration"), .signedMax)]),
            .fields([(f(.frame, "width"), .number(65535)), (f(.frame, "height"), .number(65535))]),
            .fields([(f(.control, "latest"), .number(1 << 8 | 0xff))]),
            .fields([(f(.control, "latest"), .number(UInt64(Int(FS_MAX_SLOTS)) | 1 << 8))]),
            .fields([(f(.control, "slot_count"), .number(UInt64(Int(FS_MAX_SLOTS)))), (f(.control, "consumer_offset"), .number(512))]),
        ]
    }()
}
