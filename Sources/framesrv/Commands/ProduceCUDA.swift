import FrameControl
import FrameMedia
import FrameServer

extension ProduceCommand {
    /// `produce -i FILE --hwaccel cuda` (NVDEC) or `--memory cuda` (a CPU decode uploaded): the
    /// pictures as a CUDA stream, written through libframesrv's CUDA producer, and the sound,
    /// if any, as a host audio stream beside it (NAME-audio, as on the host path). Without
    /// sound the stream opens at the first frame, which waits there for --wait-for's consumers;
    /// with sound both streams exist before anything is decoded (the CUDA one at the format the
    /// input declares, when it declares one framesrv carries: else as without sound, said), and
    /// --wait-for counts the consumers of either, as on the host path.
    /// Pacing (-re, --readrate, --paused), -ss, -t, --frames, --loop and run-time controls are
    /// the host path's.
    static func produceCUDA(_ o: ProduceOptions, _ media: ProduceOptions.Media, _ publisher: MediaPublisher,
                            cuda: (device: Int, nvdec: Bool)) throws -> ExitStatus {
        let decoder = publisher.decoder
        let policy = PublishPolicy(liveRequested: o.liveSource, readrate: media.readrate, noWait: o.noWait, waitFor: o.waitFor,
                                   decoder: decoder)
        installStopHandlers()
        let audio = try createAudioStream(o, media, decoder, liveSource: policy.liveSource)
        let expected = audio == nil ? nil : decoder.expectedCUDAFormat(nvdec: cuda.nvdec)
        if let audio, expected == nil, !o.quiet {
            warn("'\(media.input)' does not declare a picture format a CUDA stream carries before decoding: '\(o.out)' opens at its "
                 + "first frame, and --wait-for counts its consumers only, not '\(audio.stream)''s")
        }
        let stream = CUDAStreamProducer(.init(name: o.out, device: cuda.device, slots: o.slots ?? 8, rate: publisher.frameRate,
                                              liveSource: policy.liveSource, waitFor: expected == nil ? policy.waitFor : 0))
        stream.shouldStop = StopSignal.shouldStop
        stream.onWaiting = { [out = o.out] n in
            if !o.quiet { warn("'\(out)': waiting for \(n) lossless consumer\(n == 1 ? "" : "s") before publishing (--no-wait: publish at once)") }
        }
        let clock = PlaybackClock(rate: media.readrate, paused: media.paused, position: decoder.origin)
        let control = policy.takesControls ? try serveControls(o.out, clock: clock, decoder: decoder,
                                                               directory: RuntimeDirectory(), waiting: { nil }) : nil
        defer { control?.close(); publisher.close(); stream.close(); audio?.close() }
        if let audio, let expected {
            do { try stream.openAhead(expected) } catch { audio.close(); throw error }
            // --wait-for N counts the consumers of either stream, as on the host path.
            guard waitUntilAttached(policy.waitFor, streams: "'\(o.out)' (or '\(audio.stream)')",
                                    sayWaiting: policy.waitsByDefault && !o.quiet,
                                    attached: { stream.losslessConsumerCount + audio.losslessConsumerCount },
                                    sleep: { _ = audio.waitForLosslessConsumers(policy.waitFor, timeoutSeconds: 0.05) })
            else { return .interrupted }
        }
        let report: MediaPublishReport
        do {
            report = try publisher.run(into: stream, live: policy.liveSource, clock: clock, frames: o.frames,
                                       seekFailed: { warn("\(o.out): \($0)") }) { StopSignal.requested }
        } catch {
            stream.finish(failed: true)
            audio?.finish(failed: true)
            throw error
        }
        decoder.reportPendingSkips()
        let failed = (media.inputOptions.strict && decoder.firstError != nil) || decoder.tooManyErrors()
        stream.finish(failed: failed)
        audio?.finish(failed: failed)
        if let audio, let track = decoder.audio { reportAudio(o, media, track, audio, seconds: report.seconds) }
        if !o.quiet { print(cudaSummary(o, decoder, stream, report)) }
        if decoder.tooManyErrors() {
            throw CommandError.tooManyDecodeErrors(input: media.input, decoded: decoder.framesDecoded, failures: decoder.decodeFailures)
        }
        return .success
    }

    /// produce's summary line for a CUDA stream: what decoded, and each frame's one copy.
    static func cudaSummary(_ o: ProduceOptions, _ decoder: MediaDecoder, _ stream: CUDAStreamProducer,
                            _ report: MediaPublishReport) -> String {
        let stats = stream.stats
        let what = report.formats.map(\.description).joined(separator: ", then ")
        let copies = "\(stream.copiedOnDevice) copied on the device (NVDEC), \(stream.uploaded) uploaded from host memory"
        return "produce: \(o.out): published \(stats.published) frames of \(what.isEmpty ? "nothing" : what) to CUDA device "
            + "\(stream.settings.device) (\(decoder.codecName), \(copies)) in \(formatDouble(report.seconds, 2)) s"
            + " (\(formatDouble(Double(stats.published) / max(report.seconds, 1e-9), 0)) fps), dropped \(stats.dropped),"
            + " decode errors \(decoder.decodeErrors)"
    }
}
