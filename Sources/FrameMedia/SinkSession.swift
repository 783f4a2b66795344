import FrameServer
import Glibc

/// What a sink does besides writing frames: when it stops, what it checks, how long it holds.
public struct SinkSettings: Sendable {
    /// Stop after this many frames (nil: at the end of the stream).
    public var frames: Int?
    /// Check every byte of every frame against the test pattern (`TestPattern.verify`).
    public var verify = false
    /// Hold each frame this many microseconds (a random one of the range) before releasing it.
    public var hold: ClosedRange<Int>?
    /// Leave the first this many frames out of the latency percentiles (a benchmark's warm-up).
    public var latencyWarmup = 0
    public init() {}
}

/// What a sink's pass over its stream came to: its statistics, and how the stream ended.
public struct SinkReport: Sendable {
    public let statistics: SinkStatistics
    /// The producer's pid, when the pass stopped while its producer was gone without ending
    /// the stream (the stream did not end).
    public let producerGone: Int32?
    /// The producer ended the stream after its input failed.
    public let sourceFailed: Bool
}

/// One sink's pass over its stream (`framesrv sink`): every frame to the outputs, verified,
/// logged (`attach PID`, `frame SEQ`, `corrupt SEQ`, `gone PID`), held and counted, until
/// the stream ends, `settings.frames` are read, or `shouldStop`; then the outputs are completed.
public final class SinkSession {
    public let consumer: Consumer
    public let outputs: SinkOutputs
    public let log: SequenceLog
    public let settings: SinkSettings
    public private(set) var statistics = SinkStatistics()
    /// The media time the frames read cover (kept only while `onProgress` is set).
    public private(set) var clock = MediaClock()
    /// Called once when the stream does not exist yet and the consumer waits for it.
    public var onWaiting: (() -> Void)?
    /// Called when the producer exited without ending the stream (its pid).
    public var onProducerGone: ((Int32) -> Void)?
    /// Called once, after the first frame is written to the outputs (their notes are known then).
    public var onFirstFrame: (() -> Void)?
    /// The sound recorded beside the frames (`sink --record FILE --audio NAME`): its first
    /// frame's format goes into the recording's header, then its frames are encoded in
    /// timestamp order with the pictures.
    public var audio: AudioFeed?
    /// Called once when the recording waits for the audio's first frame (what it waits for).
    public var onAudioWait: ((String) -> Void)?
    /// Called after every frame: frames read, the media time they cover, the recording's size.
    public var onProgress: ((_ frames: Int, _ mediaSeconds: Double, _ bytes: Int64?) -> Void)?
    private let shouldStop: () -> Bool
    private var producerGone: Int32?
    private var frameRate: Rational?
    private var rng = SystemRandomNumberGenerator()

    public init(consumer: Consumer, outputs: SinkOutputs, log: SequenceLog, settings: SinkSettings,
                shouldStop: @escaping () -> Bool) {
        self.consumer = consumer
        self.outputs = outputs
        self.log = log
        self.settings = settings
        statistics.latencyWarmup = settings.latencyWarmup
        self.shouldStop = shouldStop
        consumer.shouldStop = shouldStop
        consumer.onEvent = { [unowned self] event in
            switch event {
            case .waiting:
                self.onWaiting?()
            case .attached(let pid):
                self.log.write("attach \(pid)")
                self.producerGone = nil
            case .producerGone(let pid):
                self.log.write("gone \(pid)")
                self.producerGone = pid
                self.onProducerGone?(pid)
            }
        }
    }

    /// Reads the stream to its end (or `settings.frames`, or `shouldStop`) and completes the
    /// outputs. On an error the outputs are completed too (what was written is kept), then it is thrown.
    public func run() throws -> SinkReport {
        audio?.start()
        defer { audio?.stop() }
        do {
            try consume()
            try feedAudio(upTo: nil)
        } catch {
            try? outputs.finish()
            throw error
        }
        try outputs.finish()
        statistics.missed = consumer.missed
        return SinkReport(statistics: statistics, producerGone: producerGone, sourceFailed: consumer.sourceFailed)
    }

    private func consume() throws {
        let start = monotonicNanos()
        defer { statistics.seconds = Double(monotonicNanos() - start) / 1e9 }
        while !shouldStop(), settings.frames.map({ statistics.received < $0 }) ?? true, let frame = try consumer.next() {
            statistics.record(frame)
            if statistics.received == 1 {
                // ffmpeg's framemd5 time base is 1/frame rate: the producer's exact nominal rate.
                frameRate = consumer.nominalRate
                outputs.frameRate = frameRate
            }
            if statistics.received == 1, let audio, let file = outputs.mediaFile {
                file.audioFormat = audio.firstFormat { [weak self] in self?.onAudioWait?($0) }
            }
            try outputs.write(frame)
            let d = frame.header.description
            try feedAudio(upTo: d.pts.map { Double($0) * d.timeBase.doubleValue } ?? clock.seconds)
            if statistics.received == 1 { onFirstFrame?() }
            if settings.verify, !TestPattern.verify(frame) {
                statistics.corrupt += 1
                log.write("corrupt \(frame.sequence)")
            }
            log.write("frame \(frame.sequence)")
            if onProgress != nil { clock.record(frame.header.description, frameRate: frameRate?.doubleValue) }
            hold()
            frame.release()
            onProgress?(statistics.received, clock.seconds, outputs.bytesRecorded)
        }
    }

    /// Encodes the queued sound up to `seconds` of media time (nil: all of it, to the audio
    /// stream's end) into the recording.
    private func feedAudio(upTo seconds: Double?) throws {
        guard let audio, let file = outputs.mediaFile, file.audioFormat != nil else { return }
        try audio.take(upTo: seconds) { frame, format throws(MediaOutputError) in try file.writeAudio(frame, format) }
    }

    /// `settings.hold`: keeps the frame that long before releasing it.
    private func hold() {
        guard let hold = settings.hold else { return }
        let us = hold.lowerBound == hold.upperBound ? hold.lowerBound : Int.random(in: hold, using: &rng)
        if us > 0 { usleep(UInt32(us)) }
    }
}
