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
    /// last bucket, which has no upper bound (latencies of 2^14 us = 16.4 ms and more).
    public static let latencyUnbounded = UInt64.max
    /// Where the last, open latency bucket begins, in microseconds.
    public static let latencyUnboundedFromMicros: UInt64 = 1 << UInt64(FS_LATENCY_BUCKETS - 2)

    /// The `p` quantile (0...1) of this consumer's publish -> acquire latency, as the upper
    /// bound in microseconds of the histogram bucket that contains it (bucket i counts
    /// latencies below 2^i us, so 64 means "under 64 us"); `latencyUnbounded` when it falls
    /// in the last bucket; nil before the first frame.
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
                return bucket == Int(FS_LATENCY_BUCKETS) - 1 ? latencyUnbounded : 1 << UInt64(bucket)
            }
        }
        return latencyUnbounded
    }
}

/// One slot of the pool.
public struct SlotSnapshot: Sendable, Encodable {
    public let index: Int
    /// free, writing, held, reference (published, held by no consumer, still used by the
    /// producer's decoder as a reference picture) or ready (published, held by nobody).
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
    /// running, ended, or dead (the producer is gone and left its files).
    public let state: String
    public let liveSource: Bool
    public let slots: Int
    public let slotBytes: UInt64
    public let epoch: UInt64
    public let published: UInt64
    public let dropped: UInt64
    public let minFreeSlots: UInt64
    public let freeSlots: Int
    public let reclaimedConsumers: UInt64
    public let blockedMillis: Double
    public let nominalRate: Double
    public let format: String?
    public let lastSequence: UInt64
    public let consumers: [ConsumerSnapshot]
    public let slotTable: [SlotSnapshot]

    /// Reads stream `name` from `directory`.
    public static func read(_ name: String, in directory: RuntimeDirectory) throws(FrameServerError) -> StreamSnapshot {
        let control = try MappedFile.openExisting(directory.controlPath(name), writable: false)
        try Attachment.validateControl(control)
        let ctl = UnsafeMutablePointer(mutating: control.base.assumingMemoryBound(to: fs_control.self))
        let alive = ProcessIdentity(pid: ctl.pointee.producer_pid, startTime: ctl.pointee.producer_start_time).isAlive
        let now = monotonicNanos()
        let n = Int(ctl.pointee.slot_count)
        let latest = fs_load_u64(&ctl.pointee.latest)
        let lastSeq = latest >> 8

        var slotTable: [SlotSnapshot] = []
        var heldBy: [Int: [Int]] = [:]
        var free = 0
        for i in 0..<n {
            let s = fs_control_slot(ctl, UInt32(i))
            let h = fs_load_u64(&s.pointee.holders)
            let holders = (0..<Int(FS_MAX_CONSUMERS)).filter { h & (1 << UInt64($0)) != 0 }
            for c in holders { heldBy[c, default: []].append(i) }
            let seq = s.pointee.seq
            let producerHold = fs_load_u64(&s.pointee.producer_hold) != 0
            let state = h & (1 << 63) != 0 ? "writing" : !holders.isEmpty ? "held"
                : producerHold ? "reference" : seq != 0 ? "ready" : "free"
            if fs_slot_is_free(s) != 0 { free += 1 }
            let published = s.pointee.publish_ns
            slotTable.append(SlotSnapshot(index: i, state: state, sequence: seq, epoch: s.pointee.epoch, holders: holders,
                                          ageMillis: published == 0 || published > now ? 0 : Double(now - published) / 1e6))
        }

        var consumers: [ConsumerSnapshot] = []
        for i in 0..<Int(FS_MAX_CONSUMERS) {
            let e = fs_control_consumer(ctl, UInt32(i))
            let pid = fs_load_i32(&e.pointee.pid)
            guard pid != 0 else { continue }
            let c = e.pointee
            let hist = withUnsafeBytes(of: c.latency_hist) { Array($0.bindMemory(to: UInt64.self)) }
            let name = withUnsafeBytes(of: c.name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            let mode = c.mode == FS_MODE_LIVE ? "live" : c.mode == FS_MODE_LOSSLESS ? "lossless" : "monitor"
            let state = ["free", "attaching", "active", "closing"][Int(min(c.state, 3))]
            let expectedNext = c.mode == FS_MODE_LOSSLESS && c.last_seq == 0 && c.first_seq > 0 ? c.first_seq - 1 : c.last_seq
            consumers.append(ConsumerSnapshot(
                index: i, pid: pid, name: name, mode: mode, state: state, delivered: c.delivered, missed: c.missed,
                stale: c.stale, lastSequence: c.last_seq, lag: lastSeq > expectedNext ? lastSeq - expectedNext : 0,
                held: c.held, holdMillis: c.hold_since_ns == 0 || c.hold_since_ns > now ? 0 : Double(now - c.hold_since_ns) / 1e6,
                heldSlots: heldBy[i] ?? [], latencyHistogramMicros: hist,
                meanLatencyMicros: c.delivered == 0 ? 0 : Double(c.latency_sum_ns) / Double(c.delivered) / 1e3))
        }

        var format: String?
        if latest != 0 {
            let slot = Int(latest & 0xFF)
            let epoch = fs_control_slot(ctl, UInt32(slot)).pointee.epoch
            if let pool = try? MappedFile.openExisting(directory.poolPath(name, epoch: epoch), writable: false) {
                let slotBytes = pool.size / n
                // A monitor's read of a header may race with a rewrite; it is display only.
                let h = FrameHeader((pool.base + slot * slotBytes).load(as: fs_frame.self))
                if h.magic == FS_MAGIC_FRAME {
                    let c = h.description.color
                    format = "\(h.width)x\(h.height) \(h.pixelFormatName) \(c.matrixName)/\(c.rangeName)"
                }
            }
        }

        let streamName = withUnsafeBytes(of: ctl.pointee.name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let ended = fs_load_u32(&ctl.pointee.state) == FS_STREAM_ENDED
        return StreamSnapshot(
            name: streamName, producerPID: ctl.pointee.producer_pid,
            state: !alive ? "dead" : ended ? "ended" : "running",
            liveSource: ctl.pointee.flags & FS_CONTROL_LIVE_SOURCE != 0, slots: n,
            slotBytes: ctl.pointee.slot_stride, epoch: fs_load_u64(&ctl.pointee.epoch),
            published: fs_peek_u64(&ctl.pointee.published), dropped: fs_peek_u64(&ctl.pointee.dropped),
            minFreeSlots: fs_peek_u64(&ctl.pointee.min_free), freeSlots: free,
            reclaimedConsumers: fs_peek_u64(&ctl.pointee.reclaimed),
            blockedMillis: Double(fs_peek_u64(&ctl.pointee.blocked_ns)) / 1e6,
            nominalRate: Double(ctl.pointee.rate_milli) / 1000, format: format, lastSequence: lastSeq,
            consumers: consumers, slotTable: slotTable)
    }

    /// Snapshots of every stream in `directory` (unreadable ones are skipped).
    public static func all(in directory: RuntimeDirectory) -> [StreamSnapshot] {
        directory.streamNames().compactMap { try? read($0, in: directory) }
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
            for f in files(of: stream) where f != lockPath(stream) && unlink(f) == 0 { removed.append(f) }
            removed.append(lockPath(stream))
            lock.unlinkAndRelease()
        }
        return removed
    }
}
