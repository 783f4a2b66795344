import CFFmpeg
import Dispatch
import FrameServer
import Glibc

/// What `framesrv record` records and how.
public struct RecordSettings: Sendable {
    /// The streams, in the order the file lists them.
    public var streams: [String]
    public var path: String
    public var codec: RecordingCodec = .ffv1
    /// Give up when a stream has not appeared by then (nil: wait).
    public var waitSeconds: Double?
    /// Start a new file once one holds this many bytes (nil: one file). See `RecordingSegments`.
    public var segmentBytes: Int64? = RecordSettings.defaultSegmentBytes
    /// 1 GiB: the muxer's index of a file that size is at most about 7 MB (RecordingSegments).
    public static let defaultSegmentBytes: Int64 = 1 << 30

    public init(streams: [String], path: String) { self.streams = streams; self.path = path }
}

/// What a recording run did.
public struct RecordReport: Sendable {
    public var frames: [Int] = []
    public var bytes: Int64 = 0
    /// The files written: the recording's path, then its later segments.
    public var files: [String] = []
    /// Frames stored raw because the codec does not take their pixel format, per stream.
    public var rawFallbacks: [Int] = []
    public var tracks: [TrackSpec] = []
}

/// Where encoded frames go: the recording file, or the snapshot ring.
protocol PacketSink: AnyObject, Sendable {
    func take(_ e: EncodedFrame, track: Int) throws(RecordingError)
    /// The track has no more frames.
    func end(track: Int) throws(RecordingError)
}

extension RecordingWriter: PacketSink {
    func take(_ e: EncodedFrame, track: Int) throws(RecordingError) { try write(e, track: track) }
    func end(track: Int) throws(RecordingError) { try endTrack(track) }
}

/// The record a frame's header gives, a video or an audio frame's (capture offset filled in by the writer).
func frameRecord(_ frame: borrowing Frame) -> FrameRecord? {
    let h = frame.header
    var r: FrameRecord
    if h.media == .audio, let audio = h.audioFormat {
        r = FrameRecord(audio: audio)
    } else if h.media == .video, let format = h.format {
        r = FrameRecord(format: format)
    } else {
        return nil
    }
    r.description = h.description
    r.sequence = h.sequence
    r.epoch = h.epoch
    return r
}

/// One stream being recorded: its consumer and encoder, run on its own thread from its
/// first frame. Until the file exists (its header needs every track's first frame) the
/// packets wait here, so one producer's streams (a movie's pictures and sound) all reach
/// their first frames: the thread reads on up to `holdLimit` bytes, then waits for the file.
final class RecordedStream: @unchecked Sendable {
    let index: Int
    let consumer: Consumer
    let encoder: TrackEncoder
    let codec: RecordingCodec
    var spec: TrackSpec?
    var firstCapture: UInt64 = 0
    var error: Error?
    /// Its first frame was taken (or it ended, failed or was stopped before one): signalled once.
    let started = DispatchSemaphore(value: 0)
    /// The stream ended before its first frame.
    private(set) var endedEmpty = false
    private let lock = ThreadLock()
    private var sink: PacketSink?
    private var held: [EncodedFrame] = []
    private var heldBytes = 0
    private let opened = DispatchSemaphore(value: 0)
    /// The most encoded bytes a stream holds while it waits for the file.
    static let holdLimit = 64 << 20

    init(index: Int, name: String, settings: RecordSettings, stop: @escaping @Sendable () -> Bool) throws {
        self.index = index
        var options = ConsumerOptions(mode: .lossless)
        options.media = nil   // video or audio: each frame's record says which
        options.waitSeconds = settings.waitSeconds
        options.name = ClientName.fit("record \(settings.path)")
        consumer = try Consumer(stream: name, options: options)
        consumer.shouldStop = stop
        encoder = TrackEncoder(codec: settings.codec)
        codec = settings.codec
    }

    /// Takes the stream's first frame and encodes it; false when the stream ended first.
    private func start() throws -> Bool {
        guard let frame = try consumer.next() else { return false }
        guard let record = frameRecord(frame) else {
            let what = frame.header.media == .audio ? "sample" : "pixel"
            throw RecordingError.cannotWrite(consumer.stream, "its \(what) format '\(frame.header.pixelFormatName)' is unknown to this build")
        }
        firstCapture = record.description.captureNanos
        encoder.rate = consumer.nominalRate
        let packets = try encoder.encode(frame, record: record)
        spec = TrackSpec(name: consumer.stream, rate: consumer.nominalRate, format: record.format,
                         description: record.description, codec: encoder.containerRaw == true ? .raw : codec)
        spec?.audio = record.audio
        spec?.clock = consumer.producerPID
        spec?.extradata = encoder.extradata
        frame.release()
        started.signal()
        for e in packets { try deliver(e, stop: { false }) }
        return true
    }

    /// The file (or ring) is ready: what was held goes to it with the next packet.
    func open(_ sink: PacketSink) {
        lock.withLock { self.sink = sink }
        opened.signal()
    }

    /// Hands a packet to the file, or holds it until the file exists (waiting once it holds too much).
    private func deliver(_ e: EncodedFrame, stop: () -> Bool) throws {
        lock.lock()
        guard let sink else {
            held.append(e)
            heldBytes += Int(e.packet?.pointee.size ?? 0)
            lock.unlock()
            while heldBytes > Self.holdLimit, !stop(), opened.wait(timeout: .now() + .milliseconds(100)) == .timedOut {}
            return
        }
        let waiting = held
        held = []
        lock.unlock()
        for h in waiting { try sink.take(h, track: index) }
        try sink.take(e, track: index)
    }

    /// The thread's body: the first frame, then every frame until the stream ends or `stop`
    /// says so; the packets to the sink given by `open` (the recording ends the track there).
    func run(stop: () -> Bool) {
        do {
            guard try start() else {
                endedEmpty = true
                started.signal()
                return
            }
            while !stop(), let frame = try consumer.next() {
                guard let record = frameRecord(frame) else { frame.release(); continue }
                let packets = try encoder.encode(frame, record: record)
                frame.release()
                for e in packets { try deliver(e, stop: stop) }
            }
            for e in try encoder.flush() { try deliver(e, stop: stop) }
        } catch {
            self.error = error
            if spec == nil { started.signal() }
        }
        // The file may still be coming (another stream's first frame): wait for it, or a stop.
        while lock.withLock({ sink == nil }), !stop(), opened.wait(timeout: .now() + .milliseconds(100)) == .timedOut {}
        guard let sink = lock.withLock({ sink }) else { freeHeld(); return }
        do {
            for h in lock.withLock({ () -> [EncodedFrame] in defer { held = [] }; return held }) { try sink.take(h, track: index) }
        } catch { self.error = self.error ?? error }
        do { try sink.end(track: index) } catch { self.error = self.error ?? error }
    }

    private func freeHeld() {
        lock.withLock {
            for e in held { var p = e.packet; av_packet_free(&p) }
            held = []
        }
    }
}

/// `framesrv record`: one lossless consumer per stream, each on its own thread, encoding
/// into one recording. Ends when every stream has ended, or at `stop` (the file is then
/// completed: encoders drained, trailer written).
public final class StreamRecorder: @unchecked Sendable {
    public let settings: RecordSettings
    private let stopRequested: @Sendable () -> Bool
    private let failed = ThreadLock()
    private var failure = false
    /// The streams' threads.
    private let group = DispatchGroup()

    public init(settings: RecordSettings, stop: @escaping @Sendable () -> Bool) {
        self.settings = settings
        self.stopRequested = stop
    }

    private var shouldStop: Bool {
        failed.lock()
        defer { failed.unlock() }
        return failure || stopRequested()
    }

    /// Attaches to every stream (each waited for, in order, before any frame is read: a
    /// producer of several streams may wait for all their consumers), then starts each
    /// stream's thread and waits until every one has its first frame (the header needs every
    /// track's format); nil when a stop came first. The threads hold their packets until
    /// `open(_:)` gives them the file; `wait` ends with them.
    func attach() throws -> [RecordedStream]? {
        try Self.checkWritable(settings.path)
        var streams: [RecordedStream] = []
        for (i, name) in settings.streams.enumerated() {
            let s = try RecordedStream(index: i, name: name, settings: settings) { [unowned self] in shouldStop }
            try s.consumer.attach()
            streams.append(s)
        }
        if stopRequested() { return nil }
        for s in streams {
            group.enter()
            pthread_detach(spawnThread { [self] in
                s.run { shouldStop }
                if s.error != nil { failed.withLock { failure = true } }
                group.leave()
            })
        }
        for s in streams { s.started.wait() }
        if let bad = streams.first(where: { $0.error != nil || $0.endedEmpty || $0.spec == nil }) {
            failed.withLock { failure = true }   // the other threads stop, nothing written
            group.wait()
            if let error = bad.error { throw error }
            if stopRequested() { return nil }
            throw RecordingError.cannotRead(bad.consumer.stream, "the stream ended before its first frame")
        }
        return streams
    }

    /// Fails now, before waiting for any stream, when `path`'s folder cannot take the file.
    static func checkWritable(_ path: String) throws(RecordingError) {
        let folder = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        guard access(folder.isEmpty ? "/" : folder, W_OK) == 0 else {
            throw .cannotWrite(path, String(cString: strerror(errno)))
        }
    }

    /// Records until the streams end or a stop; returns what was written (nil: stopped
    /// before every stream's first frame, nothing written).
    public func run() throws -> RecordReport? {
        guard let streams = try attach() else { return nil }
        let base = streams.map(\.firstCapture).min() ?? 0
        let writer = try RecordingWriter(path: settings.path, tracks: streams.compactMap(\.spec), baseCaptureNanos: base,
                                         segmentBytes: settings.segmentBytes)
        runThreads(streams, into: writer)
        try writer.finish()
        if let error = streams.compactMap(\.error).first { throw error }
        return RecordReport(frames: writer.frames, bytes: writer.bytesWritten, files: writer.segmentPaths,
                            rawFallbacks: streams.map(\.encoder.rawFallbacks), tracks: writer.tracks)
    }

    /// Gives every stream's thread `sink` and returns when all have ended. `poll` runs on the
    /// calling thread every 50 ms meanwhile.
    func runThreads(_ streams: [RecordedStream], into sink: PacketSink, poll: () -> Void = {}) {
        for s in streams { s.open(sink) }
        while group.wait(timeout: .now() + .milliseconds(50)) == .timedOut { poll() }
        poll()
    }
}
