import FoundationEssentials
import FrameControl
import FrameMedia
import FrameServer
import Glibc

/// `framesrv produce`: publishes a stream.
enum ProduceCommand: Command {
    static let name = "produce"
    static let summary = "publish a stream (-i INPUT: a decoded media file; --pattern: the built-in test pattern)"
    static let help = """
    usage: framesrv produce -i INPUT --out NAME [-f FMT] [-ss T] [-t D] [--loop N] [-re | --readrate X] [--paused]
                           [--pix-fmt FMT] [--size WxH] [--frames N] [--slots N] [--threads N] [--strict]
                           [--wait-for N [--linger S] | --no-wait] [--name NAME] [-an | --audio-out NAME] [-map 0:a:N]
                           [--hwaccel cuda | --memory cuda] [--hwaccel-device N]
           framesrv produce --pattern --out NAME [options]

    Publishes frames into shared memory as stream NAME and announces each over ZeroMQ.

      -i, --input INPUT    decode the first video stream of INPUT (a file, or - for standard
                           input) with FFmpeg and publish every frame, with its timestamps
                           (rebased to start at 0, as ffmpeg does), colour, aspect ratio and
                           key flag; ends the stream at the end of the input. Decode errors
                           are counted and skipped, as ffmpeg does.
      --audio-out NAME     with -i: publish the input's audio stream (the one ffmpeg maps beside
                           the video) as stream NAME (default: the --out name with -audio, e.g.
                           film-audio): every decoded frame with its sample format, rate and
                           channel layout, pts in 1/sample_rate as ffmpeg stamps it (decoded into
                           the slots where the decoder allows it, else copied once). Its lossless
                           consumers count for --wait-for too. With --loop, each play lasts as
                           long as its sound, for both streams (as ffmpeg's -stream_loop). Read
                           it with 'framesrv sink --framemd5'
      -map 0:a:N           with -i: the input's Nth audio stream (from 0) instead of the one ffmpeg picks
      -an                  with -i: publish no audio
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
      --paused             with -i: start paused (framesrv ctl NAME resume / step N / seek T)
                           A file (not a device) takes run-time controls from
                           framesrv ctl NAME pause|resume|toggle|seek T|rate X|step [N]|status
                           over its control socket (NAME.control in the runtime directory):
                           -re / --readrate set the starting rate; without them it plays as fast
                           as its consumers take frames, and pause, step and seek still work
      --pix-fmt FMT        with -i: convert to FMT with libswscale (as ffmpeg's -pix_fmt: bicubic,
                           the source's colour matrix and range); the header's colour follows
      --size WxH           with -i: scale to WxH with libswscale (as ffmpeg's -s)
      --threads N          decoder threads (default 0: FFmpeg decides, as ffmpeg does)
                           With -i and no conversion the decoder decodes straight into the
                           pool's slots (zero copy) where the codec allows it (AV_CODEC_CAP_DR1);
                           a slot the decoder still uses as a reference picture is not reused
                           until it lets go. Other frames are copied once into a slot; the
                           summary line counts both.
      --hwaccel cuda       with -i: decode with NVDEC (ffmpeg's -hwaccel cuda -hwaccel_output_format
                           cuda) and publish a CUDA stream: the frames stay in GPU memory (nv12,
                           p010le), each copied once on the device from NVDEC's surface into its
                           slot (counted in the summary line). A codec NVDEC cannot decode is
                           decoded on the CPU and uploaded. Read it with a CUDA consumer (C,
                           Python: torch.from_dlpack) or 'framesrv-cuda download'. The sound is
                           a host audio stream beside it (--audio-out, -an, -map as above);
                           --pix-fmt, --size and --copy do not apply
      --memory cuda        with -i: decode on the CPU and publish a CUDA stream (one upload a frame)
      --hwaccel-device N   the CUDA device (default 0, as CUDA_VISIBLE_DEVICES numbers them)
      --copy               with -i: decode into FFmpeg's own memory and copy every frame (sound too)
                           (on a damaged input, areas the decoder could not decode then hold
                           what ffmpeg's own buffers held, as in ffmpeg's output; zero copy
                           leaves there what the slot held, an earlier frame of this stream)
      --pattern            the built-in moving test pattern (every byte derived from the
                           frame's sequence number, so consumers can verify it)
      --out NAME           the stream to create
      --size WxH           frame size (default 640x360)
      --pix-fmt FMT        pixel format (default yuv420p): \(PixelFormat.allCases.map { $0.name }.joined(separator: ", "))
      --rate FPS|max       frames per second: N, N/D (30000/1001) or a decimal (29.97 is 2997/100,
                           as FFmpeg reads it), or max: as fast as consumers allow (default 30).
                           Frames get time base 1/rate (pts 0, 1, 2, ...); with max, 1/1000000
                           and pts from the capture time
      --frames N           stop after N pictures and end the stream (default: until SIGINT; a file
                           of sound only refuses it: -t D)
      --slots N            slots in the pool, 1..64 (default 8; 16 with -i and zero copy, room
                           for the decoder's reference pictures, which it may keep in up to
                           N - 2 slots)
      --live-source        never wait for consumers: drop a frame when no slot is free
      --wait-for N         publish nothing until N lossless consumers are attached. With -i and
                           a file (not -re, --readrate, a capture device or -f lavfi) the default is 1:
                           the first lossless consumer gets every frame from the first.
                           Once every lossless consumer has left (and no live one is attached),
                           it publishes nothing: it waits --linger seconds for a consumer, then ends
      --linger S           with --wait-for: how long to wait for a consumer once every one has
                           left, before ending the stream (default 5; -1: for ever)
      --no-wait            with -i: publish at once, even to nobody (--wait-for 0)
      --name NAME          what this producer is called in ls/top/inspect (default: its role,
                           'produce in.mp4' or 'produce pattern'; at most 31 bytes are kept)
      --fill once          paint each slot once and republish it (benchmarks: no verifiable content)
      --sndhwm N           ZeroMQ send high-water mark in messages (default 1000)
      --size-change-at K:WxH  switch to size WxH from frame K on (repeatable as K:WxH,K:WxH)
      --stall-timeout S    a lossless consumer that makes no progress for S seconds is demoted
                           or detached (see PROTOCOL.md), and counted
      --stats-json FILE    write the final figures as one JSON object to FILE (for scripts and
                           'bench decode'; the summary line is for people)
      --quiet              no summary line

    Exit status: 0; 1 on an error; 69 when decoding failed more often than ffmpeg's
    -max_error_rate allows (2/3 of the attempts), as ffmpeg exits then.
    """

    static func run(_ o: ProduceOptions) throws -> ExitStatus {
        guard let media = o.media else { return try producePattern(o) }
        let publisher = try MediaPublisher(input: media.input, formatName: media.format, threads: media.threads,
                                           options: media.inputOptions, converter: media.converter, copy: media.copy)
        let decoder = publisher.decoder
        if !decoder.uncarriedStreams.isEmpty {
            warn("'\(media.input)': not carried: stream \(decoder.uncarriedStreams.joined(separator: ", ")); framesrv publishes "
                 + "one video stream (#\(decoder.videoStreamIndex)) and one audio stream")
        }
        if let problem = decoder.audioProblem { warn("'\(media.input)': \(problem)") }
        if !decoder.hasVideo { return try produceSoundOnly(o, media, publisher) }
        if let cuda = media.cuda { return try produceCUDA(o, media, publisher, cuda: cuda) }
        if decoder.seekFailed {
            warn("cannot seek in '\(media.input)': decoding from the start and dropping frames before -ss, as ffmpeg does")
        }
        let policy = PublishPolicy(liveRequested: o.liveSource, readrate: media.readrate, noWait: o.noWait, waitFor: o.waitFor,
                                   decoder: decoder)
        var o = o
        o.waitFor = policy.waitFor   // what waitForConsumers and the control socket's status wait for
        let producer = try createStream(o, slots: o.slots ?? publisher.path.defaultSlots, liveSource: policy.liveSource,
                                        rate: publisher.frameRate)
        let audio: Producer?
        do { audio = try createAudioStream(o, media, decoder, liveSource: policy.liveSource) } catch { producer.close(); throw error }
        let clock = PlaybackClock(rate: media.readrate, paused: media.paused, position: decoder.origin)
        // A file takes run-time controls (framesrv ctl) from the moment its stream exists.
        let control = policy.takesControls ? serveControls(o.out, clock: clock, decoder: decoder, directory: producer.directory,
                                                           waiting: waitingStatus(producer, waitFor: o.waitFor)) : nil
        // The decoder goes first: freeing it ends the leases of the slots it still references.
        defer { control?.close(); publisher.close(); producer.close(); audio?.close() }
        guard waitForConsumers(o, producer, audio: audio, sayWaiting: policy.waitsByDefault && !o.quiet) else { return .interrupted }
        decoder.onSkipped = { warn("\(o.out): \($0)") }
        let report: MediaPublishReport
        do {
            report = try publisher.run(into: producer, live: policy.liveSource, clock: clock, frames: o.frames,
                                       seekFailed: { warn("\(o.out): \($0)") }) { StopSignal.requested || producer.deserted }
        } catch {
            producer.finish(failed: true)   // consumers get what was published, then learn the input failed
            audio?.finish(failed: true)
            throw error
        }
        return try finishMedia(o, media, publisher, producer, audio, report)
    }

    /// Ends the stream (or not, when the input failed), reports, and says the exit status.
    static func finishMedia(_ o: ProduceOptions, _ media: ProduceOptions.Media, _ publisher: MediaPublisher,
                            _ producer: Producer, _ audio: Producer?, _ report: MediaPublishReport) throws -> ExitStatus {
        let decoder = publisher.decoder
        decoder.reportPendingSkips()
        // A failed input (the first decode error under --strict, more errors than ffmpeg
        // allows) ends the stream as failed: its sinks and filters then exit non-zero too.
        let failed = (media.inputOptions.strict && decoder.firstError != nil) || decoder.tooManyErrors()
        producer.finish(failed: failed)
        audio?.finish(failed: failed)
        if let audio, let track = decoder.audio { reportAudio(o, media, track, audio, seconds: report.seconds) }
        try writeStats(o, producer: producer, report: report, decodeErrors: decoder.decodeErrors)
        if media.inputOptions.strict, let error = decoder.firstError {
            // The stream ended at the first decode error; that error is the one line reported.
            throw MediaInputError.decodeError(media.input, error)
        }
        if !o.quiet {
            let what = report.formats.map(\.description).joined(separator: ", then ")
            let path = publisher.path == .convert ? "libswscale" : "\(report.inPlace) zero-copy, \(report.copied) copied"
            print("produce: \(o.out): published \(producer.publishedCount) frames of \(what.isEmpty ? "nothing" : what)"
                  + " (\(decoder.codecName), \(path)) in \(formatDouble(report.seconds, 2)) s"
                  + " (\(formatDouble(Double(producer.publishedCount) / max(report.seconds, 1e-9), 0)) fps),"
                  + " dropped \(producer.droppedCount), decode errors \(decoder.decodeErrors)"
                  + (decoder.skippedPackets > 0 ? ", skipped \(decoder.skippedPackets) damaged packet\(decoder.skippedPackets == 1 ? "" : "s")" : ""))
        }
        if decoder.tooManyErrors() {
            throw CommandError.tooManyDecodeErrors(input: media.input, decoded: decoder.framesDecoded, failures: decoder.decodeFailures)
        }
        if decoder.decodeErrors > 0 {
            warn("\(decoder.decodeErrors) decode error\(decoder.decodeErrors == 1 ? "" : "s") in '\(media.input)' (decoding went on, as ffmpeg does)")
        }
        if report.decoded == 0, !StopSignal.requested {
            warn("'\(media.input)': no frame decoded; the stream ended empty (ffmpeg: \"Output file is empty\")")
        }
        return .success
    }

    /// The audio stream beside the video (--audio-out, default NAME-audio), when the input
    /// has a track to carry; nil with -an or without one.
    static func createAudioStream(_ o: ProduceOptions, _ media: ProduceOptions.Media, _ decoder: MediaDecoder,
                                  liveSource: Bool, name: String? = nil) throws -> Producer? {
        guard let name = name ?? media.audioOut, let track = decoder.audio else { return nil }
        var options = ProducerOptions()
        options.media = .audio
        options.slots = 32   // small frames: about 0.7 s of 48 kHz AAC in flight
        options.liveSource = liveSource
        options.sendHighWaterMark = Int32(o.sendHighWaterMark)
        options.stallTimeout = o.stallTimeout
        options.name = ClientName.fit(o.name + " audio")
        let producer = try Producer(stream: name, options: options)
        producer.shouldStop = StopSignal.shouldStop
        producer.onDropped = { warn("\(name): \($0)") }
        track.attach(producer)
        return producer
    }

    /// An input with sound only (WAV, FLAC, ...): its audio is the stream --out NAME.
    static func produceSoundOnly(_ o: ProduceOptions, _ media: ProduceOptions.Media, _ publisher: MediaPublisher) throws -> ExitStatus {
        guard o.frames == nil else {
            throw UsageError("--frames counts pictures, and '\(media.input)' has sound only: use -t D to stop after D of it")
        }
        installStopHandlers()   // SIGINT/SIGTERM end the stream cleanly, as with video (the file fuzzer's audio victim found it missing)
        var o = o
        let policy = PublishPolicy(liveRequested: o.liveSource, readrate: media.readrate, noWait: o.noWait, waitFor: o.waitFor,
                                   decoder: publisher.decoder)
        o.waitFor = policy.waitFor   // a file waits for its first lossless consumer, as with video
        guard let audio = try createAudioStream(o, media, publisher.decoder, liveSource: policy.liveSource, name: o.out),
              let track = publisher.decoder.audio else { return .failed }
        let clock = PlaybackClock(rate: media.readrate, paused: media.paused, position: publisher.decoder.origin)
        let control = policy.takesControls ? serveControls(o.out, clock: clock, decoder: publisher.decoder, directory: audio.directory,
                                                           waiting: waitingStatus(audio, waitFor: o.waitFor)) : nil
        defer { control?.close(); publisher.close(); audio.close() }
        guard waitForConsumers(o, audio, sayWaiting: policy.waitsByDefault && !o.quiet) else { return .interrupted }
        let report: MediaPublishReport
        do {
            report = try publisher.run(into: audio, live: policy.liveSource, clock: clock, frames: o.frames,
                                       seekFailed: { warn("\(o.out): \($0)") }) { StopSignal.requested }
        } catch {
            audio.finish(failed: true)
            throw error
        }
        audio.finish(failed: false)
        reportAudio(o, media, track, audio, seconds: report.seconds)
        return .success
    }

    /// produce's summary line for the audio stream, and one line for frames it skipped.
    static func reportAudio(_ o: ProduceOptions, _ media: ProduceOptions.Media, _ track: AudioTrack, _ audio: Producer, seconds: Double) {
        if !o.quiet {
            let formats = track.formats.map { "\($0.sampleRate) Hz \($0.layout) \($0.sampleFormat)" }.joined(separator: ", then ")
            print("produce: \(audio.stream): published \(audio.publishedCount) audio frames of \(formats.isEmpty ? "nothing" : formats)"
                  + " (\(track.codecName), \(audio.publishedInPlace) zero-copy, \(audio.publishedCount - min(audio.publishedCount, audio.publishedInPlace)) copied) in \(formatDouble(seconds, 2)) s,"
                  + " dropped \(audio.droppedCount), decode errors \(track.decodeErrors), skipped \(track.skipped)")
        }
        if let problem = track.firstProblem {
            warn("'\(media.input)' \(track.label): \(track.skipped) frame(s) skipped, \(track.decodeErrors) decode error(s); the first: \(problem)")
        }
    }

    static func producePattern(_ o: ProduceOptions) throws -> ExitStatus {
        guard let producer = try openStream(o, slots: o.slots ?? 8, liveSource: o.liveSource, rate: o.pattern.rate) else { return .interrupted }
        defer { producer.close() }
        let start = monotonicNanos()
        let format = try PatternPublisher.run(o.pattern, into: producer) { StopSignal.requested || producer.deserted }
        producer.finish()
        let secs = Double(monotonicNanos() - start) / 1e9
        try writeStats(o, producer: producer, report: MediaPublishReport(seconds: secs), decodeErrors: 0)
        if !o.quiet {
            print("produce: \(o.out): published \(producer.publishedCount) frames of \(format) in \(formatDouble(secs, 2)) s"
                  + " (\(formatDouble(Double(producer.publishedCount) / max(secs, 1e-9), 0)) fps), dropped \(producer.droppedCount)")
        }
        return .success
    }

    /// --stats-json FILE: the figures of the summary line, for programs.
    static func writeStats(_ o: ProduceOptions, producer: Producer, report: MediaPublishReport, decodeErrors: Int) throws {
        guard let path = o.statsJSON else { return }
        let json = "{\"stream\":\"\(o.out)\",\"published\":\(producer.publishedCount),\"dropped\":\(producer.droppedCount),"
            + "\"zero_copy\":\(report.inPlace),\"copied\":\(report.copied),\"converted\":\(report.converted),"
            + "\"decode_errors\":\(decodeErrors),\"seconds\":\(report.seconds)}\n"
        guard FileManager.default.createFile(atPath: path, contents: Data(json.utf8)) else {
            throw CommandError.statisticsNotWritten(path: path)
        }
    }

    /// status's `waiting`: the lossless consumers wanted and attached while the stream waits
    /// for them before its first frame, nil once it publishes (or waits for none).
    static func waitingStatus(_ producer: Producer, waitFor: Int) -> @Sendable () -> (wanted: Int, attached: Int)? {
        return {
            let attached = producer.losslessConsumerCount
            return waitFor > 0 && producer.publishedCount == 0 && attached < waitFor ? (waitFor, attached) : nil
        }
    }

    /// `NAME.control`: pause, resume, toggle, seek, rate, step and status, applied by the
    /// clock between frames; status says too whether it `waiting` for consumers. Without it
    /// (the socket cannot be bound) the file still plays: one warning line.
    static func serveControls(_ stream: String, clock: PlaybackClock, decoder: MediaDecoder, directory: RuntimeDirectory,
                              waiting: @escaping @Sendable () -> (wanted: Int, attached: Int)?) -> ControlServer? {
        let (duration, canSeek) = (decoder.duration, decoder.canSeek)
        do {
            return try ControlServer(stream: stream, directory: directory, verbs: ControlVerb.playback) { request in
                clock.handle(request, duration: duration, canSeek: canSeek) {
                    let s = clock.state
                    return PlaybackStatus(stream: stream, position: s.pendingSeek ?? s.filePosition, duration: duration,
                                          rate: s.rate, paused: s.paused, frames: s.released, waiting: waiting(), loops: s.loops)
                }
            }
        } catch {
            warn("\(stream): no run-time control (framesrv ctl): \(error)")
            return nil
        }
    }

    /// Creates the stream and, with --wait-for, waits for that many lossless consumers;
    /// nil when SIGINT/SIGTERM came first. `sayWaiting`: say once on stderr that it waits.
    static func openStream(_ o: ProduceOptions, slots: Int, liveSource: Bool, rate: Rational?,
                           sayWaiting: Bool = false) throws -> Producer? {
        let producer = try createStream(o, slots: slots, liveSource: liveSource, rate: rate)
        return waitForConsumers(o, producer, sayWaiting: sayWaiting) ? producer : nil
    }

    /// Creates the stream (installing the stop handlers).
    static func createStream(_ o: ProduceOptions, slots: Int, liveSource: Bool, rate: Rational?) throws -> Producer {
        var options = ProducerOptions()
        options.slots = slots
        options.liveSource = liveSource
        options.sendHighWaterMark = Int32(o.sendHighWaterMark)
        options.nominalRate = rate
        options.stallTimeout = o.stallTimeout
        options.name = o.name
        options.lingerWhenDeserted = o.waitFor > 0 ? o.linger : nil
        installStopHandlers()
        let producer = try Producer(stream: o.out, options: options)
        producer.shouldStop = StopSignal.shouldStop
        producer.onDropped = { [out = o.out] in warn("\(out): \($0)") }
        if !o.quiet { producer.onDeserted = { [out = o.out] in warn("'\(out)': \($0)") } }
        return producer
    }

    /// With --wait-for: waits for that many lossless consumers; false (and the stream
    /// closed) when SIGINT/SIGTERM came first. `sayWaiting`: say once on stderr that it waits.
    /// With an audio stream, its lossless consumers count too: an audio sink alone starts the file.
    static func waitForConsumers(_ o: ProduceOptions, _ producer: Producer, audio: Producer? = nil, sayWaiting: Bool) -> Bool {
        let streams = audio.map { "'\(o.out)' (or '\($0.stream)')" } ?? "'\(o.out)'"
        // With two streams, look at both every 50 ms; with one, sleep until it is told.
        guard waitUntilAttached(o.waitFor, streams: streams, sayWaiting: sayWaiting,
                                attached: { producer.losslessConsumerCount + (audio?.losslessConsumerCount ?? 0) },
                                sleep: { _ = producer.waitForLosslessConsumers(o.waitFor, timeoutSeconds: audio == nil ? nil : 0.05) })
        else {
            producer.close()
            audio?.close()
            return false
        }
        return true
    }

    /// Waits until `waitFor` lossless consumers are attached, as `attached` counts them (a
    /// stream's and its sound's together), sleeping in `sleep` between looks; false on a stop.
    static func waitUntilAttached(_ waitFor: Int, streams: String, sayWaiting: Bool, attached: () -> Int, sleep: () -> Void) -> Bool {
        if sayWaiting, waitFor > 0, attached() < waitFor {
            let who = waitFor == 1 ? "its first lossless consumer" : "\(waitFor) lossless consumers"
            warn("\(streams): waiting for \(who) before publishing (--no-wait: publish at once; Ctrl-C to stop)")
        }
        while waitFor > 0, attached() < waitFor {
            sleep()
            if StopSignal.requested { return false }
        }
        return true
    }
}
