import FrameMonitor

/// The chain as a graph (`/api/graph`): processes and streams as nodes, an edge from each
/// producer to its stream and from each stream to each of its consumers, with the consumer's
/// figures. A filter is a process with edges in and out.
public struct WebGraph: Encodable, Sendable {
    public struct Process: Encodable, Sendable {
        public let pid: Int32
        public let name: String
        public var produces: [String]
        public var consumes: [String]
    }
    public struct Stream: Encodable, Sendable {
        public let name: String
        public let state: String
        public let producerPID: Int32
        public let fps: Double?
        public let format: String?
        /// "video" or "audio": the page draws a preview or level meters.
        public let media: String
        public let slotsInUse: Int
        public let slots: Int
        /// Frames the source dropped for want of a free slot.
        public let dropped: UInt64
    }
    public struct Edge: Encodable, Sendable {
        /// "pid:42" or "stream:NAME".
        public let from: String
        public let to: String
        public let fps: Double?
        public let consumer: Int?
        public let mode: String?
        public let lag: UInt64?
        public let missed: UInt64?
        public let latencyP50: String?
        public let latencyP99: String?
        /// More than one frame behind the newest.
        public let lagging: Bool
        /// Missed frames since the previous sample.
        public let missing: Bool
    }

    public let time: Double
    /// The runtime directory the view reads (what an empty page names).
    public let directory: String
    public let processes: [Process]
    public let streams: [Stream]
    public let edges: [Edge]

    /// `hiding`: a process left out as a consumer (the web server's own previews: the tables list them).
    init(_ report: TopReport?, before: HistoryPoint?, directory: String, hiding hidden: Int32? = nil) {
        time = report?.time ?? 0
        self.directory = directory
        var processes: [Int32: Process] = [:]
        var order: [Int32] = []
        func process(_ pid: Int32, _ name: String) {
            if processes[pid] == nil { processes[pid] = Process(pid: pid, name: name, produces: [], consumes: []); order.append(pid) }
        }
        var streams: [Stream] = [], edges: [Edge] = []
        for s in report?.streams ?? [] where !s.vanished {
            streams.append(Stream(name: s.name, state: s.state, producerPID: s.producerPID, fps: s.fps, format: s.format,
                                  media: s.media, slotsInUse: s.slotsInUse, slots: s.slots, dropped: s.dropped))
            process(s.producerPID, s.producerName)
            processes[s.producerPID]?.produces.append(s.name)
            edges.append(Edge(from: "pid:\(s.producerPID)", to: "stream:\(s.name)", fps: s.fps, consumer: nil, mode: nil, lag: nil,
                              missed: nil, latencyP50: nil, latencyP99: nil, lagging: false, missing: false))
            let earlier = before?.streams.first { $0.name == s.name }
            for c in s.consumers where c.pid != hidden {
                process(c.pid, c.name)
                processes[c.pid]?.consumes.append(s.name)
                let missedBefore = earlier?.consumers.first { $0.pid == c.pid && $0.index == c.index }?.missed
                edges.append(Edge(from: "stream:\(s.name)", to: "pid:\(c.pid)", fps: c.fps, consumer: c.index, mode: c.mode, lag: c.lag,
                                  missed: c.missed, latencyP50: c.latencyP50, latencyP99: c.latencyP99, lagging: c.lag > 1,
                                  missing: missedBefore.map { c.missed > $0 } ?? false))
            }
        }
        self.processes = order.compactMap { processes[$0] }
        self.streams = streams
        self.edges = edges
    }
}
