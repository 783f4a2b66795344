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

    public init(streams: [String], path: String) { self.streams = streams; self.path = path }
}

/// What a recording run did.
public struct RecordReport: Sendable {
    public var frames: [Int] = []
    public var bytes: Int64 = 0
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

/// The record a frame's header gives (capture offset filled in by the writer).
func frameRecord(_ frame: borrowing Frame) -> FrameRecord? {
    let h = frame.header
    guard let format = h.format else { return nil }
    var r = FrameRecord(format: format)
    r.description = h.description
    r.sequence = h.sequence
    r.epoch = h.epoch
    return r
}

/// One stream being recorded: its consumer and encoder, run on its own thread.
final class RecordedStream: @unchecked Sendable {
    let index: Int
    let consumer: Consumer
    let encoder: TrackEncoder
    var spec: TrackSpec?
    var firstPackets: [EncodedFrame] = []
    var firstCapture: UInt64 = 0
    var error: Error?

    init(index: Int, name: String, settings: RecordSettings, stop: @escaping @Sendable () -> Bool) throws {
        self.index = index
        var options = ConsumerOptions(mode: .lossless)
        options.waitSeconds = settings.waitSeconds
        options.name = ClientName.fit("record \(settings.path)")
        consumer = try Consumer(stream: name, options: options)
        consumer.shouldStop = stop
        encoder = TrackEncoder(codec: settings.codec)
    }

    /// Takes the stream's first frame and encodes it; false when the stream ended first.
    func start(codec: RecordingCodec) throws -> Bool {
        guard let frame = try consumer.next() else { return false }
        guard let record = frameRecord(frame) else {
            throw RecordingError.cannotWrite(consumer.stream, "its pixel format '\(frame.header.pixelFormatName)' is unknown to this build")
        }
        firstCapture = record.description.captureNanos
        encoder.rate = consumer.nominalRate
        firstPackets = try encoder.encode(frame, record: record)
        spec = TrackSpec(name: consumer.stream, rate: consumer.nominalRate, format: record.format,
                         description: record.description, codec: encoder.containerRaw == true ? .raw : codec)
        spec?.extradata = encoder.extradata
        frame.release()
        return true
    }

    /// Records frames into `sink` until the stream ends or `stop` says so.
    func run(into sink: PacketSink, stop: () -> Bool) {
        do {
            for e in firstPackets { try sink.take(e, track: index) }
            firstPackets = []
            while !stop(), let frame = try consumer.next() {
                guard let record = frameRecord(frame) else { frame.release(); continue }
                let packets = try encoder.encode(frame, record: record)
                frame.release()
                for e in packets { try sink.take(e, track: index) }
            }
            for e in try encoder.flush() { try sink.take(e, track: index) }
        } catch {
            self.error = error
        }
        do { try sink.end(track: index) } catch { self.error = self.error ?? error }
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

    public init(settings: RecordSettings, stop: @escaping @Sendable () -> Bool) {
        self.settings = settings
        self.stopRequested = stop
    }

    private var shouldStop: Bool {
        failed.lock()
        defer { failed.unlock() }
        return failure || stopRequested()
    }

    /// Attaches to every stream and takes its first frame (the header needs every track's
    /// format); nil when a stop came first.
    func attach() throws -> [RecordedStream]? {
        try Self.checkWritable(settings.path)
        var streams: [RecordedStream] = []
        for (i, name) in settings.streams.enumerated() {
            let s = try RecordedStream(index: i, name: name, settings: settings) { [unowned self] in shouldStop }
            guard try s.start(codec: settings.codec) else {
                if stopRequested() { return nil }
                throw RecordingError.cannotRead(name, "the stream ended before its first frame")
            }
            streams.append(s)
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
        let writer = try RecordingWriter(path: settings.path, tracks: streams.compactMap(\.spec), baseCaptureNanos: base)
        runThreads(streams, into: writer)
        try writer.finish()
        if let error = streams.compactMap(\.error).first { throw error }
        return RecordReport(frames: writer.frames, bytes: writer.bytesWritten,
                            rawFallbacks: streams.map(\.encoder.rawFallbacks), tracks: writer.tracks)
    }

    /// One thread per stream; returns when all have ended. `poll` runs on the calling
    /// thread every 50 ms meanwhile.
    func runThreads(_ streams: [RecordedStream], into sink: PacketSink, poll: () -> Void = {}) {
        let group = DispatchGroup()
        for s in streams {
            group.enter()
            pthread_detach(spawnThread { [self] in
                s.run(into: sink) { shouldStop }
                if s.error != nil {
                    failed.lock()
                    failure = true
                    failed.unlock()
                }
                group.leave()
            })
        }
        while group.wait(timeout: .now() + .milliseconds(50)) == .timedOut { poll() }
        poll()
    }
}
