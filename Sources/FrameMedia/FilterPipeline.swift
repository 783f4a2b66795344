import FrameServer

/// How a filter publishes its output stream.
public struct FilterOutputOptions: Sendable {
    /// Slots in the output's pool.
    public var slots = 8
    /// Never wait for the output's consumers (drop and count instead).
    public var liveSource = false
    /// Publish nothing until this many lossless consumers are attached to the output.
    public var waitFor = 0
    /// With `waitFor`: how long to wait for a consumer of the output once every one has
    /// left, before ending (`ProducerOptions.lingerWhenDeserted`).
    public var linger = 5.0
    /// What monitors show for the output's producer (`ProducerOptions.name`).
    public var name = "filter"
    public init() {}
}

/// Reads one stream, runs every frame through a `FilterGraph`, and publishes what comes out
/// as another stream: `framesrv filter`'s pipeline. Frames go into the graph in place while
/// the hold budget allows (`sendsInPlace`); each frame out is copied once into the output's
/// slot. A new size or pixel format flushes the graph; the input's producer going away, or
/// a discontinuity without drops (a seek upstream), flushes it into the output and restarts
/// it, and the output's next frame is marked as a discontinuity.
public final class FilterPipeline {
    public let graph: FilterGraph
    public let consumer: Consumer
    public let output: String
    public let outputOptions: FilterOutputOptions
    /// The output stream, once the graph's first frame out configured it.
    public private(set) var producer: Producer?
    public private(set) var framesIn = 0
    /// Each new output frame format, in order.
    public private(set) var formats: [FrameFormat] = []
    /// Called for every frame published (its description, the output's nominal rate).
    public var onPublish: ((FrameDescription, Rational?) -> Void)?
    /// Called when the input's producer exited without ending the stream (its pid).
    public var onProducerGone: ((Int32) -> Void)?
    /// Called once when the input stream does not exist yet and the consumer waits for it.
    public var onWaiting: (() -> Void)?
    private let shouldStop: () -> Bool
    private var inputRate: Rational?
    private var waited = false
    private var discontinuity = false
    /// Frames the source dropped before input frames not yet followed by an output frame.
    private var sourceDropped: UInt32 = 0
    private var eventError: Error?

    public init(graph: FilterGraph, consumer: Consumer, output: String, outputOptions: FilterOutputOptions,
                shouldStop: @escaping () -> Bool) {
        self.graph = graph
        self.consumer = consumer
        self.output = output
        self.outputOptions = outputOptions
        self.shouldStop = shouldStop
        consumer.shouldStop = shouldStop
        consumer.onEvent = { [unowned self] event in
            if case .waiting = event { self.onWaiting?(); return }
            guard case .producerGone(let pid) = event else { return }
            self.onProducerGone?(pid)
            self.restartAfterProducerGone()
        }
    }

    /// The hold budget: a frame goes into the graph in place while the frames libavfilter
    /// keeps stay within what the stream allows this consumer to hold (live: the hold limit;
    /// lossless: half the pool, so the producer keeps slots to write into); past that, it is
    /// copied. `held` counts this frame: with one slot, the input's only one, every frame is copied.
    public static func sendsInPlace(held: Int, liveHoldLimit: Int?, slotCount: Int?) -> Bool {
        liveHoldLimit.map { held < $0 } ?? (held <= (slotCount ?? 2) / 2)
    }

    /// Filters until the input ends, the graph's output ends (trim), or `shouldStop`; then
    /// flushes the graph and ends the output.
    public func run() throws {
        while !shouldStop(), producer?.deserted != true, let frame = try consumer.next() {
            if let eventError { throw eventError }
            framesIn += 1
            if framesIn == 1 {
                // The stream's nominal frame rate: what the graph's source is told (as ffmpeg tells it the input's).
                inputRate = consumer.nominalRate
                graph.inputFrameRate = inputRate
            }
            let shared = frame.share()
            // The source's drops go on down: the next frame out carries them (PROTOCOL.md 4.2).
            let dropped = shared.header.sourceDropped
            if dropped > 0 { sourceDropped &+= dropped; discontinuity = true }
            if framesIn > 1, dropped == 0, shared.header.flags.contains(.discontinuity) {
                // The flag alone: the source jumped (a seek, framesrv ctl) and its timestamps start
                // again. As after a producer restart, the graph's last frames come out and a new
                // graph starts: filters with state must not see time go backwards.
                try graph.sendEnd()
                try drain()
                graph.restart()
                discontinuity = true
            }
            if !graph.accepts(shared.header) {
                // A new size or pixel format: the old graph's last frames out, then a new graph.
                try graph.sendEnd()
                try drain()
            }
            let inPlace = Self.sendsInPlace(held: consumer.heldFrames, liveHoldLimit: consumer.liveHoldLimit,
                                            slotCount: consumer.slotCount)
            try graph.send(shared, inPlace: inPlace)
            if producer == nil, try outputStream() == nil { break }
            try drain()
            // The graph's output ended (trim): so does the output, as ffmpeg stops there.
            if graph.isFinished { break }
        }
        if let eventError { throw eventError }
        // End of the input (or a stop): everything still in the graph comes out, then the output ends.
        try graph.sendEnd()
        try drain()
        if producer == nil, framesIn == 0, !shouldStop() {
            // The input ended before any frame: the output exists and ends too, so its consumers end as well.
            _ = try outputStream()
        }
        // An input whose source failed makes an output that failed too, down the whole chain.
        producer?.finish(failed: consumer.sourceFailed)
    }

    /// Closes the output stream.
    public func close() { producer?.close() }

    /// The output, once the graph's output frame rate is known; waits for `waitFor` consumers
    /// (nil when told to stop meanwhile).
    private func outputStream() throws -> Producer? {
        if let producer { return producer }
        var o = ProducerOptions()
        o.slots = outputOptions.slots
        o.liveSource = outputOptions.liveSource
        o.name = outputOptions.name
        o.lingerWhenDeserted = outputOptions.waitFor > 0 ? outputOptions.linger : nil   // and once its consumers have all left
        let rate = graph.outputFrameRate ?? inputRate
        o.nominalRate = rate.flatMap { $0.num > 0 && $0.den > 0 ? $0 : nil }
        let p = try Producer(stream: output, options: o)
        p.shouldStop = shouldStop   // a stop also ends a wait for a slot of the output
        producer = p
        while outputOptions.waitFor > 0, !waited, !p.waitForLosslessConsumers(outputOptions.waitFor, timeoutSeconds: nil) {
            if shouldStop() { return nil }
        }
        waited = true
        return p
    }

    /// Publishes every frame the graph has ready: one copy each, into the output's slot.
    private func drain() throws {
        while let frame = try graph.receive() {
            guard let p = try outputStream() else { return }
            if formats.last != frame.format { formats.append(frame.format) }
            // A new size or pixel format is just a new reservation: a new epoch if it must.
            guard var slot = try p.reserve(frame.format) else { continue }   // live source: dropped
            frame.copyPlanes(into: slot)
            slot.description = frame.description
            if discontinuity {
                slot.description.flags.insert(.discontinuity)
                slot.description.sourceDropped = sourceDropped
                (discontinuity, sourceDropped) = (false, 0)
            }
            slot.publish()
            onPublish?(frame.description, p.options.nominalRate)
        }
    }

    /// The input's producer gone without ending the stream: the old run's last frames go
    /// through the graph into the output now, and the new producer's first frame builds a
    /// new graph (its timestamps start again; filters with state must not see them go backwards).
    private func restartAfterProducerGone() {
        do {
            try graph.sendEnd()
            try drain()
            graph.restart()
            if framesIn > 0 { discontinuity = true }
        } catch {
            if eventError == nil { eventError = error }
        }
    }
}
