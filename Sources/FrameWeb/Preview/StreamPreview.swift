import FrameMedia
import FrameServer
import Glibc

/// One watched stream's preview: a live consumer named "web preview" on its own thread,
/// shared by the stream's viewers. It takes the newest frame when a viewer is due one (each
/// at its own rate: the consumer at the fastest), converts it once per image width while
/// holding the slot, releases the slot, then encodes and hands each due viewer its JPEG
/// (latest-only: it never waits for a viewer). A CUDA stream's frame is first copied to host
/// memory (`CUDAPreviewReader`, libframesrv's consumer) and released, then converted.
final class StreamPreview: @unchecked Sendable {
    // @unchecked Sendable: `stream`, `directory`, `quality` and `onEnd` are immutable; the
    // rest is only touched with `lock` held.
    let stream: String
    private let directory: RuntimeDirectory
    private let quality: Int
    private let onEnd: @Sendable (StreamPreview) -> Void
    private let lock = ConditionLock()
    private var viewers: [PreviewViewer] = []
    private var stopping = false
    private var finished = false
    /// The consumer attached (the stream admitted it), or why it could not.
    private var attached = false
    private var failure: PreviewError?

    init(stream: String, directory: RuntimeDirectory, quality: Int, onEnd: @escaping @Sendable (StreamPreview) -> Void) {
        self.stream = stream
        self.directory = directory
        self.quality = quality
        self.onEnd = onEnd
    }

    /// Starts the consumer's thread.
    func start() {
        let tid = spawnThread { [self] in run() }
        pthread_detach(tid)
    }

    /// Adds a viewer; false when the feed is already stopping (the caller makes a new one).
    func add(_ viewer: PreviewViewer) -> Bool {
        lock.withLock {
            guard !stopping, !finished else { return false }
            viewers.append(viewer)
            return true
        }
    }

    /// Removes a viewer; stops the feed with its last one. Returns whether the feed stopped.
    func remove(_ viewer: PreviewViewer) -> Bool {
        lock.withLock {
            viewers.removeAll { $0 === viewer }
            if viewers.isEmpty { stopping = true; lock.broadcast() }
            return stopping
        }
    }

    var viewerCount: Int { lock.withLock { viewers.count } }

    /// Asks the consumer to stop (it detaches within its next wake, at most half a second).
    func stop() { lock.withLock { stopping = true; lock.broadcast() } }

    /// Waits until the consumer attached; throws why it could not (the stream did not admit
    /// it, did not appear, or the feed stopped first), so a viewer is answered before its
    /// first byte. The attach itself gives up after 5 s (`attach`).
    func waitAttached() throws(PreviewError) {
        let failure: PreviewError? = lock.withLock {
            while !attached, !finished { lock.wait(untilNanos: monotonicNanos() + 1_000_000_000) }
            return attached ? nil : self.failure ?? .closed
        }
        if let failure { throw failure }
    }

    /// Waits until the consumer detached and its thread ended, or until `deadline` (CLOCK_MONOTONIC ns).
    func waitFinished(untilNanos deadline: UInt64) {
        lock.withLock { while !finished, monotonicNanos() < deadline { lock.wait(untilNanos: deadline) } }
    }

    private var isStopping: Bool { lock.withLock { stopping } }

    /// The thread: attach, encode until stopped or the stream ends, detach, end the viewers.
    private func run() {
        var failure: PreviewError?
        do throws(PreviewError) {
            let input = try attach()
            lock.withLock { attached = true; lock.broadcast() }
            try encodeFrames(from: input)
        } catch {
            failure = error
        }
        let left = lock.withLock {
            stopping = true
            finished = true
            self.failure = failure
            lock.broadcast()
            return viewers
        }
        for v in left { v.end(failure) }
        onEnd(self)
    }

    /// Where the frames come from: a host stream's live consumer, or a CUDA stream's reader.
    private enum Input {
        case host(Consumer)
        case cuda(CUDAPreviewReader)
    }

    /// The live consumer, attached (waiting at most 5 s for the stream); for a CUDA stream,
    /// libframesrv's (one line when this machine cannot reach its device).
    private func attach() throws(PreviewError) -> Input {
        var options = ConsumerOptions(mode: .live)
        options.name = "web preview"
        options.waitSeconds = 5
        let consumer: Consumer
        do { consumer = try Consumer(stream: stream, options: options, directory: directory) } catch {
            throw .failed(stream, error.description)
        }
        consumer.shouldStop = { [weak self] in self?.isStopping ?? true }
        switch Result(catching: { () throws(ConsumerError) in try consumer.attach() }) {
        case .success: return .host(consumer)
        case .failure(.deviceMemory):
            do { return .cuda(try CUDAPreviewReader(stream: stream, name: "web preview", waitSeconds: 5)) } catch {
                throw .failed(stream, error.description)
            }
        case .failure(let error): throw .failed(stream, error.description)
        }
    }

    /// Takes a frame whenever a viewer is due one, until stopped or the stream ends; converts
    /// it once per image width the due viewers need, and hands each of them its image.
    private func encodeFrames(from input: Input) throws(PreviewError) {
        var encoders: [Int: PreviewEncoder] = [:]
        var due: UInt64 = 0
        while true {
            guard let targets = waitUntilDue(due) else { return }
            var ready: [Int: [PreviewViewer]] = [:], now: UInt64 = 0
            switch input {
            case .host(let consumer):
                let frame: Frame?
                do { frame = try consumer.next() } catch {
                    if case .badFrame = error { continue }   // counted by the consumer; skip it
                    throw .failed(stream, error.description)
                }
                guard let frame else { return }
                now = monotonicNanos()
                ready = dueViewers(targets, frameWidth: Int(frame.header.width), now: now, &encoders)
                try convert(frame, with: ready.keys.map { encoders[$0]! })
            case .cuda(let reader):
                let next: CUDAPreviewReader.Next
                do { next = try reader.next(timeoutMillis: 250) } catch { throw .failed(stream, error.description) }
                guard case .picture(let header, let base) = next else {
                    if case .ended = next { return }
                    continue   // none yet: look at the viewers (and a stop) again
                }
                now = monotonicNanos()
                ready = dueViewers(targets, frameWidth: header.width, now: now, &encoders)
                for w in ready.keys {
                    do { try encoders[w]!.convert(header, base: base) } catch { throw .failed(stream, error.description) }
                }
            }
            for (w, viewers) in ready {
                let image: [UInt8]
                do { image = try encoders[w]!.encodeConverted() } catch { throw .failed(stream, error.description) }
                for v in viewers { v.put(image, at: now) }
            }
            due = targets.map(\.nextDue).min() ?? now
        }
    }

    /// The viewers due a frame `frameWidth` wide at `now`, by image width, with an encoder for
    /// each width in `encoders` (those no viewer needs any more dropped).
    private func dueViewers(_ targets: [PreviewViewer], frameWidth: Int, now: UInt64,
                            _ encoders: inout [Int: PreviewEncoder]) -> [Int: [PreviewViewer]] {
        let ready = Dictionary(grouping: targets.filter { $0.isDue(now) }) { imageWidth($0, frameWidth) }
        let wanted = Set(targets.map { imageWidth($0, frameWidth) })
        encoders = encoders.filter { wanted.contains($0.key) }
        for w in ready.keys where encoders[w] == nil { encoders[w] = PreviewEncoder(.jpeg(quality: quality), maxWidth: w) }
        return ready
    }

    /// The width of `viewer`'s images of frames `frameWidth` wide (viewers of one width share an encoder).
    private func imageWidth(_ viewer: PreviewViewer, _ frameWidth: Int) -> Int {
        PreviewEncoder.imageSize(width: frameWidth, height: 2, maxWidth: viewer.maxWidth).width
    }

    /// Converts `frame` once per encoder, then releases its slot (also when a conversion fails).
    private func convert(_ frame: consuming Frame, with encoders: [PreviewEncoder]) throws(PreviewError) {
        var failed: StillImageError?
        for e in encoders where failed == nil {
            do { try e.convert(frame) } catch { failed = error }
        }
        frame.release()
        if let failed { throw .failed(stream, failed.description) }
    }

    /// Sleeps until `due` (CLOCK_MONOTONIC ns) unless stopped; returns the viewers then, nil when stopping.
    private func waitUntilDue(_ due: UInt64) -> [PreviewViewer]? {
        lock.withLock {
            while !stopping, monotonicNanos() < due { lock.wait(untilNanos: due) }
            return stopping || viewers.isEmpty ? nil : viewers
        }
    }
}
