import FoundationEssentials
import FrameMonitor
import FrameServer
import Glibc
import Synchronization

/// The web view's one reader of the streams: samples them every `interval` seconds on its own
/// thread (as `top` does, from shared statistics only) and keeps the last `capacity` samples.
public final class WebMonitor: Sendable {
    struct State {
        var previous: TopSample?
        var latest: TopSample?
        var report: TopReport?
        var history: [HistoryPoint] = []
        var stopped = false
        var directory: RuntimeDirectory?
    }

    /// The runtime directory's path: read again each sample until it exists (watching never creates it).
    let path: String
    public let interval: Double
    public let capacity: Int
    private let state = Mutex(State())

    public init(path: String = RuntimeDirectory.defaultPath, interval: Double = 1, capacity: Int = 300) {
        self.path = path
        self.interval = interval
        self.capacity = capacity
    }

    /// Takes a sample now (so the first request has data), then one every `interval` until `stop()`.
    public func start() {
        sampleOnce()
        pthread_detach(spawnThread { [self] in
            while !state.withLock({ $0.stopped }) {
                pause()
                sampleOnce()
            }
        })
    }

    public func stop() { state.withLock { $0.stopped = true } }

    private func pause() {
        let deadline = monotonicNanos() + UInt64(interval * 1e9)
        while monotonicNanos() < deadline, !state.withLock({ $0.stopped }) { usleep(50_000) }
    }

    /// The runtime directory, once it exists.
    public func directory() -> RuntimeDirectory? {
        if let d = state.withLock({ $0.directory }) { return d }
        let d = (try? RuntimeDirectory.existing(path: path)) ?? nil
        state.withLock { $0.directory = d }
        return d
    }

    func sampleOnce() {
        let sample = TopSample.take(directory())
        state.withLock { s in
            let report = TopReport(sample, previous: s.latest)
            s.history.append(HistoryPoint(report))
            if s.history.count > capacity { s.history.removeFirst(s.history.count - capacity) }
            s.previous = s.latest
            s.latest = sample
            s.report = report
        }
    }

    /// `ls --json`'s rows: the latest sample, fps measured since the one before.
    public func streams() -> [MeasuredStream] {
        state.withLock { s in
            guard let latest = s.latest else { return [] }
            guard let previous = s.previous else {
                return StreamSnapshot.pipelineOrder(latest.streams).map { MeasuredStream(snapshot: $0, fps: nil, playback: latest.playback[$0.name]) }
            }
            return MeasuredStream.rows(latest, since: previous)
        }
    }

    /// `top --json`'s latest refresh.
    public func top() -> TopReport? { state.withLock { $0.report } }

    /// The samples kept, oldest first, newer than `since` (unix seconds) when given.
    public func history(since: Double? = nil) -> [HistoryPoint] {
        state.withLock { s in since.map { t in s.history.filter { $0.time > t } } ?? s.history }
    }

    /// Who produces and consumes what, from the latest refresh (without this process's previews).
    public func graph() -> WebGraph {
        state.withLock { s in
            let points = s.history.suffix(2)
            return WebGraph(s.report, before: points.count == 2 ? points.first : nil, directory: path, hiding: getpid())
        }
    }

    /// Whether `name` is a stream of the latest sample.
    public func hasStream(_ name: String) -> Bool {
        state.withLock { $0.latest?.streams.contains { $0.name == name } ?? false }
    }
}

/// One second of history, per stream and consumer: what the page's plots draw.
public struct HistoryPoint: Encodable, Sendable {
    public struct Stream: Encodable, Sendable {
        let name: String
        /// Whose run this is: a new producer under the same name starts a new series.
        let producerPID: Int32
        let fps: Double?
        let slotsInUse: Int
        let slots: Int
        let dropped: UInt64
        let consumers: [Consumer]
    }
    public struct Consumer: Encodable, Sendable {
        let pid: Int32
        let index: Int
        let name: String
        let fps: Double?
        let lag: UInt64
        let missed: UInt64
        /// The percentiles' bucket bounds; the open last bucket (100 ms and more) as where it
        /// begins, so that a plot shows it at its height instead of leaving it out.
        let latencyP50Micros: UInt64?
        let latencyP99Micros: UInt64?
    }
    public let time: Double
    public let streams: [Stream]

    /// A percentile's bound as plotted: the open last bucket (no bound, but a label) as its start.
    static func plotted(_ micros: UInt64?, _ label: String) -> UInt64? {
        micros ?? (label == TopConsumer.label(nil) ? nil : ConsumerSnapshot.latencyUnboundedFromMicros)
    }

    init(_ r: TopReport) {
        time = r.time
        streams = r.streams.map { s in
            Stream(name: s.name, producerPID: s.producerPID, fps: s.fps, slotsInUse: s.slotsInUse, slots: s.slots, dropped: s.dropped, consumers: s.consumers.map { c in
                Consumer(pid: c.pid, index: c.index, name: c.name, fps: c.fps, lag: c.lag, missed: c.missed,
                         latencyP50Micros: Self.plotted(c.latencyP50Micros, c.latencyP50), latencyP99Micros: Self.plotted(c.latencyP99Micros, c.latencyP99))
            })
        }
    }
}
