import CFrameServer

// The fields of the four shared structures, with offsets and sizes taken from
// CFrameServer.h through MemoryLayout (never typed by hand), for tests that write
// chosen values into a stream's files.

/// A structure of the shared layout.
enum SharedStructure: String, Sendable {
    case control = "fs_control", slot = "fs_slot_ctl", consumer = "fs_consumer", frame = "fs_frame"

    /// Bytes of one record, as the C compiler lays it out.
    var size: Int {
        switch self {
        case .control: MemoryLayout<fs_control>.size
        case .slot: MemoryLayout<fs_slot_ctl>.size
        case .consumer: MemoryLayout<fs_consumer>.size
        case .frame: MemoryLayout<fs_frame>.size
        }
    }
}

/// One field of a shared structure: its byte range within its record.
struct SharedField: Sendable, CustomStringConvertible {
    enum Kind: Sendable { case unsigned, signed, text }

    let structure: SharedStructure
    let name: String
    let offset: Int
    let size: Int
    let kind: Kind

    var description: String { "\(structure.rawValue).\(name)" }

    /// An integer field (4 or 8 bytes).
    init<Root, Value: FixedWidthInteger>(_ structure: SharedStructure, _ name: String, _ path: KeyPath<Root, Value>) {
        self.init(structure: structure, name: name, offset: MemoryLayout<Root>.offset(of: path)!,
                  size: MemoryLayout<Value>.size, kind: Value.isSigned ? .signed : .unsigned)
    }

    /// A NUL-terminated character array.
    init<Root, Value>(text structure: SharedStructure, _ name: String, _ path: KeyPath<Root, Value>) {
        self.init(structure: structure, name: name, offset: MemoryLayout<Root>.offset(of: path)!,
                  size: MemoryLayout<Value>.size, kind: .text)
    }

    init(structure: SharedStructure, name: String, offset: Int, size: Int, kind: Kind) {
        self.structure = structure
        self.name = name
        self.offset = offset
        self.size = size
        self.kind = kind
    }

    /// The elements of an integer array (a C `uintN_t x[N]`, imported as a tuple) of
    /// `Element`s; `only` picks some of them.
    static func elements<Root, Value, Element: FixedWidthInteger>(_ structure: SharedStructure, _ name: String,
                                                                  _ path: KeyPath<Root, Value>, of: Element.Type,
                                                                  only: [Int]? = nil) -> [SharedField] {
        let start = MemoryLayout<Root>.offset(of: path)!
        let width = MemoryLayout<Element>.size
        return (only ?? Array(0..<MemoryLayout<Value>.size / width)).map {
            SharedField(structure: structure, name: "\(name)[\($0)]", offset: start + $0 * width, size: width, kind: .unsigned)
        }
    }
}

/// Every field of the four structures except the reserved padding.
enum SharedLayout {
    static let control: [SharedField] = [
        .init(.control, "magic", \fs_control.magic), .init(.control, "version", \fs_control.version),
        .init(.control, "header_size", \fs_control.header_size), .init(.control, "slot_count", \fs_control.slot_count),
        .init(.control, "max_consumers", \fs_control.max_consumers), .init(.control, "slot_ctl_size", \fs_control.slot_ctl_size),
        .init(.control, "consumer_size", \fs_control.consumer_size), .init(.control, "slot_ctl_offset", \fs_control.slot_ctl_offset),
        .init(.control, "consumer_offset", \fs_control.consumer_offset), .init(.control, "producer_pid", \fs_control.producer_pid),
        .init(.control, "producer_start_time", \fs_control.producer_start_time), .init(.control, "created_ns", \fs_control.created_ns),
        .init(.control, "epoch", \fs_control.epoch), .init(.control, "slot_stride", \fs_control.slot_stride),
        .init(.control, "latest", \fs_control.latest), .init(.control, "published", \fs_control.published),
        .init(.control, "dropped", \fs_control.dropped), .init(.control, "blocked_ns", \fs_control.blocked_ns),
        .init(.control, "lossless_mask", \fs_control.lossless_mask), .init(.control, "wake", \fs_control.wake),
        .init(.control, "state", \fs_control.state), .init(.control, "end_seq", \fs_control.end_seq),
        .init(.control, "attach_seq", \fs_control.attach_seq), .init(.control, "producer_waiting", \fs_control.producer_waiting),
        .init(.control, "min_free", \fs_control.min_free), .init(.control, "reclaimed", \fs_control.reclaimed),
        .init(.control, "live_max_held", \fs_control.live_max_held), .init(.control, "flags", \fs_control.flags),
        .init(text: .control, "name", \fs_control.name), .init(.control, "pool_size", \fs_control.pool_size),
        .init(.control, "last_publish_ns", \fs_control.last_publish_ns), .init(.control, "rate_num", \fs_control.rate_num),
        .init(.control, "rate_den", \fs_control.rate_den), .init(.control, "frame_wake", \fs_control.frame_wake),
        .init(.control, "sleepers", \fs_control.sleepers), .init(.control, "media", \fs_control.media),
    ]

    static let slot: [SharedField] = [
        .init(.slot, "holders", \fs_slot_ctl.holders), .init(.slot, "seq", \fs_slot_ctl.seq),
        .init(.slot, "epoch", \fs_slot_ctl.epoch), .init(.slot, "publish_ns", \fs_slot_ctl.publish_ns),
        .init(.slot, "producer_hold", \fs_slot_ctl.producer_hold),
    ]

    static let consumer: [SharedField] = [
        .init(.consumer, "pid", \fs_consumer.pid), .init(.consumer, "state", \fs_consumer.state),
        .init(.consumer, "start_time", \fs_consumer.start_time), .init(.consumer, "mode", \fs_consumer.mode),
        .init(.consumer, "flags", \fs_consumer.flags), .init(.consumer, "first_seq", \fs_consumer.first_seq),
        .init(.consumer, "attached_ns", \fs_consumer.attached_ns), .init(.consumer, "delivered", \fs_consumer.delivered),
        .init(.consumer, "missed", \fs_consumer.missed), .init(.consumer, "last_seq", \fs_consumer.last_seq),
        .init(.consumer, "held", \fs_consumer.held), .init(.consumer, "hold_since_ns", \fs_consumer.hold_since_ns),
        .init(text: .consumer, "name", \fs_consumer.name), .init(.consumer, "latency_sum_ns", \fs_consumer.latency_sum_ns),
        .init(.consumer, "stale", \fs_consumer.stale),
    ] + latencyBuckets

    /// The first and the last bucket of the latency histogram.
    static let latencyBuckets = SharedField.elements(.consumer, "latency_hist", \fs_consumer.latency_hist, of: UInt64.self,
                                                     only: [0, Int(FS_LATENCY_BUCKETS) - 1])

    static let frame: [SharedField] = [
        .init(.frame, "magic", \fs_frame.magic), .init(.frame, "version", \fs_frame.version),
        .init(.frame, "seq", \fs_frame.seq), .init(.frame, "epoch", \fs_frame.epoch),
        .init(.frame, "width", \fs_frame.width), .init(.frame, "height", \fs_frame.height),
        .init(.frame, "pix_fmt", \fs_frame.pix_fmt), .init(.frame, "plane_count", \fs_frame.plane_count),
    ] + SharedField.elements(.frame, "plane_offset", \fs_frame.plane_offset, of: UInt32.self)
      + SharedField.elements(.frame, "plane_stride", \fs_frame.plane_stride, of: UInt32.self)
      + SharedField.elements(.frame, "plane_size", \fs_frame.plane_size, of: UInt32.self) + [
        .init(.frame, "color_matrix", \fs_frame.color_matrix), .init(.frame, "color_range", \fs_frame.color_range),
        .init(.frame, "color_primaries", \fs_frame.color_primaries), .init(.frame, "color_transfer", \fs_frame.color_transfer),
        .init(.frame, "sar_num", \fs_frame.sar_num), .init(.frame, "sar_den", \fs_frame.sar_den),
        .init(.frame, "pts", \fs_frame.pts), .init(.frame, "time_base_num", \fs_frame.time_base_num),
        .init(.frame, "time_base_den", \fs_frame.time_base_den), .init(.frame, "duration", \fs_frame.duration),
        .init(.frame, "capture_ns", \fs_frame.capture_ns), .init(.frame, "flags", \fs_frame.flags),
        .init(.frame, "payload_size", \fs_frame.payload_size), .init(text: .frame, "pix_fmt_name", \fs_frame.pix_fmt_name),
        .init(.frame, "field_order", \fs_frame.field_order), .init(.frame, "chroma_location", \fs_frame.chroma_location),
        // Audio frames (PROTOCOL.md 4.6): mutated on an audio stream's slots (FileMutation.isAudio).
        .init(.frame, "media", \fs_frame.media), .init(.frame, "sample_rate", \fs_frame.sample_rate),
        .init(.frame, "channels", \fs_frame.channels), .init(.frame, "channel_order", \fs_frame.channel_order),
        .init(.frame, "nb_samples", \fs_frame.nb_samples), .init(.frame, "channel_mask", \fs_frame.channel_mask),
    ]

    /// The fields only an audio frame gives meaning to (and the stream's kind).
    static let audioFieldNames: Set<String> = ["media", "sample_rate", "channels", "channel_order", "nb_samples", "channel_mask"]

    /// A field by structure and name (for compound mutations and the tests' own reads).
    static func field(_ structure: SharedStructure, _ name: String) -> SharedField {
        let all: [SharedField] = switch structure {
        case .control: control
        case .slot: slot
        case .consumer: consumer
        case .frame: frame
        }
        return all.first { $0.name == name }!
    }
}
