import FrameMedia
import FrameServer
import Glibc

/// `framesrv produce`: publishes a stream.
enum ProduceCommand: Command {
    static let name = "produce"
    static let summary = "publish a stream (-i INPUT: a decoded media file; --pattern: the built-in test pattern)"
    static let help = """
    usage: framesrv produce -i INPUT --out NAME [-f FMT] [-ss T] [-t D] [--loop N] [-re | --readrate X]
                           [--pix-fmt FMT] [--size WxH] [--frames N] [--slots N] [--threads N] [--strict]
                           [--wait-for N]
           framesrv produce --pattern --out NAME [options]

    Publishes frames into shared memory as stream NAME and announces each over ZeroMQ.

      -i, --input INPUT    decode the first video stream of INPUT (a file, or - for standard
                           input) with FFmpeg and publish every frame, with its timestamps
                           (rebased to start at 0, as ffmpeg does), colour, aspect ratio and
                           key flag; ends the stream at the end of the input. Decode errors
                           are counted and skipped, as ffmpeg does.
      -f FMT               force the input format (ffmpeg's -f, e.g. yuv4mpegpipe for a pipe), or
                           an input device, as ffmpeg: -f lavfi -i testsrc2=size=320x240:rate=30,
                           -f x11grab -i :0, -f v4l2 -i /dev/video0. A capture device (every device
                           but lavfi) is a live source: the producer never waits for consumers
      --strict             with -i: the first decode error ends the stream and is an error (exit
                           status 1) instead of being counted and skipped
      -ss T                start at T (seconds, or [HH:]MM:SS[.xxx]) as ffmpeg's input -ss: seek to
                           the keyframe before T, decode and drop the frames before it; timestamps
                           start at 0 there
      -t D                 stop after D of output (same syntax), as ffmpeg's input -t
      --loop N             play the input N more times (-1: forever), timestamps continuing
                           (ffmpeg's -stream_loop N)
      -re                  publish each frame when its timestamp is due (ffmpeg's -re); makes the
                           producer a live source: it never waits for consumers, drops and counts
      --readrate X         the same at X times real time (ffmpeg's -readrate)
      --pix-fmt FMT        with -i: convert to FMT with libswscale (as ffmpeg's -pix_fmt: bicubic,
                           the source's colour matrix and range); the header's colour follows
      --size WxH           with -i: scale to WxH with libswscale (as ffmpeg's -s)
      --threads N          decoder threads (default 0: FFmpeg decides, as ffmpeg does)
                           With -i and no conversion the decoder decodes straight into the
                           pool's slots (zero copy) where the codec allows it (AV_CODEC_CAP_DR1);
                           a slot the decoder still uses as a reference picture is not reused
                           until it lets go. Other frames are copied once into a slot; the
                           summary line counts both.
      --copy               with -i: decode into FFmpeg's own memory and copy every frame
      --pattern            the built-in moving test pattern (every byte derived from the
                           frame's sequence number, so consumers can verify it)
      --out NAME           the stream to create
      --size WxH           frame size (default 640x360)
      --pix-fmt FMT        pixel format (default yuv420p): \(PixelFormat.allCases.map { $0.name }.joined(separator: ", "))
      --rate FPS|max       frames per second, or as fast as consumers allow (default 30)
      --frames N           stop after N frames and end the stream (default: until SIGINT)
      --slots N            slots in the pool, 1..64 (default 8; 16 with -i and zero copy, room
                           for the decoder's reference pictures, which it may keep in up to
                           N - 2 slots)
      --live-source        never wait for consumers: drop a frame when no slot is free
      --wait-for N         publish nothing until N lossless consumers are attached
      --fill once          paint each slot once and republish it (benchmarks: no verifiable content)
      --sndhwm N           ZeroMQ send high-water mark in messages (default 1000)
      --size-change-at K:WxH  switch to size WxH from frame K on (repeatable as K:WxH,K:WxH)
      --quiet              no summary line
    """

    static func run(_ args: inout Arguments) throws -> Int32 {
        let pattern = args.flag("--pattern")
        let mediaInput = try args.value("--input", "-i")
        let inputFormat = try args.value("-f", "--format")
        let threads = try args.int("--threads", range: 0...256) ?? 0
        let out = try args.value("--out", "-o")
        let sizeText = try args.value("--size", "-s")
        let size = try parseSize(sizeText ?? "640x360", option: "--size")
        let fmtText = try args.value("--pix-fmt", "-pix_fmt")
        let fmtName = fmtText ?? "yuv420p"
        let startText = try args.value("-ss")
        let durationText = try args.value("-t")
        let loops = try args.int("--loop", "-stream_loop", range: -1...Int(Int32.max)) ?? 0
        let realTime = args.flag("-re", "--re")
        let readrate = try args.double("--readrate", range: 0.001...1000)
        let rateText = try args.value("--rate", "-r") ?? "30"
        let frames = try args.int("--frames", "-frames", range: 1...Int(Int32.max))
        let slotsGiven = try args.int("--slots", range: 1...64)
        let slots = slotsGiven ?? 8
        let liveSource = args.flag("--live-source")
        let copy = args.flag("--copy")
        let waitFor = try args.int("--wait-for", range: 0...63) ?? 0
        let fillOnce = try args.value("--fill").map { v throws(UsageError) -> Bool in
            guard v == "once" || v == "every" else { throw UsageError("--fill must be 'once' or 'every', not '\(v)'") }
            return v == "once"
        } ?? false
        let hwm = try args.int("--sndhwm", range: 1...1_000_000) ?? 1000
        let changes = try parseSizeChanges(try args.value("--size-change-at"))
        let quiet = args.flag("--quiet", "-q")
        let strict = args.flag("--strict")
        try args.finish()

        guard pattern != (mediaInput != nil) else {
            throw UsageError("say what to produce: -i INPUT (a media file, - for standard input) or --pattern")
        }
        guard let out else { throw UsageError("missing --out NAME: the stream to create") }
        if let mediaInput {
            var options = MediaInputOptions(loops: loops, strict: strict)
            if let startText {
                guard let t = MediaInputOptions.parseTime(startText), t >= 0 else {
                    throw UsageError("-ss must be a time (seconds, or [HH:]MM:SS[.xxx]), not '\(startText)'")
                }
                options.start = t
            }
            if let durationText {
                guard let t = MediaInputOptions.parseTime(durationText), t > 0 else {
                    throw UsageError("-t must be a positive time (seconds, or [HH:]MM:SS[.xxx]), not '\(durationText)'")
                }
                options.duration = t
            }
            guard !(realTime && readrate != nil) else { throw UsageError("-re and --readrate X are one choice: -re is --readrate 1") }
            var pixelFormat: PixelFormat?
            if let fmtText {
                guard let f = PixelFormat(name: fmtText) else {
                    throw UsageError("unknown pixel format '\(fmtText)'; known: \(PixelFormat.allCases.map(\.name).joined(separator: ", "))")
                }
                pixelFormat = f
            }
            let converter = pixelFormat != nil || sizeText != nil
                ? FrameConverter(pixelFormat: pixelFormat, size: sizeText != nil ? size : nil) : nil
            return try produceMedia(input: mediaInput, formatName: inputFormat, threads: threads, options: options,
                                    readrate: realTime ? 1 : readrate, converter: converter, out: out,
                                    frames: frames, slots: slotsGiven ?? (converter == nil && !copy ? 16 : 8), liveSource: liveSource, waitFor: waitFor,
                                    hwm: hwm, quiet: quiet, copy: copy)
        }
        guard inputFormat == nil else { throw UsageError("-f FMT goes with -i INPUT") }
        guard !strict else { throw UsageError("--strict goes with -i INPUT") }
        guard !copy else { throw UsageError("--copy goes with -i INPUT") }
        guard startText == nil, durationText == nil, loops == 0, !realTime, readrate == nil else {
            throw UsageError("-ss, -t, --loop, -re and --readrate go with -i INPUT")
        }
        guard let pixelFormat = PixelFormat(name: fmtName) else {
            throw UsageError("unknown pixel format '\(fmtName)'; known: \(PixelFormat.allCases.map(\.name).joined(separator: ", "))")
        }
        var rate: Double?
        if rateText != "max" {
            guard let r = Double(rateText), r >= 0.001, r <= 1_000_000 else {
                throw UsageError("--rate must be frames per second (0.001 to 1000000) or 'max', not '\(rateText)'")
            }
            rate = r
        }

        guard let producer = try openStream(out, slots: slots, liveSource: liveSource, hwm: hwm, rate: rate,
                                            waitFor: waitFor) else { return 130 }
        defer { producer.close() }

        var format = FrameFormat(pixelFormat, width: size.0, height: size.1)
        var painted = Set<UInt32>()
        let start = monotonicNanos()
        var index: UInt64 = 0
        while stopRequested == 0 {
            if let frames, index >= UInt64(frames) { break }
            if let change = changes.last(where: { $0.frame <= index + 1 }) {
                format = FrameFormat(pixelFormat, width: change.size.0, height: change.size.1)
            }
            if let rate {
                sleepUntil(start + UInt64(Double(index) * 1e9 / rate))
            }
            index += 1
            guard var frame = try producer.reserve(format) else { continue }   // dropped at the source
            let seq = producer.nextSequence
            if !fillOnce || !painted.contains(frame.slot) {
                TestPattern.fill(frame, sequence: seq)
                painted.insert(frame.slot)
            }
            frame.description = patternDescription(format: format, index: index, rate: rate,
                                                   last: frames.map { index == UInt64($0) } ?? false)
            frame.publish()
        }
        producer.finish()
        if !quiet {
            let secs = Double(monotonicNanos() - start) / 1e9
            print("produce: \(out): published \(producer.publishedCount) frames of \(format) in \(formatDouble(secs, 2)) s"
                  + " (\(formatDouble(Double(producer.publishedCount) / max(secs, 1e-9), 0)) fps), dropped \(producer.droppedCount)")
        }
        return 0
    }

    /// Decodes `input` and publishes every frame. Without `converter` (and without `copy`)
    /// the decoder decodes straight into the pool's slots where it can (`SlotAllocator`) and
    /// those frames are published where they are; the others are copied into a reserved
    /// slot, or converted into it by libswscale with `converter`. With `readrate` (X times
    /// real time) each frame waits until its timestamp is due and the producer is a live source.
    static func produceMedia(input: String, formatName: String?, threads: Int, options: MediaInputOptions,
                             readrate: Double?, converter: FrameConverter?, out: String, frames: Int?,
                             slots: Int, liveSource: Bool, waitFor: Int, hwm: Int, quiet: Bool, copy: Bool) throws -> Int32 {
        let allocator = converter == nil && !copy ? SlotAllocator() : nil
        let decoder = try MediaDecoder(input: input, formatName: formatName, threads: threads,
                                                      options: options, allocator: allocator)
        if decoder.seekFailed {
            warn("cannot seek in '\(input)': decoding from the start and dropping frames before -ss, as ffmpeg does")
        }
        let rate = decoder.frameRate.map { Double($0.num) / Double($0.den) }
        // -re / --readrate and capture devices (x11grab, v4l2, ...) set the pace: drop at the source.
        let live = liveSource || readrate != nil || decoder.isLiveSource
        guard let producer = try openStream(out, slots: slots, liveSource: live, hwm: hwm,
                                            rate: rate, waitFor: waitFor) else { return 130 }
        // The decoder goes first: freeing it ends the leases of the slots it still references.
        defer { decoder.close(); producer.close() }
        allocator?.attach(producer, wait: !live)
        let start = monotonicNanos()
        var copied = 0
        var decoded = 0
        var formats: [FrameFormat] = []
        var firstTime: Double?
        while stopRequested == 0, frames.map({ decoded < $0 }) ?? true, let picture = decoder.next() {
            decoded += 1
            if let readrate, let pts = picture.description.pts, decoder.timeBase.den > 0 {
                // -re / --readrate: publish when the frame's time (from the first frame) is due.
                let t = Double(pts) * Double(decoder.timeBase.num) / Double(decoder.timeBase.den)
                let t0 = firstTime ?? t
                firstTime = t0
                sleepUntil(start + UInt64(max(0, (t - t0) / readrate * 1e9)))
                if stopRequested != 0 { break }
            }
            let format = try converter?.outputFormat(for: picture) ?? picture.frameFormat()
            if formats.last != format { formats.append(format) }
            if converter == nil, picture.publishInPlace(to: producer, description: picture.description) { continue }
            // A new size or pixel format is just a new reservation: the producer starts a new epoch.
            guard var slot = try producer.reserve(format) else { continue }   // dropped at the source
            if let converter {
                slot.description = try converter.convert(picture, into: slot)
            } else {
                picture.copyPlanes(into: slot)
                slot.description = picture.description
                copied += 1
            }
            slot.publish()
        }
        producer.finish()
        if options.strict, let error = decoder.firstError {
            // The stream ended at the first decode error; that error is the one line reported.
            throw MediaInputError.decodeError(input, error)
        }
        if decoder.decodeErrors > 0 {
            warn("\(decoder.decodeErrors) decode error\(decoder.decodeErrors == 1 ? "" : "s") in '\(input)' (decoding went on, as ffmpeg does)")
        }
        if !quiet {
            let secs = Double(monotonicNanos() - start) / 1e9
            let what = formats.map(\.description).joined(separator: ", then ")
            let path = converter != nil ? "libswscale"
                : "\(producer.publishedInPlace) zero-copy, \(copied) copied"
            print("produce: \(out): published \(producer.publishedCount) frames of \(what.isEmpty ? "nothing" : what)"
                  + " (\(decoder.codecName), \(path)) in \(formatDouble(secs, 2)) s"
                  + " (\(formatDouble(Double(producer.publishedCount) / max(secs, 1e-9), 0)) fps),"
                  + " dropped \(producer.droppedCount), decode errors \(decoder.decodeErrors)")
        }
        return 0
    }

    /// Creates the stream and, with --wait-for, waits for that many lossless consumers;
    /// nil when SIGINT/SIGTERM came first.
    static func openStream(_ out: String, slots: Int, liveSource: Bool, hwm: Int, rate: Double?,
                           waitFor: Int) throws -> Producer? {
        var options = ProducerOptions()
        options.slots = slots
        options.liveSource = liveSource
        options.sendHighWaterMark = Int32(hwm)
        options.nominalRate = rate
        installStopHandlers()
        let producer = try Producer(stream: out, options: options)
        producer.shouldStop = { stopRequested != 0 }
        while waitFor > 0, !producer.waitForLosslessConsumers(waitFor, timeoutSeconds: 0.5) {
            if stopRequested != 0 { producer.close(); return nil }
        }
        return producer
    }

    static func patternDescription(format: FrameFormat, index: UInt64, rate: Double?, last: Bool) -> FrameDescription {
        var d = FrameDescription()
        d.color = format.pixelFormat.isRGB
            ? ColorDescription(matrix: 0, range: 2, primaries: 1, transfer: 1)
            : .bt709Limited
        d.sampleAspectRatio = Rational(1, 1)
        if let rate, rate == rate.rounded(), rate <= Double(Int32.max) {
            d.timeBase = Rational(1, Int32(rate))
            d.pts = Int64(index - 1)
            d.duration = 1
        } else {
            d.timeBase = Rational(1, 1_000_000)
            d.pts = Int64((index - 1) * UInt64(1_000_000 / (rate ?? 1_000_000)))
            d.duration = 0
        }
        d.flags = last ? [.keyframe, .endOfStream] : [.keyframe]
        return d
    }

    static func parseSizeChanges(_ text: String?) throws(UsageError) -> [(frame: UInt64, size: (Int, Int))] {
        guard let text else { return [] }
        var out: [(frame: UInt64, size: (Int, Int))] = []
        for item in text.split(separator: ",") {
            let parts = item.split(separator: ":")
            guard parts.count == 2, let k = UInt64(parts[0]), k >= 1 else {
                throw UsageError("--size-change-at takes FRAME:WxH[,FRAME:WxH...], not '\(text)'")
            }
            out.append((k, try parseSize(String(parts[1]), option: "--size-change-at")))
        }
        return out.sorted { $0.frame < $1.frame }
    }
}

func sleepUntil(_ ns: UInt64) {
    let now = monotonicNanos()
    guard ns > now else { return }
    var ts = timespec(tv_sec: Int(ns / 1_000_000_000), tv_nsec: Int(ns % 1_000_000_000))
    while clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nil) == EINTR, stopRequested == 0 {}
}
