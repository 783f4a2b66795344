import CFFmpeg
import FoundationEssentials
import FrameControl
import FrameMedia
import FrameServer
import Glibc
import Synchronization

/// The trigger: idle (0), a snapshot requested (1), being written (2). Atomics, so the SIGUSR1
/// handler may use them (lock-free: async-signal-safe).
private let snapshotState = Atomic<Int32>(0)
/// SIGUSR1s that came while a snapshot was requested or being written (refused, counted).
private let refusedSignals = Atomic<Int>(0)

/// SIGUSR1 as "write a snapshot now" (rosbag2's snapshot trigger). One snapshot at a time:
/// a request while one is requested or being written is refused (issue 26 item 8: 500
/// requests in 24.5 s wrote 409 files, 759 MB), by `framesrv ctl` in its reply, and a SIGUSR1
/// counted (`takeRefusedSignals`) for the recorder to say.
public enum SnapshotTrigger {
    /// Installs the SIGUSR1 handler and unblocks the signal (once, from the main thread,
    /// before starting threads).
    ///
    /// The corresponding C functions are `sigaction` and `pthread_sigmask`.
    public static func install() {
        // Both globals made now: a lazy global's first use takes a lock, which a handler may not.
        _ = snapshotState.load(ordering: .relaxed)
        _ = refusedSignals.load(ordering: .relaxed)
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in
            if !SnapshotTrigger.request() { _ = refusedSignals.wrappingAdd(1, ordering: .relaxed) }
        }
        sigemptyset(&action.sa_mask)
        action.sa_flags = SA_RESTART
        sigaction(SIGUSR1, &action, nil)
        // A parent that spawned this process with SIGUSR1 blocked (posix_spawn inherits the mask) would keep it pending forever.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGUSR1)
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// Requests a snapshot as SIGUSR1 does (from a control socket, or a test); false, and
    /// nothing requested, while one is requested or being written.
    @discardableResult
    public static func request() -> Bool {
        snapshotState.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing).exchanged
    }

    /// Whether a snapshot was requested; if so it is being written until `written()`.
    public static func take() -> Bool {
        snapshotState.compareExchange(expected: 1, desired: 2, ordering: .acquiringAndReleasing).exchanged
    }

    /// The snapshot `take` returned is written (or failed): the next request is taken.
    public static func written() { snapshotState.store(0, ordering: .releasing) }

    /// SIGUSR1s refused since the last call.
    public static func takeRefusedSignals() -> Int { refusedSignals.exchange(0, ordering: .relaxed) }

    /// What `framesrv ctl NAME snapshot` is told while one is being written.
    public static let busy = "a snapshot is being written; this one is refused: ask again when it is done"
}

/// The memory a snapshot ring may use: at most `frames` frames per stream, each at most its
/// raw size (FFV1 and H.264 packets are smaller; raw packets are exactly that).
public struct SnapshotBound: Sendable, CustomStringConvertible {
    public var frames: [Int]
    public var frameBytes: [Int]
    public var totalBytes: Int { zip(frames, frameBytes).reduce(0) { $0 + $1.0 * $1.1 } }
    public var megabytes: Int { (totalBytes + (1 << 20) - 1) >> 20 }
    public var description: String {
        zip(frames, frameBytes).map { "\($0) frames x \($1) bytes" }.joined(separator: " + ") + " = \(megabytes) MB"
    }

    /// For `window` ns of every track at its nominal rate (30 fps when it has none; an audio
    /// track: its first frame's sample rate over its sample count), plus one frame.
    static func of(_ tracks: [TrackSpec], windowNanos: Int64) -> SnapshotBound {
        let frames = tracks.map { t -> Int in
            let fps = t.audio.map { Double($0.sampleRate) / Double($0.samples) } ?? t.rate.map { $0.doubleValue } ?? 30
            return Int((Double(windowNanos) / 1e9 * fps).rounded(.up)) + 1
        }
        let bytes = tracks.map { t in
            t.audio.flatMap(AudioPCM.packetBytes)
                ?? t.format.pixelFormat.planes.indices.reduce(0) { $0 + t.format.rowBytes(plane: $1) * t.format.rows(plane: $1) }
        }
        return SnapshotBound(frames: frames, frameBytes: bytes)
    }
}

/// Snapshot mode's memory: the newest `window` of every track's encoded frames (and never
/// more frames than the bound says), written to a file on request.
final class SnapshotRing: PacketSink, @unchecked Sendable {
    let tracks: [TrackSpec]
    let window: Int64
    let bound: SnapshotBound
    private let lock = ThreadLock()
    private var rings: [[EncodedFrame]]

    init(tracks: [TrackSpec], windowNanos: Int64, bound: SnapshotBound) {
        self.tracks = tracks
        window = windowNanos
        self.bound = bound
        rings = Array(repeating: [], count: tracks.count)
    }

    deinit { for ring in rings { for e in ring { var p = e.packet; av_packet_free(&p) } } }

    func take(_ e: EncodedFrame, track: Int) throws(RecordingError) {
        lock.lock()
        defer { lock.unlock() }
        rings[track].append(e)
        let newest = e.captureNanos
        while let first = rings[track].first,
              rings[track].count > bound.frames[track] || Int64(bitPattern: newest &- first.captureNanos) > window {
            var p = rings[track].removeFirst().packet
            av_packet_free(&p)
        }
    }

    func end(track: Int) {}

    /// Writes what the rings hold now to `path`; returns the frames written per track.
    func write(to path: String) throws(RecordingError) -> [Int] {
        let copies = snapshot()
        let base = copies.compactMap { $0.first?.captureNanos }.min() ?? 0
        let writer = try RecordingWriter(path: path, tracks: tracks, baseCaptureNanos: base)
        // In capture order across tracks, as a live recording interleaves them.
        let all = copies.enumerated().flatMap { t, frames in frames.map { (t, $0) } }.sorted { $0.1.captureNanos < $1.1.captureNanos }
        for (t, e) in all { try writer.write(e, track: t) }   // in order already: the writer's queue passes them through at finish
        try writer.finish()
        return writer.frames
    }

    /// Copies of every ring's packets (each track from its first keyframe).
    private func snapshot() -> [[EncodedFrame]] {
        lock.lock()
        defer { lock.unlock() }
        return rings.map { ring in
            let start = ring.firstIndex { $0.key } ?? ring.count
            return ring[start...].map { e in
                var c = e
                c.packet = av_packet_clone(e.packet)
                return c
            }
        }
    }

    /// FILE with a counter before its extension: rec.nut, 3 -> rec-3.nut.
    static func numbered(_ path: String, _ n: Int) -> String {
        RecordingSegments.inserting("-\(n)", beforeExtensionOf: path)
    }
}

extension StreamRecorder {
    /// Snapshot mode: records into a ring of the last `windowNanos` and writes it to a
    /// numbered file at each `SnapshotTrigger`, until the streams end or a stop.
    /// `onBound` sees the memory bound before recording starts (and may refuse it by throwing).
    public func runSnapshots(windowNanos: Int64, onBound: (SnapshotBound) throws -> Void,
                             onWritten: (String, [Int]) -> Void) throws -> Int {
        guard let streams = try attach() else { return 0 }
        let tracks = streams.compactMap(\.spec)
        let bound = SnapshotBound.of(tracks, windowNanos: windowNanos)
        try onBound(bound)
        let ring = SnapshotRing(tracks: tracks, windowNanos: windowNanos, bound: bound)
        var written = 0
        var failure: Error?
        runThreads(streams, into: ring) {
            guard failure == nil, SnapshotTrigger.take() else { return }
            defer { SnapshotTrigger.written() }
            written += 1
            let path = SnapshotRing.numbered(settings.path, written)
            do { onWritten(path, try ring.write(to: path)) } catch { failure = error }
        }
        if let error = failure ?? streams.compactMap(\.error).first { throw error }
        return written
    }
}

extension SnapshotTrigger {
    /// Serves `NAME.control` in the runtime directory for `framesrv ctl NAME snapshot` (the
    /// trigger SIGUSR1 also pulls). Returns the server, or why it could not be bound.
    public static func serve(_ name: String) -> Result<ControlServer, Error> {
        Result {
            try validateStreamName(name)
            return try ControlServer(stream: name, directory: try RuntimeDirectory(), verbs: [.snapshot]) { _ in
                request() ? .ok("snapshot requested") : .error(busy)
            }
        }
    }
}
