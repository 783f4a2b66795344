import CFrameServerClient
import FrameServer
import Glibc

private let statusOK = FRAMESRV_OK.rawValue, statusTimeout = FRAMESRV_TIMEOUT.rawValue

/// Why a CUDA stream could not be made or written: libframesrv's one line.
public struct CUDAStreamError: Error, CustomStringConvertible {
    public let description: String
    init(_ what: String) { description = what }
    static func last(_ what: String) -> CUDAStreamError { CUDAStreamError("\(what): \(String(cString: framesrv_last_error()))") }
}

/// A CUDA stream written by `produce` (`--hwaccel cuda`, `--memory cuda`): libframesrv's CUDA
/// producer (PROTOCOL.md 4.5), the one implementation of a CUDA stream's fences, device pool and
/// NAME.cuda server, which Swift does not duplicate. The stream opens at the first frame (its
/// size and format are the pool's), waits there for `waitFor` lossless consumers, and follows a
/// format change with a new epoch (`openAhead` opens it before, for a stream with sound).
/// Every frame is one copy per plane into its slot, on the legacy default stream of the
/// device's primary context: from an NVDEC surface (device to device) or from host memory
/// (an upload, synchronized before the publish).
///
/// The NVDEC copy is the one a zero-copy design cannot avoid here: FFmpeg 5.1 (nvdec.c,
/// nvdec_retrieve_data) hands out each picture as NVDEC's own output surface, mapped with
/// cuvidMapVideoFrame (one output surface per frame of its pool), and makes no copy of its
/// own that a caller-supplied pool could receive (its frames context's pool is a placeholder,
/// nvdec_alloc_dummy). cuvidMapVideoFrame takes no destination, and the surface is the
/// driver's memory, which cuMemExportToShareableHandle cannot export (only cuMemCreate's can).
public final class CUDAStreamProducer {
    public struct Settings: Sendable {
        public var name: String
        public var device: Int
        public var slots: Int
        public var rate: Rational?
        public var liveSource: Bool
        public var waitFor: Int
        public init(name: String, device: Int, slots: Int, rate: Rational?, liveSource: Bool, waitFor: Int) {
            self.name = name; self.device = device; self.slots = slots; self.rate = rate
            self.liveSource = liveSource; self.waitFor = waitFor
        }
    }

    public let settings: Settings
    private var producer: OpaquePointer?
    private var format: FrameFormat?
    /// Frames copied device to device (decoded on the GPU) and uploaded from host memory.
    public private(set) var copiedOnDevice = 0, uploaded = 0
    /// Said once while the first frame waits for --wait-for's consumers.
    public var onWaiting: (Int) -> Void = { _ in }
    public var shouldStop: () -> Bool = { false }

    public init(_ settings: Settings) { self.settings = settings }
    deinit { close() }

    /// Publishes one frame: planes at device addresses (`onDevice`) or host addresses, each
    /// `pitches[i]` bytes from row to row, in `frameFormat`. False when dropped (a live source
    /// found no free slot) or stopped while waiting.
    public func publish(planes: [UInt64], pitches: [Int], onDevice: Bool, format frameFormat: FrameFormat,
                        description: FrameDescription) throws(CUDAStreamError) -> Bool {
        guard try ready(for: frameFormat), let frame = try reserve() else { return false }
        let wrote = planes.withUnsafeBufferPointer { p in
            pitches.withUnsafeBufferPointer { q in   // size_t is Int
                framesrv_frame_write_on(frame, onDevice ? FRAMESRV_MEMORY_CUDA : FRAMESRV_MEMORY_HOST, p.baseAddress, q.baseAddress,
                                        UInt32(planes.count), nil)
            }
        }
        guard wrote == statusOK else {
            let error = CUDAStreamError.last("copy a frame into CUDA stream '\(settings.name)'")
            framesrv_producer_abandon(producer, frame)
            throw error
        }
        Self.describe(framesrv_frame_info_of(frame)!, description)
        guard framesrv_producer_publish_on(producer, frame, nil) == statusOK else {
            throw .last("publish into CUDA stream '\(settings.name)'")
        }
        if onDevice { copiedOnDevice += 1 } else { uploaded += 1 }
        return true
    }

    /// A slot, after its last readers' kernels (ordered on the stream): nil when a live source
    /// finds none free, or on a stop.
    private func reserve() throws(CUDAStreamError) -> OpaquePointer? {
        while true {
            var frame: OpaquePointer?
            let status = framesrv_producer_reserve_on(producer, nil, settings.liveSource ? 0 : 250, &frame)
            if status == statusOK, let frame { return frame }
            guard status == statusTimeout else { throw .last("reserve a slot of CUDA stream '\(settings.name)'") }
            if settings.liveSource || shouldStop() { return nil }
        }
    }

    /// Opens the stream before the first frame, at the format it will most likely have (a
    /// first frame of another format changes it: a new epoch), so that consumers can attach to
    /// it and to a sound stream beside it before anything is decoded. The caller waits for them.
    public func openAhead(_ frameFormat: FrameFormat) throws(CUDAStreamError) {
        guard producer == nil else { return }
        try open(frameFormat)
    }

    /// Lossless consumers attached now (0 before the stream is open).
    public var losslessConsumerCount: Int {
        producer.map { Int(framesrv_producer_lossless_consumers($0)) } ?? 0
    }

    /// Opens the stream at the first frame (and waits for its consumers), or changes its format.
    private func ready(for frameFormat: FrameFormat) throws(CUDAStreamError) -> Bool {
        if producer == nil {
            try open(frameFormat)
            return waitForConsumers()
        }
        if format != frameFormat {
            let r = framesrv_producer_change_format(producer, UInt32(frameFormat.width), UInt32(frameFormat.height),
                                                    Int32(frameFormat.pixelFormat.rawValue))
            guard r == statusOK else { throw .last("change CUDA stream '\(settings.name)' to \(frameFormat)") }
            format = frameFormat
        }
        return true
    }

    private func open(_ frameFormat: FrameFormat) throws(CUDAStreamError) {
        var o = framesrv_producer_options()
        o.width = UInt32(frameFormat.width)
        o.height = UInt32(frameFormat.height)
        o.pix_fmt = Int32(frameFormat.pixelFormat.rawValue)
        o.slots = UInt32(settings.slots)
        if let rate = settings.rate, rate.num > 0, rate.den > 0 { o.rate_num = Int64(rate.num); o.rate_den = Int64(rate.den) }
        o.live_source = settings.liveSource ? 1 : 0
        o.memory = FRAMESRV_MEMORY_CUDA
        o.cuda_device = Int32(settings.device)
        var opened: OpaquePointer?
        guard framesrv_producer_open_as(&opened, settings.name, &o, "produce") == statusOK, let opened else {
            throw .last("create CUDA stream '\(settings.name)'")
        }
        producer = opened
        format = frameFormat
    }

    private func waitForConsumers() -> Bool {
        guard settings.waitFor > 0, !settings.liveSource else { return true }
        var said = false
        let start = monotonicNanos()
        while framesrv_producer_wait_for_consumers(producer, UInt32(settings.waitFor), 250) != statusOK {
            if shouldStop() { return false }
            if !said, monotonicNanos() - start > 2_000_000_000 { onWaiting(settings.waitFor); said = true }
        }
        return true
    }

    /// The header fields a frame carries besides its planes.
    static func describe(_ info: UnsafeMutablePointer<framesrv_frame_info>, _ d: FrameDescription) {
        info.pointee.color_matrix = d.color.matrix
        info.pointee.color_range = d.color.range
        info.pointee.color_primaries = d.color.primaries
        info.pointee.color_transfer = d.color.transfer
        info.pointee.sar_num = d.sampleAspectRatio.num
        info.pointee.sar_den = d.sampleAspectRatio.den
        info.pointee.pts = d.pts ?? Int64.min
        info.pointee.time_base_num = d.timeBase.num
        info.pointee.time_base_den = d.timeBase.den
        info.pointee.duration = d.duration
        info.pointee.capture_ns = d.captureNanos
        info.pointee.flags = d.flags.rawValue
        info.pointee.field_order = d.fieldOrder.rawValue
        info.pointee.chroma_location = d.chromaLocation.rawValue
        info.pointee.source_dropped = d.sourceDropped
    }

    /// The producer's counters (zeros before the first frame).
    public var stats: framesrv_producer_stats {
        var s = framesrv_producer_stats()
        if let producer { framesrv_producer_stats_of(producer, &s) }
        return s
    }

    /// Ends the stream (consumers get every frame, then the end; `failed`: the input failed).
    public func finish(failed: Bool) {
        if let producer { framesrv_producer_end(producer, failed ? 1 : 0) }
    }

    public func close() {
        framesrv_producer_close(producer)
        producer = nil
    }
}
