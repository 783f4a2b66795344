import Glibc

/// What a refreshing monitor shows: the streams now, and for `keepSeconds` the streams
/// that ended and whose files are gone, as last seen, with their totals.
///
/// A producer removes its files when it exits: without this a finished stream would
/// vanish from `top` at once, its final counts unread.
public struct RecentStreams {
    public let keepSeconds: Double
    private var gone: [String: (snapshot: StreamSnapshot, sinceNanos: UInt64)] = [:]
    private var last: [StreamSnapshot] = []

    public init(keepSeconds: Double = 5) { self.keepSeconds = keepSeconds }

    /// The streams to show after a reading taken at `nanos` (CLOCK_MONOTONIC), in pipeline
    /// order; the vanished ones have state `ended` and `vanished` set.
    public mutating func update(_ streams: [StreamSnapshot], nanos: UInt64) -> [StreamSnapshot] {
        let present = Set(streams.map(\.name))
        for s in last where !present.contains(s.name) && gone[s.name] == nil {
            gone[s.name] = (s.ended(), nanos)
        }
        for name in present { gone[name] = nil }
        gone = gone.filter { Double(nanos &- $0.value.sinceNanos) / 1e9 < keepSeconds }
        last = streams.filter { !$0.vanished }
        return StreamSnapshot.pipelineOrder(streams + gone.values.map(\.snapshot))
    }
}

extension StreamSnapshot {
    /// This stream as last seen, once its producer ended it and removed its files.
    func ended() -> StreamSnapshot {
        StreamSnapshot(
            name: name, producerPID: producerPID, producerName: producerName, state: StreamState.ended.rawValue, liveSource: liveSource,
            memory: memory, media: media, device: device,
            slots: slots, slotBytes: slotBytes, epoch: epoch, published: published, dropped: dropped,
            minFreeSlots: minFreeSlots, freeSlots: slots, reclaimedConsumers: reclaimedConsumers,
            demotedConsumers: demotedConsumers, blockedMillis: blockedMillis, nominalRate: nominalRate,
            format: format, lastSequence: lastSequence, consumers: consumers.map { $0.ended() }, slotTable: [],
            vanished: true)
    }
}

extension ConsumerSnapshot {
    /// This consumer as last seen, once its stream ended.
    func ended() -> ConsumerSnapshot {
        ConsumerSnapshot(
            index: index, pid: pid, name: name, mode: mode, state: "ended", delivered: delivered, missed: missed,
            stale: stale, sourceDropped: sourceDropped, lastSequence: lastSequence, lag: 0, held: 0, holdMillis: 0, heldSlots: [],
            latencyHistogramMicros: latencyHistogramMicros, meanLatencyMicros: meanLatencyMicros)
    }
}
