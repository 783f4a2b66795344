import CFrameServer
import Glibc

/// How a consumer entry receives frames (`fs_consumer.mode`).
public enum ConsumerMode: UInt32, Sendable {
    case live = 1, lossless = 2, monitor = 3
    /// The name monitors print.
    public var name: String {
        switch self { case .live: "live"; case .lossless: "lossless"; case .monitor: "monitor" }
    }
}

/// Where a consumer entry is in its life (`fs_consumer.state`).
public enum ConsumerState: UInt32, Sendable {
    case free = 0, claimed = 1, active = 2, closing = 3
    /// The name monitors print.
    public var name: String {
        switch self { case .free: "free"; case .claimed: "attaching"; case .active: "active"; case .closing: "closing" }
    }
}

/// The control segment `NAME.ctl`: the one type that maps, validates, initialises, reads
/// and writes it. Producer, Consumer and StreamSnapshot go through it; nothing else
/// computes an address in the segment or touches one of its atomics.
///
/// Every count and offset it uses is a validated copy taken when the segment was opened
/// (or, for the producer, its own values): a value another process writes into the
/// segment later cannot move a record address. Every index read from shared memory is
/// checked against `slotCount` before use.
public final class ControlSegment: @unchecked Sendable {
    // @unchecked Sendable: the pointers never change; every cross-process access goes
    // through an accessor below with the ordering its SYNC comment names.
    let segment: Segment
    /// The segment's header.
    let header: UnsafeMutablePointer<fs_control>
    /// Slots of the pool (validated at open, or the producer's own count).
    let slotCount: UInt32
    /// Where the planes live (validated at open; a producer's own: host).
    let memory: StreamMemory
    /// What the stream carries (`fs_control.media`, const, validated: PROTOCOL.md 4.6).
    let media: MediaKind
    private let slotTable: UnsafeMutablePointer<fs_slot_ctl>
    private let consumerTable: UnsafeMutablePointer<fs_consumer>

    /// The file's path.
    var path: String { segment.path }

    private init(_ segment: Segment, slotCount: UInt32, memory: StreamMemory = .host, media: MediaKind = .video) {
        self.segment = segment
        self.slotCount = slotCount
        self.memory = memory
        self.media = media
        header = segment.base.assumingMemoryBound(to: fs_control.self)
        let slotsAt = MemoryLayout<fs_control>.size
        slotTable = (segment.base + slotsAt).assumingMemoryBound(to: fs_slot_ctl.self)
        consumerTable = (segment.base + slotsAt + Int(slotCount) * MemoryLayout<fs_slot_ctl>.size)
            .assumingMemoryBound(to: fs_consumer.self)
    }

    // MARK: Validation, mapping, initialisation

    /// The bytes a control segment of `slotCount` slots needs.
    static func requiredSize(slotCount: UInt32) -> Int { fs_control_size(slotCount) }

    /// Checks every header field PROTOCOL.md 4.1 fixes, the rate pair (0/0 or both >= 1),
    /// the memory kind with its fence table (4.5), and that the records lie inside `bytes`
    /// (the whole file). Returns the validated slot count.
    ///
    /// Pure: reads only `bytes` (unaligned loads), so a fuzz target can call it on any input.
    public static func validate(_ bytes: UnsafeRawBufferPointer, path: String) throws(SegmentError) -> Int {
        try validateLayout(bytes, path: path).slots
    }

    /// `validate`, with the memory kind it validated.
    static func validateLayout(_ bytes: UnsafeRawBufferPointer, path: String) throws(SegmentError) -> (slots: Int, memory: StreamMemory, media: MediaKind) {
        let headerSize = MemoryLayout<fs_control>.size
        guard bytes.count >= headerSize else { throw .tooSmall(path: path, size: bytes.count, needed: headerSize) }
        func u32(_ offset: Int) -> UInt32 { bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
        func check(_ field: String, _ offset: Int, _ expected: UInt32) throws(SegmentError) {
            let v = u32(offset)
            guard v == expected else { throw .badField(path: path, field: field, value: UInt64(v), expected: "\(expected)") }
        }
        let magic = u32(0)
        guard magic == FS_MAGIC_CONTROL else { throw .badMagic(path: path, found: magic) }
        let version = u32(4)
        guard version == FS_PROTOCOL_VERSION else { throw .versionMismatch(path: path, found: version) }
        try check("header_size", 8, UInt32(headerSize))
        let slots = u32(12)
        guard (1...FS_MAX_SLOTS).contains(slots) else {
            throw .badField(path: path, field: "slot_count", value: UInt64(slots), expected: "1..\(FS_MAX_SLOTS)")
        }
        try check("max_consumers", 16, FS_MAX_CONSUMERS)
        try check("slot_ctl_size", 20, UInt32(MemoryLayout<fs_slot_ctl>.size))
        try check("consumer_size", 24, UInt32(MemoryLayout<fs_consumer>.size))
        try check("slot_ctl_offset", 28, UInt32(headerSize))
        try check("consumer_offset", 32, UInt32(headerSize + Int(slots) * MemoryLayout<fs_slot_ctl>.size))
        let rateNum = bytes.loadUnaligned(fromByteOffset: Int(FS_OFF_CONTROL_RATE_NUM), as: UInt64.self)
        let rateDen = bytes.loadUnaligned(fromByteOffset: Int(FS_OFF_CONTROL_RATE_DEN), as: UInt64.self)
        guard (rateNum == 0) == (rateDen == 0) else {
            throw .badField(path: path, field: rateNum == 0 ? "rate_num" : "rate_den", value: 0,
                            expected: ">= 1 (the rate pair is 0/0 or both >= 1)")
        }
        let memory = try validateMemory(bytes, slots: slots, path: path)
        let mediaCode = u32(Int(FS_OFF_CONTROL_MEDIA))
        guard let media = MediaKind(rawValue: mediaCode) else {
            throw .badField(path: path, field: "media", value: UInt64(mediaCode), expected: "\(FS_MEDIA_VIDEO) (video) or \(FS_MEDIA_AUDIO) (audio)")
        }
        let needed = memory == .host ? requiredSize(slotCount: slots) : fs_control_size_cuda(slots)
        guard bytes.count >= needed else { throw .tooSmall(path: path, size: bytes.count, needed: needed) }
        return (Int(slots), memory, media)
    }

    /// `memory` and `fence_offset` (PROTOCOL.md 4.5): host with no fence table, or CUDA with
    /// its fence table right after the consumer table.
    private static func validateMemory(_ bytes: UnsafeRawBufferPointer, slots: UInt32, path: String) throws(SegmentError) -> StreamMemory {
        let kind = bytes.loadUnaligned(fromByteOffset: Int(FS_OFF_CONTROL_MEMORY), as: UInt32.self)
        let fenceOffset = bytes.loadUnaligned(fromByteOffset: Int(FS_OFF_CONTROL_FENCE_OFFSET), as: UInt32.self)
        switch kind {
        case FS_MEMORY_HOST:
            guard fenceOffset == 0 else {
                throw .badField(path: path, field: "fence_offset", value: UInt64(fenceOffset), expected: "0 (a host stream has no fence table)")
            }
            return .host
        case FS_MEMORY_CUDA:
            let expected = fs_control_fence_offset(slots)
            guard Int(fenceOffset) == expected else {
                throw .badField(path: path, field: "fence_offset", value: UInt64(fenceOffset), expected: "\(expected), after the consumer table")
            }
            let uuid = (0..<16).map { bytes.loadUnaligned(fromByteOffset: Int(FS_OFF_CONTROL_DEVICE_UUID) + $0, as: UInt8.self) }
            return .cuda(device: StreamMemory.deviceName(uuid))
        default:
            throw .badField(path: path, field: "memory", value: UInt64(kind), expected: "\(FS_MEMORY_HOST) (host) or \(FS_MEMORY_CUDA) (cuda)")
        }
    }

    /// Maps and validates the control segment at `path` (a reader: consumer or monitor).
    static func open(_ path: String, writable: Bool) throws(SegmentError) -> ControlSegment {
        try open(path, writable: writable, passingLeftovers: false)!
    }

    /// `open`, and with `passingLeftovers` (a consumer) nil for a segment of another
    /// protocol version whose producer is gone: a leftover to wait past. Its producer is
    /// read from the fixed identity prefix of this very mapping (design 4), so a file
    /// replaced meanwhile cannot lend it another producer.
    static func open(_ path: String, writable: Bool, passingLeftovers: Bool) throws(SegmentError) -> ControlSegment? {
        let segment = try Segment.open(path, writable: writable, minimumSize: MemoryLayout<fs_control>.size)
        let layout: (slots: Int, memory: StreamMemory, media: MediaKind)
        do { layout = try validateLayout(segment.bytes, path: path) } catch {
            if passingLeftovers, case .versionMismatch = error, !prefixProducerAlive(segment.bytes) { return nil }
            throw error
        }
        try segment.checkIntact()
        return ControlSegment(segment, slotCount: UInt32(layout.slots), memory: layout.memory, media: layout.media)
    }

    /// Whether the producer named by the fixed identity prefix of a control segment's
    /// `bytes` (pid @36, start time @40, the same in every protocol version) is running.
    /// Reads nothing else: for a segment of another version.
    static func prefixProducerAlive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard bytes.count >= 48 else { return false }
        let pid = bytes.loadUnaligned(fromByteOffset: 36, as: Int32.self)
        let start = bytes.loadUnaligned(fromByteOffset: 40, as: UInt64.self)
        guard case .running(let fd) = ProcessIdentity(pid: pid, startTime: start).watch() else { return false }
        FileDescriptor(adopting: fd).close()
        return true
    }

    /// What a producer writes into a new control segment.
    struct Setup {
        var stream: String
        var slots: Int
        var liveSource: Bool
        var liveMaxHeld: Int
        var nominalRate: Rational?
        var producerName: String
        var media: MediaKind = .video
    }

    /// Creates and initialises a control segment at `path` (the producer, before it renames
    /// the file into place: nobody else sees it yet, so plain stores suffice).
    static func create(_ path: String, _ s: Setup) throws(SegmentError) -> ControlSegment {
        let slots = UInt32(s.slots)
        let control = ControlSegment(try Segment.create(path, size: requiredSize(slotCount: slots)), slotCount: slots, media: s.media)
        let me = ProcessIdentity.current
        let c = control.header
        c.pointee.magic = FS_MAGIC_CONTROL
        c.pointee.version = FS_PROTOCOL_VERSION
        c.pointee.header_size = UInt32(MemoryLayout<fs_control>.size)
        c.pointee.slot_count = slots
        c.pointee.max_consumers = FS_MAX_CONSUMERS
        c.pointee.slot_ctl_size = UInt32(MemoryLayout<fs_slot_ctl>.size)
        c.pointee.consumer_size = UInt32(MemoryLayout<fs_consumer>.size)
        c.pointee.slot_ctl_offset = UInt32(MemoryLayout<fs_control>.size)
        c.pointee.consumer_offset = UInt32(MemoryLayout<fs_control>.size + s.slots * MemoryLayout<fs_slot_ctl>.size)
        c.pointee.producer_pid = me.pid
        c.pointee.producer_start_time = me.startTime
        c.pointee.created_ns = realtimeNanos()
        c.pointee.state = FS_STREAM_RUNNING
        c.pointee.min_free = UInt64(s.slots)
        c.pointee.live_max_held = UInt32(clamping: s.liveMaxHeld)
        c.pointee.flags = s.liveSource ? FS_CONTROL_LIVE_SOURCE : 0
        c.pointee.media = s.media.rawValue
        if let r = s.nominalRate, let reduced = Rational(rate: UInt64(max(r.num, 0)), UInt64(max(r.den, 0))) {
            c.pointee.rate_num = UInt64(reduced.num)
            c.pointee.rate_den = UInt64(reduced.den)
        }
        writeCString(s.stream, into: &c.pointee.name)
        writeCString(s.producerName, into: &c.pointee.producer_name)
        return control
    }

    // MARK: Records

    /// Slot `i`'s control record. `i` must be below `slotCount`: indices read from shared
    /// memory go through `slotIndex(_:field:)` first.
    func slot(_ i: UInt32) -> UnsafeMutablePointer<fs_slot_ctl> {
        precondition(i < slotCount, "slot index \(i) not checked against \(slotCount) slots")
        return slotTable + Int(i)
    }

    /// A slot index read from shared memory (`field` names where), checked.
    func slotIndex(_ raw: UInt64, field: String) throws(SegmentError) -> UInt32 {
        guard raw < UInt64(slotCount) else {
            throw .badField(path: path, field: field, value: raw, expected: "a slot below \(slotCount)")
        }
        return UInt32(raw)
    }

    /// Consumer entry `i` (0..<FS_MAX_CONSUMERS).
    func consumer(_ i: Int) -> UnsafeMutablePointer<fs_consumer> {
        precondition(i >= 0 && i < Int(FS_MAX_CONSUMERS), "consumer index \(i) out of range")
        return consumerTable + i
    }

    /// Entry `i`'s mode, nil when the value is none of the protocol's (a bad entry).
    /// Acquire: pairs with `demoteToLive`'s release store.
    func consumerMode(_ i: Int) -> ConsumerMode? { ConsumerMode(rawValue: fs_load_u32(&consumer(i).pointee.mode)) }

    /// Entry `i`'s state (acquire), nil when the value is none of the protocol's.
    func consumerState(_ i: Int) -> ConsumerState? { ConsumerState(rawValue: fs_load_u32(&consumer(i).pointee.state)) }

    /// Entry `i`'s claim word (acquire): 0 = free.
    func consumerPID(_ i: Int) -> Int32 { fs_load_i32(&consumer(i).pointee.pid) }

    /// Entry `i`'s owner as pid plus start time.
    func consumerIdentity(_ i: Int) -> ProcessIdentity {
        ProcessIdentity(pid: consumerPID(i), startTime: consumer(i).pointee.start_time)
    }

    /// Claims a free consumer entry for `pid` (CAS 0 -> pid, `fs_consumer_claim`); nil when all are taken.
    func claimConsumer(pid: Int32) -> Int? {
        (0..<Int(FS_MAX_CONSUMERS)).first { fs_consumer_claim(consumer($0), pid) != 0 }
    }

    /// Fills a claimed entry in and activates it, then tells the producer.
    /// SYNC: the release store of ACTIVE publishes the fields written before it; the
    /// producer's watcher reads them after its acquire load of `state`.
    func activateConsumer(_ i: Int, identity: ProcessIdentity, mode: ConsumerMode, name: String) {
        let e = consumer(i)
        fs_store_u32(&e.pointee.state, FS_CONSUMER_CLAIMED)
        e.pointee.start_time = identity.startTime
        e.pointee.mode = mode.rawValue
        e.pointee.first_seq = 0
        e.pointee.attached_ns = monotonicNanos()
        e.pointee.delivered = 0; e.pointee.missed = 0; e.pointee.last_seq = 0; e.pointee.held = 0
        e.pointee.hold_since_ns = 0; e.pointee.latency_sum_ns = 0; e.pointee.stale = 0
        e.pointee.source_dropped = 0
        _ = withUnsafeMutableBytes(of: &e.pointee.latency_hist) { $0.initializeMemory(as: UInt8.self, repeating: 0) }
        writeCString(name, into: &e.pointee.name)
        fs_store_u32(&e.pointee.state, FS_CONSUMER_ACTIVE)
        announceConsumerChange()
    }

    /// Asks the producer to detach entry `i` (state CLOSING, release), then tells it: its
    /// admission watcher, and its wait for a slot if it waits (PROTOCOL.md 8.2, 12.3).
    func requestDetach(_ i: Int) {
        fs_store_u32(&consumer(i).pointee.state, FS_CONSUMER_CLOSING)
        announceConsumerChange()
        notifyProducer()
    }

    /// Frees entry `i` if it still belongs to `pid` (the producer, after reclaiming it).
    /// SYNC: fs_consumer_free's release store of pid, so the next claimer sees the reset.
    func freeConsumer(_ i: Int, ifOwnedBy pid: Int32) {
        let e = consumer(i)
        guard consumerPID(i) == pid else { return }
        e.pointee.first_seq = 0
        e.pointee.held = 0
        e.pointee.hold_since_ns = 0
        fs_consumer_free(e)
    }

    /// The attach/wake bump: a consumer entry changed, wake the producer's admission watcher.
    /// SYNC: seq_cst bump of `attach_seq` before the futex wake (fs_bump).
    func announceConsumerChange() {
        fs_bump(&header.pointee.attach_seq)
        futexWake(&header.pointee.attach_seq)
    }

    /// Claimed or active live consumers, not counting entry `except`.
    func liveConsumerCount(except: Int) -> Int {
        (0..<Int(FS_MAX_CONSUMERS)).filter { i in
            guard i != except, consumerPID(i) != 0, consumerMode(i) == .live else { return false }
            return consumerState(i) == .claimed || consumerState(i) == .active
        }.count
    }

    /// Whether the pool can give one more live consumer (entry `index`) its hold limit
    /// without stalling the producer: the live consumers' hold limits together leave at
    /// least 2 slots (one the producer writes, one it publishes). The first live consumer
    /// is always admitted, so a small pool (`--slots 1` or 2) still serves one.
    func admitsLiveConsumer(_ index: Int) -> Bool {
        let others = liveConsumerCount(except: index)
        return others == 0 || Int(slotCount) - (others + 1) * liveMaxHeld >= 2
    }

    /// Gives a claimed entry back without activating it (a refused attach).
    func unclaimConsumer(_ i: Int) { fs_consumer_free(consumer(i)) }

    /// Demotes lossless entry `i` to live (the stall timeout): its mode becomes LIVE, which
    /// it reads while it waits, and its reservations of frames newer than `delivered` are
    /// cleared. Frames it was already handed stay held until it releases them. Counted in
    /// `fs_control.demoted`. Called with the producer's `shared` lock held (no publish can
    /// add the bit meanwhile).
    /// SYNC: the release store of `mode` comes before the holder bits clear, so a consumer
    /// that finds its frame gone sees LIVE on its next look (acquire load in `consumerMode`).
    func demoteToLive(_ i: Int, bit: UInt64, delivered: UInt64) {
        fs_store_u32(&consumer(i).pointee.mode, FS_MODE_LIVE)
        for s in 0..<slotCount where slot(s).pointee.seq > delivered { _ = fs_slot_clear_holder(slot(s), bit) }
        fs_count(&header.pointee.demoted, 1)
    }

    /// Lossless consumers demoted to live by a stall timeout (`fs_control.demoted`).
    var demotedCount: UInt64 { fs_peek_u64(&header.pointee.demoted) }

    // MARK: Holders

    /// Whether `bit` is set on any slot (held or reserved).
    func anySlot(heldBy bit: UInt64) -> Bool {
        (0..<slotCount).contains { fs_load_u64(&slot($0).pointee.holders) & bit != 0 }
    }

    /// Whether any slot is held by a consumer, or also by the producer's writer bit
    /// (`countingWriter`: a slot a decoder lease is still writing).
    func anySlotHeld(countingWriter: Bool) -> Bool {
        let mask = countingWriter ? UInt64.max : ~FS_HOLDER_WRITER
        return (0..<slotCount).contains { fs_load_u64(&slot($0).pointee.holders) & mask != 0 }
    }

    /// Clears consumer `bit` from every slot (reclaim, detach). SYNC: seq_cst fetch_and,
    /// as `fs_control_clear_holder`, but over the validated slot count.
    func clearHolder(_ bit: UInt64) {
        for i in 0..<slotCount { _ = fs_slot_clear_holder(slot(i), bit) }
    }

    // MARK: Stream-wide atomics

    /// The current pool epoch (acquire; pairs with `setEpoch`'s release).
    var epoch: UInt64 { fs_load_u64(&header.pointee.epoch) }
    /// SYNC: release, after `slot_stride` and `pool_size` are written.
    func setEpoch(_ e: UInt64, slotStride: Int, poolSize: Int) {
        header.pointee.slot_stride = UInt64(slotStride)
        header.pointee.pool_size = UInt64(poolSize)
        fs_store_u64(&header.pointee.epoch, e)
    }

    /// The raw `latest` word (acquire): (seq << 8) | slot, 0 = none.
    var latestWord: UInt64 { fs_load_u64(&header.pointee.latest) }
    /// The newest published frame, its slot checked; nil when none.
    func latest() throws(SegmentError) -> (sequence: UInt64, slot: UInt32)? {
        let w = latestWord
        guard w != 0 else { return nil }
        return (w >> 8, try slotIndex(w & 0xFF, field: "latest slot"))
    }
    /// SYNC: release store; a live consumer's acquire load of `latest` then finds the frame.
    func setLatest(sequence: UInt64, slot: UInt32) { fs_store_u64(&header.pointee.latest, sequence << 8 | UInt64(slot)) }
    func clearLatest() { fs_store_u64(&header.pointee.latest, 0) }

    /// Whether the stream ended (acquire; pairs with `markEnded`).
    var ended: Bool { fs_load_u32(&header.pointee.state) == FS_STREAM_ENDED }
    /// The last sequence number, valid once `ended`.
    var endSequence: UInt64 { header.pointee.end_seq }
    /// Whether the stream ended because its source failed (`FS_CONTROL_END_FAILED`); read
    /// after `ended`, whose acquire load orders it.
    var endedAfterFailure: Bool { header.pointee.flags & FS_CONTROL_END_FAILED != 0 }
    /// SYNC: the release store of `state` publishes `end_seq` and the END_FAILED flag.
    func markEnded(lastSequence: UInt64, failed: Bool = false) {
        header.pointee.end_seq = lastSequence
        if failed { header.pointee.flags |= FS_CONTROL_END_FAILED }
        fs_store_u32(&header.pointee.state, FS_STREAM_ENDED)
    }

    /// Tells a waiting producer that something changed (`fs_notify_producer`), waking it if it sleeps.
    func notifyProducer() {
        if fs_notify_producer(header) != 0 { futexWake(&header.pointee.wake) }
    }

    /// Releases consumer `bit`'s hold on slot `i` and wakes the producer if it waits.
    /// SYNC: fs_slot_release (release ordering; any thread may call it).
    func release(slot i: UInt32, bit: UInt64) {
        if fs_slot_release(header, slot(i), bit) != 0 { futexWake(&header.pointee.wake) }
    }

    // MARK: Constant fields

    /// The producer as pid plus start time.
    var producer: ProcessIdentity {
        ProcessIdentity(pid: header.pointee.producer_pid, startTime: header.pointee.producer_start_time)
    }
    /// The stream's name field (at most 63 bytes, up to the first NUL).
    var streamName: String { readCString(header.pointee.name) }
    /// Frames a live consumer may hold at once: 0 reads as 1, and no more than the slots.
    var liveMaxHeld: Int { min(max(1, Int(header.pointee.live_max_held)), Int(slotCount)) }
    /// Whether the producer is a live source.
    var liveSource: Bool { header.pointee.flags & FS_CONTROL_LIVE_SOURCE != 0 }
    /// The nominal frame rate (`rate_num/rate_den`, exact); nil when unknown (0/0).
    var nominalRate: Rational? { Rational(rate: header.pointee.rate_num, header.pointee.rate_den) }
}

/// Writes `s` into a fixed C char array, NUL-terminated and truncated to fit.
func writeCString<T>(_ s: String, into field: inout T) {
    withUnsafeMutableBytes(of: &field) { b in
        b.initializeMemory(as: UInt8.self, repeating: 0)
        for (i, c) in s.utf8.prefix(b.count - 1).enumerated() { b[i] = c }
    }
}

/// Reads a fixed C char array up to its first NUL (or its end: an unterminated field
/// cannot make the read leave it). Invalid UTF-8 is repaired.
func readCString<T>(_ field: T) -> String {
    withUnsafeBytes(of: field) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
}
