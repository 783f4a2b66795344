import CFFmpeg
import CFrameServer
import CFrameServerClient
import FrameServer
import Glibc

/// `framesrv filter` on a CUDA stream: FFmpeg's CUDA filters (scale_cuda, yadif_cuda,
/// thumbnail_cuda, ...) from one CUDA stream into another, the frames never leaving the GPU.
/// The input is read through libframesrv's CUDA consumer on the legacy default stream of the
/// device's primary context, which is where FFmpeg's CUDA filters run (FFmpeg's CUDA device is
/// opened on the primary context, with no stream of its own): the ready fence is waited for on
/// that stream, and a frame is released on it when libavfilter lets go of it, after the
/// kernels that read it. Each input frame goes into the graph in place (an AVFrame over the
/// slot's device planes); each frame out is copied once, device to device, into an output slot.
public final class CUDAFilterPipeline {
    public let graphText: String
    public let input: String
    public let output: CUDAStreamProducer
    public private(set) var framesIn = 0, framesOut = 0
    public private(set) var formats: [FrameFormat] = []
    private let shouldStop: () -> Bool
    private var consumer: OpaquePointer?
    private var device: UnsafeMutablePointer<AVBufferRef>?
    private var graph: CUDAGraph?

    /// `device`: the stream's device as nvidia-smi names it (GPU-...). FFmpeg's CUDA device is
    /// opened first: FFmpeg sets the primary context's flags, and refuses a primary context
    /// that libframesrv's consumer made active with others.
    public init(graph: String, input: String, device uuid: String, live: Bool, waitSeconds: Double?,
                output: CUDAStreamProducer.Settings, shouldStop: @escaping () -> Bool) throws(CUDAStreamError) {
        graphText = graph
        self.input = input
        self.shouldStop = shouldStop
        guard let ordinal = Self.ordinal(of: uuid) else {
            throw CUDAStreamError("filter: stream '\(input)' is on CUDA device \(uuid), which this process cannot see "
                                  + "(CUDA_VISIBLE_DEVICES?) or the CUDA driver cannot be loaded")
        }
        var options: OpaquePointer?
        av_dict_set(&options, "primary_ctx", "1", 0)
        let r = av_hwdevice_ctx_create(&device, AV_HWDEVICE_TYPE_CUDA, "\(ordinal)", options, 0)
        av_dict_free(&options)
        guard r >= 0 else { throw CUDAStreamError("filter: FFmpeg cannot open CUDA device \(ordinal) (\(uuid)): \(ffmpegMessage(r))") }
        var o = framesrv_consumer_options()
        o.mode = live ? FRAMESRV_LIVE : FRAMESRV_LOSSLESS
        o.memory = FRAMESRV_MEMORY_CUDA
        o.attach_timeout_ms = waitSeconds.map { Int32(min($0 * 1000, 2e9)) } ?? -1
        o.client_name = nil
        guard framesrv_consumer_open(&consumer, input, &o) == FRAMESRV_OK.rawValue else {
            throw .last("filter: open CUDA stream '\(input)'")
        }
        var info = framesrv_stream_info()
        framesrv_consumer_stream_info(consumer, &info)
        var settings = output
        settings.device = Int(info.device_ordinal)
        if settings.rate == nil, info.rate_num > 0, info.rate_den > 0, let r = Rational(reducing: UInt64(info.rate_num), UInt64(info.rate_den)) {
            settings.rate = r
        }
        self.output = CUDAStreamProducer(settings)
        self.output.shouldStop = shouldStop
    }

    /// The ordinal, in this process, of the CUDA device nvidia-smi names `uuid`.
    static func ordinal(of uuid: String) -> Int? {
        guard fs_cuda_load() == nil, let cu = fs_cuda_api_get()?.pointee else { return nil }
        var count: Int32 = 0
        guard cu.cuDeviceGetCount(&count) == FS_CU_SUCCESS else { return nil }
        for i in 0..<count {
            var dev: Int32 = 0, id = fs_cuda_uuid()
            guard cu.cuDeviceGet(&dev, i) == FS_CU_SUCCESS, cu.cuDeviceGetUuid(&id, dev) == FS_CU_SUCCESS else { continue }
            var text = [CChar](repeating: 0, count: 41)
            withUnsafeBytes(of: id.bytes) { fs_cuda_uuid_text($0.bindMemory(to: UInt8.self).baseAddress, &text) }
            if String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) == uuid { return Int(i) }
        }
        return nil
    }

    deinit {
        graph = nil
        av_buffer_unref(&device)
        framesrv_consumer_close(consumer)
    }

    /// Filters until the input ends or `shouldStop`; then flushes the graph and ends the output
    /// (failed when the input's producer died).
    public func run() throws(CUDAStreamError) {
        var failed = false
        reading: while !shouldStop() {
            var frame: OpaquePointer?
            let status = framesrv_consumer_next_on(consumer, nil, 250, &frame)
            switch status {
            case FRAMESRV_OK.rawValue: break
            case FRAMESRV_TIMEOUT.rawValue: continue reading
            case FRAMESRV_END.rawValue: break reading
            case FRAMESRV_GONE.rawValue: failed = true; break reading
            default: throw .last("filter: read CUDA stream '\(input)'")
            }
            framesIn += 1
            try send(frame!)
        }
        if let graph { try graph.sendEnd(); try drain(graph) }
        output.finish(failed: failed)
        if failed { throw CUDAStreamError("filter: the producer of '\(input)' exited without ending the stream") }
    }

    /// One input frame into the graph (a new graph for a new size or format), then what comes out.
    private func send(_ frame: OpaquePointer) throws(CUDAStreamError) {
        let info = framesrv_frame_info_of(frame)!.pointee
        let key = CUDAGraph.Key(width: Int(info.width), height: Int(info.height), pixFmt: String(cString: framesrv_pix_fmt_name(info.pix_fmt)),
                                timeBase: Rational(info.time_base_num, info.time_base_den), sar: Rational(info.sar_num, info.sar_den))
        if let graph, graph.key != key {
            try graph.sendEnd()
            try drain(graph)
            self.graph = nil
        }
        if graph == nil { graph = try CUDAGraph(graphText, key: key, device: device!, frameRate: output.settings.rate) }
        try graph!.send(frame, info)
        try drain(graph!)
    }

    private func drain(_ graph: CUDAGraph) throws(CUDAStreamError) {
        while let out = try graph.receive() {
            defer { var f: UnsafeMutablePointer<AVFrame>? = out; av_frame_free(&f) }
            try publish(out, timeBase: graph.outputTimeBase)
        }
    }

    private func publish(_ f: UnsafeMutablePointer<AVFrame>, timeBase: Rational) throws(CUDAStreamError) {
        guard f.pointee.format == AV_PIX_FMT_CUDA.rawValue,
              let name = av_get_pix_fmt_name(AVPixelFormat(rawValue: cffmpeg_frame_sw_format(f))).map({ String(cString: $0) }),
              let pixelFormat = PixelFormat(name: name) else {
            throw CUDAStreamError("filter: the graph '\(graphText)' gives frames framesrv cannot carry on the GPU")
        }
        let format = FrameFormat(pixelFormat, width: Int(f.pointee.width), height: Int(f.pointee.height))
        if formats.last != format { formats.append(format) }
        let (planes, pitches) = avPlaneAddresses(f, count: pixelFormat.planes.count)
        var d = FrameDescription(f.pointee, color: ColorDescription(f.pointee), pts: f.pointee.pts, duration: f.pointee.pkt_duration,
                                 timeBase: timeBase, sampleAspectRatio: Rational(f.pointee.sample_aspect_ratio))
        d.captureNanos = monotonicNanos()
        if try output.publish(planes: planes, pitches: pitches, onDevice: true, format: format, description: d) {
            framesOut += 1
        }
    }

    public func close() { output.close() }
}

/// One configured graph: a buffer source of CUDA frames (its hw_frames_ctx sized for the
/// input), the user's graph, a buffersink that takes CUDA frames only.
final class CUDAGraph {
    struct Key: Equatable {
        var width: Int, height: Int, pixFmt: String, timeBase: Rational, sar: Rational
    }

    let key: Key
    private var graph: UnsafeMutablePointer<AVFilterGraph>?
    private var frames: UnsafeMutablePointer<AVBufferRef>?
    private let source: UnsafeMutablePointer<AVFilterContext>
    private let sink: UnsafeMutablePointer<AVFilterContext>
    private let text: String

    init(_ text: String, key: Key, device: UnsafeMutablePointer<AVBufferRef>, frameRate: Rational?) throws(CUDAStreamError) {
        self.key = key
        self.text = text
        frames = try Self.framesContext(key, device: device)
        graph = avfilter_graph_alloc()
        guard let g = graph else { throw CUDAStreamError("filter: out of memory") }
        do {
            source = try Self.source(key, frames: frames!, frameRate: frameRate, in: g)
            sink = try FilterGraph.bufferSink(in: g, formats: [AV_PIX_FMT_CUDA.rawValue])
            try FilterGraph.connect(text, source: source, sink: sink, media: AVMEDIA_TYPE_VIDEO, in: g)
        } catch {
            throw CUDAStreamError("filter: \(error)")
        }
        let configured = avfilter_graph_config(g, nil)
        guard configured >= 0 else {
            throw CUDAStreamError("filter: the graph '\(text)' cannot take \(key.width)x\(key.height) \(key.pixFmt) CUDA frames, or "
                                  + "its output is not on the GPU (end it with a CUDA filter, or add hwupload_cuda): \(ffmpegMessage(configured))")
        }
    }

    deinit {
        avfilter_graph_free(&graph)
        av_buffer_unref(&frames)
    }

    var outputTimeBase: Rational { Rational(av_buffersink_get_time_base(sink)) }

    private static func framesContext(_ key: Key, device: UnsafeMutablePointer<AVBufferRef>) throws(CUDAStreamError) -> UnsafeMutablePointer<AVBufferRef> {
        guard let ref = av_hwframe_ctx_alloc(device) else { throw CUDAStreamError("filter: out of memory") }
        let ctx = UnsafeMutableRawPointer(ref.pointee.data!).assumingMemoryBound(to: AVHWFramesContext.self)
        ctx.pointee.format = AV_PIX_FMT_CUDA
        ctx.pointee.sw_format = av_get_pix_fmt(key.pixFmt)
        ctx.pointee.width = Int32(key.width)
        ctx.pointee.height = Int32(key.height)
        let r = av_hwframe_ctx_init(ref)
        guard r >= 0 else {
            var owned: UnsafeMutablePointer<AVBufferRef>? = ref
            av_buffer_unref(&owned)
            throw CUDAStreamError("filter: FFmpeg's CUDA frames of \(key.width)x\(key.height) \(key.pixFmt): \(ffmpegMessage(r))")
        }
        return ref
    }

    private static func source(_ key: Key, frames: UnsafeMutablePointer<AVBufferRef>, frameRate: Rational?,
                               in g: UnsafeMutablePointer<AVFilterGraph>) throws(FilterError) -> UnsafeMutablePointer<AVFilterContext> {
        guard let s = avfilter_graph_alloc_filter(g, avfilter_get_by_name("buffer"), "in"),
              let par = av_buffersrc_parameters_alloc() else { throw .ffmpeg("avfilter_graph_alloc_filter(buffer)", "out of memory") }
        par.pointee.hw_frames_ctx = frames   // buffersrc takes its own reference
        av_buffersrc_parameters_set(s, par)
        av_free(par)
        let args = FilterGraph.bufferArguments(width: key.width, height: key.height, pixelFormat: "cuda", timeBase: key.timeBase,
                                               sampleAspectRatio: key.sar, frameRate: frameRate)
        let r = avfilter_init_str(s, args)
        guard r >= 0 else { throw .ffmpeg("avfilter_init_str(buffer of CUDA frames)", ffmpegMessage(r)) }
        return s
    }

    /// An AVFrame over the frame's device planes; libavfilter's last reference releases the
    /// frame on the legacy default stream, after the kernels that read it.
    func send(_ frame: OpaquePointer, _ info: framesrv_frame_info) throws(CUDAStreamError) {
        guard var av = av_frame_alloc() else { framesrv_frame_release(frame); throw CUDAStreamError("filter: out of memory") }
        defer { var f: UnsafeMutablePointer<AVFrame>? = av; av_frame_free(&f) }
        av.pointee.format = AV_PIX_FMT_CUDA.rawValue
        av.pointee.width = Int32(info.width)
        av.pointee.height = Int32(info.height)
        av.pointee.hw_frames_ctx = av_buffer_ref(frames)
        av.pointee.buf.0 = av_buffer_create(UnsafeMutablePointer<UInt8>(frame), 1, { _, data in
            framesrv_frame_release_on(OpaquePointer(data), nil)
        }, nil, 0)
        guard av.pointee.buf.0 != nil, av.pointee.hw_frames_ctx != nil else {
            framesrv_frame_release(frame)
            throw CUDAStreamError("filter: out of memory")
        }
        Self.setPlanes(&av, frame, count: Int(info.plane_count))
        av.pointee.pts = info.pts == Int64.min ? cffmpeg_nopts() : info.pts
        av.pointee.pkt_duration = info.duration
        av.pointee.sample_aspect_ratio = AVRational(num: info.sar_num, den: info.sar_den)
        av.pointee.color_range = AVColorRange(rawValue: info.color_range)
        av.pointee.colorspace = AVColorSpace(rawValue: info.color_matrix)
        av.pointee.color_primaries = AVColorPrimaries(rawValue: info.color_primaries)
        av.pointee.color_trc = AVColorTransferCharacteristic(rawValue: info.color_transfer)
        av.pointee.key_frame = info.flags & FRAMESRV_FRAME_KEY != 0 ? 1 : 0
        let r = av_buffersrc_add_frame_flags(source, av, 0)
        guard r >= 0 else { throw CUDAStreamError("filter: the graph '\(text)' refused a frame: \(ffmpegMessage(r))") }
    }

    private static func setPlanes(_ av: inout UnsafeMutablePointer<AVFrame>, _ frame: OpaquePointer, count: Int) {
        withUnsafeMutableBytes(of: &av.pointee.data) { data in
            withUnsafeMutableBytes(of: &av.pointee.linesize) { lines in
                let d = data.bindMemory(to: UnsafeMutablePointer<UInt8>?.self), l = lines.bindMemory(to: Int32.self)
                for i in 0..<min(count, Int(FRAMESRV_MAX_PLANES)) {
                    var plane = framesrv_device_plane()
                    guard framesrv_frame_device_plane(frame, UInt32(i), &plane) == FRAMESRV_OK.rawValue else { continue }
                    d[i] = UnsafeMutablePointer(bitPattern: UInt(plane.ptr))
                    l[i] = Int32(plane.pitch)
                }
            }
        }
    }

    func sendEnd() throws(CUDAStreamError) {
        let r = av_buffersrc_add_frame_flags(source, nil, 0)
        guard r >= 0 || r == cffmpeg_eof() else { throw CUDAStreamError("filter: ending the graph: \(ffmpegMessage(r))") }
    }

    /// The next frame out, nil when the graph needs more input (or ended).
    func receive() throws(CUDAStreamError) -> UnsafeMutablePointer<AVFrame>? {
        guard let f = av_frame_alloc() else { throw CUDAStreamError("filter: out of memory") }
        let r = av_buffersink_get_frame(sink, f)
        if r >= 0 { return f }
        var owned: UnsafeMutablePointer<AVFrame>? = f
        av_frame_free(&owned)
        guard r == cffmpeg_eagain() || r == cffmpeg_eof() else { throw CUDAStreamError("filter: the graph '\(text)': \(ffmpegMessage(r))") }
        return nil
    }
}
