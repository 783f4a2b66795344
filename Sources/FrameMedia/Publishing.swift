import FrameServer
import Glibc

/// Sleeps until `ns` on the monotonic clock; returns early when `shouldStop` says so after
/// a signal interrupted the sleep.
public func sleepUntil(_ ns: UInt64, shouldStop: () -> Bool = { false }) {
    guard ns > monotonicNanos() else { return }
    var ts = timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR, !shouldStop() {}
}

/// How decoded pictures reach the pool: the choice `produce -i` makes.
public enum PublishPath: String, Sendable, Equatable {
    /// The decoder decodes straight into the pool's slots where the codec allows it
    /// (`SlotAllocator`); the other frames are copied once.
    case zeroCopy = "zero-copy"
    /// Every frame decoded into FFmpeg's memory and copied once into a slot.
    case copy
    /// Every frame converted into a slot by libswscale (`--pix-fmt`, `--size`).
    case convert = "libswscale"

    /// Converting wins over everything; else zero copy unless a copy is asked for.
    public init(converting: Bool, copy: Bool) {
        self = converting ? .convert : copy ? .copy : .zeroCopy
    }

    /// The pool's default size on this path: zero copy needs room for the decoder's
    /// reference pictures, which it may keep in up to N - 2 slots.
    public var defaultSlots: Int { self == .zeroCopy ? 16 : 8 }
}

/// How `produce -i` publishes an input: whether it is a live source, how many lossless
/// consumers it waits for before its first frame, and whether it takes run-time controls.
public struct PublishPolicy: Sendable, Equatable {
    /// Never wait for a slot (drop and count): -re / --readrate and capture devices
    /// (x11grab, v4l2, ...) set the pace, and a live source drops at the source.
    public let liveSource: Bool
    /// Lossless consumers to wait for before publishing (0: publish at once).
    public let waitFor: Int
    /// The wait is the default one, not asked for: a file waits for its first lossless
    /// consumer (issue 12), so no frame goes to nobody; it says so once.
    public let waitsByDefault: Bool
    /// A file (not a device) takes run-time controls (`framesrv ctl`) from the moment its stream exists.
    public let takesControls: Bool

    /// `liveRequested`: --live-source; `readrate`: -re (1) or --readrate X; `noWait`:
    /// --no-wait; `waitFor`: --wait-for N (0 when not given). A generator (-f lavfi) is a
    /// device that is not a live source: it publishes at once, as --pattern does.
    public init(liveRequested: Bool, readrate: Double?, noWait: Bool, waitFor: Int, isLiveSource: Bool, isDevice: Bool) {
        liveSource = liveRequested || readrate != nil || isLiveSource
        waitsByDefault = !liveSource && !isDevice && !noWait && waitFor == 0
        self.waitFor = waitsByDefault ? 1 : waitFor
        takesControls = !isDevice
    }

    /// The policy for `decoder`'s input (whether it is a device, whether a live one).
    public init(liveRequested: Bool, readrate: Double?, noWait: Bool, waitFor: Int, decoder: MediaDecoder) {
        self.init(liveRequested: liveRequested, readrate: readrate, noWait: noWait, waitFor: waitFor,
                  isLiveSource: decoder.isLiveSource, isDevice: decoder.isDevice)
    }
}

/// What publishing a media input did: the figures of produce's summary line.
public struct MediaPublishReport: Sendable {
    public var decoded = 0
    /// Frames published where the decoder wrote them (zero copy).
    public var inPlace: UInt64 = 0
    /// Frames copied once into a slot.
    public var copied = 0
    /// Frames converted by libswscale.
    public var converted = 0
    /// Each new frame format, in order.
    public var formats: [FrameFormat] = []
    public var seconds = 0.0
    public init(seconds: Double = 0) { self.seconds = seconds }
}

/// Where `MediaPublisher.run` puts each decoded picture: a host stream (`Producer`) or a CUDA
/// stream (`CUDAStreamProducer`).
public protocol PictureTarget: AnyObject {
    /// Before the first frame.
    func begin(_ publisher: MediaPublisher, live: Bool)
    /// Publishes one picture, counting in `report` how.
    func publish(_ picture: borrowing DecodedFrame, _ description: FrameDescription, by publisher: MediaPublisher,
                 report: inout MediaPublishReport) throws
    /// Frames published where the decoder wrote them (zero copy).
    var publishedInPlace: UInt64 { get }
}

extension Producer: PictureTarget {
    public func begin(_ publisher: MediaPublisher, live: Bool) { publisher.lendSlots(of: self, wait: !live) }
    public func publish(_ picture: borrowing DecodedFrame, _ description: FrameDescription, by publisher: MediaPublisher,
                        report: inout MediaPublishReport) throws {
        try publisher.publish(picture, description, into: self, report: &report)
    }
}

extension CUDAStreamProducer: PictureTarget {
    public func begin(_ publisher: MediaPublisher, live: Bool) {}
    public var publishedInPlace: UInt64 { 0 }
    /// One copy per plane into a CUDA slot: device to device from NVDEC, an upload from a
    /// software decoder (--memory cuda, or a codec NVDEC does not decode).
    public func publish(_ picture: borrowing DecodedFrame, _ description: FrameDescription, by publisher: MediaPublisher,
                        report: inout MediaPublishReport) throws {
        let format = try picture.frameFormat()
        if report.formats.last != format { report.formats.append(format) }
        let (planes, pitches) = picture.planeAddresses(of: format)
        if try publish(planes: planes, pitches: pitches, onDevice: picture.isCUDA, format: format, description: description) {
            report.copied += 1
        }
    }
}

/// Decodes a media input and publishes every frame into a producer's pool, by the path
/// `PublishPath` chooses. The decoder and its allocator are made together: with zero
/// copy the decoder's buffers are the pool's slots.
public final class MediaPublisher {
    public let decoder: MediaDecoder
    public let path: PublishPath
    private let converter: FrameConverter?
    private let allocator: SlotAllocator?

    public init(input: String, formatName: String?, threads: Int, options: MediaInputOptions,
                converter: FrameConverter?, copy: Bool) throws(MediaInputError) {
        // NVDEC decodes into its own surfaces: each frame is copied into its slot on the device.
        path = PublishPath(converting: converter != nil, copy: copy || options.cudaDevice != nil)
        allocator = path == .zeroCopy ? SlotAllocator() : nil
        self.converter = converter
        decoder = try MediaDecoder(input: input, formatName: formatName, threads: threads, options: options, allocator: allocator)
    }

    /// The input's exact frame rate (`av_guess_frame_rate`), if it has one.
    public var frameRate: Rational? { decoder.frameRate }

    /// Publishes up to `frames` frames into `producer` (which must stay open until `close()`),
    /// each when `clock` releases it: paced at the clock's rate (ffmpeg's -readrate; max: as
    /// fast as the consumers take them), held while paused, one by one when stepped. A seek
    /// asked for through the clock is performed here, between frames: the first frame after
    /// it carries the discontinuity flag. `live`: never wait for a slot (drop instead).
    /// `seekFailed` hears why a seek could not be done (playback goes on where it was).
    public func run(into target: some PictureTarget, live: Bool, clock: PlaybackClock, frames: Int?,
                    seekFailed: (String) -> Void = { _ in }, shouldStop: @escaping () -> Bool) throws -> MediaPublishReport {
        var report = MediaPublishReport()
        let start = monotonicNanos()
        guard decoder.hasVideo else {
            report.seconds = try decoder.runSound(clock: clock, seekFailed: seekFailed, shouldStop: shouldStop)
            return report
        }
        target.begin(self, live: live)
        var discontinuity = false
        var publishedPlay: Int?   // the play (loops before it) of the last frame published
        playing: while !shouldStop(), frames.map({ report.decoded < $0 }) ?? true, let picture = decoder.next() {
            var description = picture.description
            let place = decoder.filePosition(of: description).map { PlaybackClock.FilePlace(position: $0, loops: decoder.loopsPlayed) }
            switch clock.wait(toRelease: decoder.mediaTime(of: description), file: place, shouldStop: shouldStop) {
            case .stopped: break playing
            case .seek(let target):
                do {
                    try decoder.seek(to: target)
                    // The frame dropped here may have begun the next play: the seek is within the play last seen.
                    if let publishedPlay { decoder.returnToPlay(publishedPlay) }
                    discontinuity = true
                } catch {
                    seekFailed("seek to \(formatFixed(target, 3)) s failed: \(error)")
                }
                clock.didSeek(to: target)
                continue playing
            case .now: break
            }
            report.decoded += 1
            // The capture clock is the moment of release: paced frames say when they went out.
            description.captureNanos = monotonicNanos()
            if discontinuity { description.flags.insert(.discontinuity) }
            discontinuity = false
            try target.publish(picture, description, by: self, report: &report)
            publishedPlay = place?.loops ?? decoder.loopsPlayed
        }
        if let failure = decoder.audioFailure { throw failure }
        report.inPlace = target.publishedInPlace
        report.seconds = Double(monotonicNanos() - start) / 1e9
        return report
    }

    /// A picture into a host stream's slot: where the decoder put it, copied, or converted.
    func publish(_ picture: borrowing DecodedFrame, _ description: FrameDescription, into producer: Producer,
                 report: inout MediaPublishReport) throws {
        let format = try converter?.outputFormat(for: picture) ?? picture.frameFormat()
        if report.formats.last != format { report.formats.append(format) }
        if converter == nil, picture.publishInPlace(to: producer, description: description) { return }
        // A new size or pixel format is just a new reservation: the producer starts a new epoch.
        guard var slot = try producer.reserve(format) else { return }   // dropped at the source
        if let converter {
            var converted = try converter.convert(picture, into: slot)
            converted.captureNanos = description.captureNanos
            if description.flags.contains(.discontinuity) { converted.flags.insert(.discontinuity) }
            slot.description = converted
            report.converted += 1
        } else {
            picture.copyPlanes(into: slot)
            slot.description = description
            report.copied += 1
        }
        slot.publish()
    }

    /// A host stream lends the decoder its slots (zero copy), when this path decodes into them.
    func lendSlots(of producer: Producer, wait: Bool) { allocator?.attach(producer, wait: wait) }

    /// Frees the decoder first: that ends the leases of the slots it still references.
    public func close() { decoder.close() }
}

extension MediaDecoder {
    /// Sound only: the audio track publishes as packets are read, each frame when the clock
    /// releases it (-re, --readrate, --paused, step). A seek asked for through the clock is
    /// performed between packets (the frames the clock holds meanwhile are dropped); the
    /// first frame after it carries the discontinuity flag. Returns the seconds it ran.
    func runSound(clock: PlaybackClock, seekFailed: (String) -> Void, shouldStop: @escaping () -> Bool) throws -> Double {
        let start = monotonicNanos()
        var stopped = false, seekTarget: Double?, publishedPlay: Int?
        defer { audio?.beforePublish = nil }   // (it holds this decoder)
        audio?.beforePublish = { seconds in
            guard seekTarget == nil else { return false }
            // Where the frame lies in the file (status, ls, seek +T): its time in this play, from where the play began.
            let place = PlaybackClock.FilePlace(position: max(0, seconds - (self.audio?.loopSeconds ?? 0)) + self.playOrigin,
                                                loops: self.loopsPlayed)
            switch clock.wait(toRelease: seconds, file: place, shouldStop: shouldStop) {
            case .now:
                publishedPlay = place.loops
                return true
            case .stopped: stopped = true
            case .seek(let target): seekTarget = target
            }
            return false
        }
        while !shouldStop(), !stopped {
            if let target = seekTarget {
                do {
                    try seek(to: target)
                    // As with pictures: the frame the clock held may have begun the next play.
                    if let publishedPlay { returnToPlay(publishedPlay) }
                } catch { seekFailed("seek to \(formatFixed(target, 3)) s failed: \(error)") }
                clock.didSeek(to: target)
                seekTarget = nil
            }
            guard pumpAudio(), audio?.reachedDuration != true else { break }
        }
        if let failure = audioFailure { throw failure }
        return Double(monotonicNanos() - start) / 1e9
    }

    /// A frame's time in seconds in this input's time base, nil without a pts.
    func seconds(of description: FrameDescription) -> Double? {
        guard let pts = description.pts, timeBase.den > 0 else { return nil }
        return Double(pts) * Double(timeBase.num) / Double(timeBase.den)
    }
}

/// What the built-in test pattern publishes.
public struct PatternPlan: Sendable {
    public var pixelFormat: PixelFormat
    public var width: Int
    public var height: Int
    /// Frames per second, exact (nil: as fast as the consumers allow).
    public var rate: Rational?
    /// Stop after this many frames (nil: until told to stop).
    public var frames: Int?
    /// Paint each slot once and republish it (benchmarks: no verifiable content).
    public var paintOnce = false
    /// From frame `frame` (1-based) on, this size.
    public var sizeChanges: [(frame: UInt64, width: Int, height: Int)] = []

    public init(pixelFormat: PixelFormat, width: Int, height: Int, rate: Rational?, frames: Int?) {
        self.pixelFormat = pixelFormat; self.width = width; self.height = height
        self.rate = rate; self.frames = frames
    }
}

/// The reserve-paint-publish loop of the built-in test pattern (produce --pattern, bench).
public enum PatternPublisher {
    /// Publishes `plan` into `producer`; returns the last frame format.
    @discardableResult
    public static func run(_ plan: PatternPlan, into producer: Producer,
                           shouldStop: () -> Bool) throws(ProducerError) -> FrameFormat {
        var format = FrameFormat(plan.pixelFormat, width: plan.width, height: plan.height)
        var painted = Set<UInt32>()
        let start = monotonicNanos()
        var index: UInt64 = 0
        var firstCapture: UInt64?
        while !shouldStop() {
            if let frames = plan.frames, index >= UInt64(frames) { break }
            if let change = plan.sizeChanges.last(where: { $0.frame <= index + 1 }) {
                format = FrameFormat(plan.pixelFormat, width: change.width, height: change.height)
            }
            if let rate = plan.rate, rate.num > 0, rate.den > 0 {
                // Frame index / rate, in integer nanoseconds: exact for any rational rate.
                let due = UInt64(index).multipliedFullWidth(by: UInt64(rate.den) * 1_000_000_000)
                sleepUntil(start + UInt64(rate.num).dividingFullWidth(due).quotient, shouldStop: shouldStop)
            }
            index += 1
            guard var frame = try producer.reserve(format) else { continue }   // dropped at the source
            if !plan.paintOnce || painted.insert(frame.slot).inserted {
                TestPattern.fill(frame, sequence: producer.nextSequence)
            }
            let now = monotonicNanos()
            if firstCapture == nil { firstCapture = now }
            frame.description = description(format: format, index: index, rate: plan.rate,
                                             last: plan.frames.map { index == UInt64($0) } ?? false,
                                             captureNanos: now, firstCapture: firstCapture)
            frame.publish()
        }
        return format
    }

    /// Frame `index` (1-based): time base 1/rate (`rate_den/rate_num`), pts index - 1,
    /// duration 1; without a rate, time base 1/1000000 and pts the microseconds of the
    /// capture time since `firstCapture` (PROTOCOL.md 4.2). Progressive, chroma unspecified.
    public static func description(format: FrameFormat, index: UInt64, rate: Rational?, last: Bool,
                                   captureNanos: UInt64 = monotonicNanos(), firstCapture: UInt64? = nil) -> FrameDescription {
        var d = FrameDescription()
        d.color = ColorDescription.ofPattern(format.pixelFormat)
        d.sampleAspectRatio = Rational(1, 1)
        if let rate, rate.num > 0, rate.den > 0 {
            d.timeBase = Rational(rate.den, rate.num)
            d.pts = Int64(index - 1)
            d.duration = 1
        } else {
            d.timeBase = Rational(1, 1_000_000)
            d.pts = Int64((captureNanos - min(captureNanos, firstCapture ?? captureNanos)) / 1000)
            d.duration = 0
        }
        d.captureNanos = captureNanos
        d.fieldOrder = .progressive
        d.flags = last ? [.keyframe, .endOfStream] : [.keyframe]
        return d
    }
}
