import CFrameServer
import Glibc

/// One consumer as the stream's shared statistics describe it.
public struct ConsumerSnapshot: Sendable, Encodable {
    public let index: Int
    public let pid: Int32
    public let name: String
    public let mode: String
    public let state: String
    public let delivered: UInt64
    public let missed: UInt64
    public let stale: UInt64
    /// Frames the source dropped just before frames this consumer got (a live source's drops).
    public let sourceDropped: UInt64
    public let lastSequence: UInt64
    /// Frames published that this consumer has not been handed yet.
    public let lag: UInt64
    public let held: UInt64
    /// How long the oldest current hold has lasted, in ms (0 when holding nothing).
    public let holdMillis: Double
    public let heldSlots: [Int]
    public let latencyHistogramMicros: [UInt64]
    public let meanLatencyMicros: Double
}

extension ConsumerSnapshot {
    /// What `latencyPercentileMicros` returns when the percentile falls in the histogram's
    /// last bucket, which has no upper bound (latencies of 100 ms and more).
    public static let latencyUnbounded = UInt64.max
    /// Where the last, open latency bucket begins, in microseconds.
    public static let latencyUnboundedFromMicros: UInt64 = fs_latency_bucket_bound(FS_LATENCY_BUCKETS - 2)

    /// The `p` quantile (0...1) of this consumer's publish -> acquire latency, as the upper
    /// bound in microseconds of the histogram bucket that contains it (`fs_latency_bucket`:
    /// 1 us steps under 100 us, so 13 means "12 us"; 100 us steps under 1 ms, ...);
    /// `latencyUnbounded` when it falls in the last bucket; nil before the first frame.
    public func latencyPercentileMicros(_ p: Double) -> UInt64? {
        Self.latencyPercentileMicros(p, histogram: latencyHistogramMicros)
    }

    /// `latencyPercentileMicros` for any histogram laid out as `fs_consumer.latency_hist`.
    public static func latencyPercentileMicros(_ p: Double, histogram: [UInt64]) -> UInt64? {
        let total = histogram.reduce(0, &+)
        guard total > 0 else { return nil }
        // The rank of the sample at quantile p (1-based): at least the first sample.
        let rank = max(1, UInt64((min(max(p, 0), 1) * Double(total)).rounded(.up)))
        var seen: UInt64 = 0
        for (bucket, count) in histogram.enumerated() {
            seen &+= count
            if seen >= rank {
                return bucket >= Int(FS_LATENCY_BUCKETS) - 1 ? latencyUnbounded : fs_latency_bucket_bound(UInt32(bucket))
            }
        }
        return latencyUnbounded
    }
}

/// Whether a stream's producer runs (`StreamSnapshot.state` holds the raw value, which
/// `ls --json` prints).
public enum StreamState: String, Sendable, Encodable {
    case running, ended
    /// The producer is gone and left its files.
    case dead
}

/// What a slot is doing (`SlotSnapshot.state` holds the raw value).
public enum SlotState: String, Sendable, Encodable {
    case free, writing, held
    /// The producer's zero-copy decoder keeps it (`producer_hold`) and no consumer holds it:
    /// a picture it decodes or keeps as a reference for later frames, published or not yet.
    case reference
    /// Published, held by nobody.
    case ready

    /// As inspect shows it: `decoder reference` for `reference`, else the raw value.
    public var label: String { self == .reference ? "decoder reference" : rawValue }
}

extension StreamSnapshot {
    /// `state` as an enum.
    public var streamState: StreamState { StreamState(rawValue: state) ?? .dead }
}

extension SlotSnapshot {
    /// `state` as an enum.
    public var slotState: SlotState { SlotState(rawValue: state) ?? .free }
}

extension ConsumerSnapshot {
    /// `mode` as an enum (the names `ConsumerMode.name` gives).
    public var consumerMode: ConsumerMode? { [ConsumerMode.live, .lossless, .monitor].first { $0.name == mode } }
    /// `state` as an enum (the names `ConsumerState.name` gives).
    public var consumerState: ConsumerState? { [ConsumerState.free, .claimed, .active, .closing].first { $0.name == state } }
}

/// One slot of the pool.
public struct SlotSnapshot: Sendable, Encodable {
    public let index: Int
    /// free, writing (a copy being written), held, reference (kept by the producer's
    /// decoder, published or not yet, held by no consumer) or ready (published, held by nobody).
    public let state: String
    public let sequence: UInt64
    public let epoch: UInt64
    public let holders: [Int]
    public let ageMillis: Double
}

/// Everything the shared memory says about one stream, read without attaching.
///
/// A monitor maps the control segment read-only: it takes no consumer entry, holds no
/// slot and never slows the pipeline.
public struct StreamSnapshot: Sendable, Encodable {
    public let name: String
    public let producerPID: Int32
    /// What the producer calls itself (`produce in.mp4`, `filter blur=4 -> soft`).
    public let producerName: String
    /// running, ended, or dead (the producer is gone and left its files).
    public let state: String
    public let liveSource: Bool
    /// Where the planes live: "host" or "cuda" (PROTOCOL.md 4.5).
    public let memory: String
    /// What the stream carries: "video" or "audio" (PROTOCOL.md 4.6).
    public let media: String
    /// The CUDA device (nvidia-smi's UUID) of a CUDA stream.
    public let device: String?
    public let slots: Int
    /// Bytes per slot: in the pool file (host), or in the device allocation (cuda).
    public let slotBytes: UInt64
    public let epoch: UInt64
    public let published: UInt64
    public let dropped: UInt64
    public let minFreeSlots: UInt64
    public let freeSlots: Int
    public let reclaimedConsumers: UInt64
    /// Lossless consumers the producer's stall timeout demoted to live.
    public let demotedConsumers: UInt64
    public let blockedMillis: Double
    public let nominalRate: Rational?
    public let format: String?
    public let lastSequence: UInt64
    public let consumers: [ConsumerSnapshot]
    public let slotTable: [SlotSnapshot]
    /// The stream ended and its files are gone: this is how a monitor last saw it (see `RecentStreams`).
    public var vanished = false

    /// Reads stream `name` from `directory`.
    public static func read(_ name: String, in directory: RuntimeDirectory) throws(InspectionError) -> StreamSnapshot {
        try inspect(name, in: directory).snapshot
    }

    /// Reads stream `name`, with one warning per consumer entry skipped because its mode
    /// or state is none of the protocol's values.
    ///
    /// Maps the control segment read-only through `ControlSegment` (validated counts and
    /// offsets, checked slot indices) and guarded against truncation: a segment truncated
    /// while it is read throws `.segment(.truncated)` instead of killing the monitor.
    public static func inspect(_ name: String, in directory: RuntimeDirectory) throws(InspectionError)
        -> (snapshot: StreamSnapshot, warnings: [String]) {
        let control: ControlSegment
        do { control = try ControlSegment.open(directory.controlPath(name), writable: false) } catch {
            if case .system(_, _, let e) = error, e == .noSuchFileOrDirectory {
                throw .noStream(name, directory: directory.path)
            }
            throw .segment(error)
        }
        let c = control.header
        let stats = control.statistics
        let alive = control.producer.isAlive
        let now = monotonicNanos()
        let latest = control.latestWord
        let lastSeq = latest >> 8
        let (slotTable, heldBy, free) = readSlots(control, now: now)
        var warnings: [String] = []
        var consumers: [ConsumerSnapshot] = []
        for i in 0..<Int(FS_MAX_CONSUMERS) where control.consumerPID(i) != 0 {
            let e = control.consumer(i).pointee
            guard let (mode, state) = entryNames(control, i) else {
                warnings.append("\(control.path): consumer entry \(i) has mode \(e.mode) and state \(e.state); entry skipped")
                continue
            }
            consumers.append(ConsumerSnapshot(e, index: i, mode: mode, state: state, lossless: control.consumerMode(i) == .lossless,
                                              lastPublished: lastSeq, heldSlots: heldSlots(heldBy[i] ?? [], entry: e), now: now))
        }
        let format = try? latestFormat(control, stream: name, in: directory)
        do { try control.segment.checkIntact() } catch { throw .segment(error) }
        let snapshot = StreamSnapshot(
            name: control.streamName, producerPID: c.pointee.producer_pid, producerName: readCString(c.pointee.producer_name),
            state: (!alive ? StreamState.dead : control.ended ? .ended : .running).rawValue,
            liveSource: control.liveSource, memory: control.memory.kind, media: control.media.description,
            device: control.memory.device, slots: Int(control.slotCount),
            slotBytes: control.memory == .host ? c.pointee.slot_stride : c.pointee.device_slot_stride, epoch: control.epoch,
            published: stats.published, dropped: stats.dropped, minFreeSlots: stats.minFree, freeSlots: free,
            reclaimedConsumers: stats.reclaimed, demotedConsumers: stats.demoted, blockedMillis: Double(stats.blockedNanos) / 1e6,
            nominalRate: control.nominalRate, format: format, lastSequence: lastSeq,
            consumers: consumers, slotTable: slotTable)
        return (snapshot, warnings)
    }

    /// The slots a consumer holds: of those with its holder bit, the frames it was handed
    /// (up to its last sequence); the others are reserved for it and not handed yet (a
    /// lossless consumer's lag), which it does not hold.
    private static func heldSlots(_ marked: [(slot: Int, seq: UInt64)], entry e: fs_consumer) -> [Int] {
        marked.filter { $0.seq != 0 && $0.seq <= e.last_seq }.map(\.slot)
    }

    /// Entry `i`'s mode and state as monitors print them, nil when they are none of the
    /// protocol's. An entry still registering (FREE or CLAIMED with a pid, mode 0) is
    /// `-`/`attaching`, not a monitor and not a bad entry.
    private static func entryNames(_ control: ControlSegment, _ i: Int) -> (mode: String, state: String)? {
        guard let state = control.consumerState(i) else { return nil }
        if let mode = control.consumerMode(i) { return (mode.name, state.name) }
        let attaching = fs_load_u32(&control.consumer(i).pointee.mode) == 0 && (state == .free || state == .claimed)
        return attaching ? ("-", "attaching") : nil
    }

    /// The slot table, the published slots whose holder bit each consumer has (with their
    /// sequence numbers: held, or reserved for it and not handed yet), and how many slots are free.
    private static func readSlots(_ control: ControlSegment, now: UInt64) -> ([SlotSnapshot], [Int: [(slot: Int, seq: UInt64)]], Int) {
        var slotTable: [SlotSnapshot] = []
        var heldBy: [Int: [(slot: Int, seq: UInt64)]] = [:]
        var free = 0
        for i in 0..<control.slotCount {
            let s = control.slot(i)
            let h = control.holders(i)
            let holders = (0..<Int(FS_MAX_CONSUMERS)).filter { h & (1 << UInt64($0)) != 0 }
            let seq = s.pointee.seq
            if h & FS_HOLDER_WRITER == 0 { for c in holders { heldBy[c, default: []].append((Int(i), seq)) } }
            let producerHold = control.producerHolds(i)
            // A decoder's slot carries producer_hold from its lease on, before and after it is published.
            let writing = h & FS_HOLDER_WRITER != 0
            let state: SlotState = writing && producerHold ? .reference : writing ? .writing : !holders.isEmpty ? .held
                : producerHold ? .reference : seq != 0 ? .ready : .free
            if fs_slot_is_free(s) != 0 { free += 1 }
            let published = s.pointee.publish_ns
            slotTable.append(SlotSnapshot(index: Int(i), state: state.rawValue, sequence: seq, epoch: s.pointee.epoch, holders: holders,
                                          ageMillis: published == 0 || published > now ? 0 : Double(now - published) / 1e6))
        }
        return (slotTable, heldBy, free)
    }

    /// The newest frame's format as monitors print it; nil when there is none or its
    /// header does not validate. (A monitor's read may race with a rewrite; display only.)
    private static func latestFormat(_ control: ControlSegment, stream: String,
                                     in directory: RuntimeDirectory) throws(SegmentError) -> String? {
        guard let (seq, slot) = try control.latest() else { return nil }
        let epoch = control.slot(slot).pointee.epoch
        let (pool, slotBytes) = try Segment.openPool(directory.poolPath(stream, epoch: epoch), slotCount: control.slotCount)
        let raw = pool.frameHeader(slot: slot, slotBytes: slotBytes)
        // A CUDA slot's planes are in the device allocation: bounded by its stride, from byte 0 (4.5).
        let cuda = control.memory != .host
        guard !cuda || epoch == control.epoch else { return nil }   // an older epoch's device stride is not known
        let planeBytes = cuda ? Int(clamping: control.header.pointee.device_slot_stride) : slotBytes
        guard !pool.truncated, (try? FrameHeader.validate(raw, sequence: seq, slotBytes: planeBytes, planesFrom: cuda ? 0 : FrameFormat.headerSize,
                                                               media: control.media)) != nil
        else { return nil }
        let h = FrameHeader(raw)
        // An audio stream's: rate and sample format where a picture's size and format go, its
        // channel layout where the colour goes (48000Hz fltp stereo).
        if let audio = h.audioFormat { return "\(audio.sampleRate)Hz \(audio.sampleFormat) \(audio.layout)" }
        let c = h.description.color
        // As ffmpeg names a hardware frame's format: cuda(nv12).
        let format = cuda ? "\(control.memory.kind)(\(h.pixelFormatName))" : h.pixelFormatName
        return "\(h.width)x\(h.height) \(format) \(c.matrixName)/\(c.rangeName)"
    }

    /// Snapshots of every stream in `directory` (unreadable ones are skipped: see `scan`).
    public static func all(in directory: RuntimeDirectory) -> [StreamSnapshot] { scan(in: directory).streams }

    /// Snapshots of every stream in `directory`, and one line for each stream that could
    /// not be read (a bad value, a truncated or foreign file, another protocol version:
    /// `NAME  protocol v1 (this framesrv speaks v2)`) or consumer entry skipped.
    /// One bad stream never hides the others; nothing is printed here.
    public static func scan(in directory: RuntimeDirectory) -> (streams: [StreamSnapshot], warnings: [String]) {
        var streams: [StreamSnapshot] = []
        var warnings: [String] = []
        for name in directory.streamNames() {
            do {
                let (s, w) = try inspect(name, in: directory)
                streams.append(s)
                warnings += w
            } catch {
                // A stream whose producer removed its files between listing and reading is not an error.
                if case .noStream = error { continue }
                if case .segment(.versionMismatch(_, let found)) = error {
                    warnings.append("\(name)  protocol v\(found) (this framesrv speaks v\(FS_PROTOCOL_VERSION))")
                    continue
                }
                warnings.append("skipping stream '\(name)': \(error)")
            }
        }
        return (streams, warnings)
    }
}

extension ConsumerSnapshot {
    /// `heldSlots` as inspect lists them: runs as ranges, `0-3,7`.
    public var heldSlotsText: String { Self.ranges(heldSlots) }

    /// Slot numbers as ranges: `[0, 1, 2, 3, 7, 9, 10]` is `0-3,7,9-10`.
    public static func ranges(_ slots: [Int]) -> String {
        var runs: [(first: Int, last: Int)] = []
        for n in slots.sorted() {
            if let last = runs.last?.last, n <= last + 1 { runs[runs.count - 1].last = max(last, n) } else { runs.append((n, n)) }
        }
        return runs.map { $0.first == $0.last ? "\($0.first)" : "\($0.first)-\($0.last)" }.joined(separator: ",")
    }

    /// Entry `index` as read from the segment (`e` is a copy), with its validated mode and state.
    init(_ e: fs_consumer, index: Int, mode: String, state: String, lossless: Bool, lastPublished: UInt64,
         heldSlots: [Int], now: UInt64) {
        let hist = withUnsafeBytes(of: e.latency_hist) { Array($0.bindMemory(to: UInt64.self)) }
        let expectedNext = lossless && e.last_seq == 0 && e.first_seq > 0 ? e.first_seq - 1 : e.last_seq
        self.init(
            index: index, pid: e.pid, name: readCString(e.name), mode: mode, state: state,
            delivered: e.delivered, missed: e.missed, stale: e.stale, sourceDropped: e.source_dropped,
            lastSequence: e.last_seq,
            lag: lastPublished > expectedNext ? lastPublished - expectedNext : 0, held: e.held,
            holdMillis: e.hold_since_ns == 0 || e.hold_since_ns > now ? 0 : Double(now - e.hold_since_ns) / 1e6,
            heldSlots: heldSlots, latencyHistogramMicros: hist,
            meanLatencyMicros: e.delivered == 0 ? 0 : Double(e.latency_sum_ns) / Double(e.delivered) / 1e3)
    }
}

extension RuntimeDirectory {
    /// Removes the files of every stream whose producer is gone; returns what it removed.
    ///
    /// A stream is orphaned when its lock file can be taken; `clean` then holds that lock
    /// while it removes the files, so a producer starting at the same moment either
    /// waits for it or finds a clean slate.
    public func removeOrphans() -> [String] {
        var removed: [String] = []
        let names = Set(entries().compactMap { Self.stream(ofFile: $0) })
        for stream in names.sorted() {
            guard let lock = try? FileLock.tryExclusive(lockPath(stream)) else { continue }
            for f in files(of: stream) where f != lockPath(stream) && (try? removeFile(f)) != nil { removed.append(f) }
            removed.append(lockPath(stream))
            lock.unlinkAndRelease()
        }
        return removed
    }
}
