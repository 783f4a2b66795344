import CFFmpeg
import FrameServer
import Glibc

/// Runs a libavfilter graph (ffmpeg's `-vf` syntax) on the frames of a stream, as
/// `ffmpeg -i INPUT -vf GRAPH` does:
///
/// - the graph is parsed with `avfilter_graph_parse2` between a `buffer` source and a
///   `buffersink`, as ffmpeg's simple filter graphs are, with ffmpeg's `sws_flags`
///   (`flags=bicubic`) for every scale filter, explicit or auto-inserted;
/// - the source is configured from the first frame (size, pixel format, time base, aspect
///   ratio) and the stream's exact nominal frame rate; each frame carries its colour
///   description (`colorspace`, `color_range`, primaries, transfer), field order and chroma
///   location, so conversions and field filters see what ffmpeg's do; the output rate is
///   the buffersink's (`av_buffersink_get_frame_rate`), and each output frame's field order
///   and chroma location are read back from it;
/// - the sink accepts the pixel formats framesrv carries (libavfilter converts to one of them
///   when the graph's natural output is another, as ffmpeg does for an encoder);
/// - a frame of another size or pixel format (or time base) ends the graph (`sendEnd`, all
///   its frames out) and the next `send` builds a new one;
/// - the end of the input closes the source at the last frame's end (its pts plus its
///   duration), as ffmpeg closes it, so rate-changing filters (`fps`) make ffmpeg's frames up
///   to the end of the last one;
/// - a graph whose output ends by itself (`trim=end_frame=N`) is finished (`isFinished`):
///   later frames are discarded, as ffmpeg stops there (only `restart()` builds a new graph).
///
/// Input frames are not copied: `send` wraps the slot as an `AVFrame` (planes at the
/// header's offsets and strides) whose buffer is read-only and whose free callback drops
/// the `SharedFrame`, releasing the slot when libavfilter is done with it. Use it from one
/// thread.
public final class FilterGraph {
    /// The graph text, as given.
    public let graph: String
    /// Filter threads (0: as many as libavfilter likes, ffmpeg's default).
    public let threads: Int
    /// The stream's nominal frame rate, given to the buffer source (ffmpeg gives it the
    /// input's guessed frame rate); set before the first `send`.
    public var inputFrameRate: Rational?

    /// Frames sent without a copy / copied first (see `send`).
    public private(set) var framesInPlace = 0
    public private(set) var framesCopied = 0
    /// Whether the graph's output ended by itself (a `trim` with an end, say) before its
    /// input did: `receive()` has returned its last frame and `send` discards what comes
    /// (ffmpeg stops filtering there). `restart()` clears it.
    public private(set) var isFinished = false

    private var instance: Instance?

    /// What a built graph was configured for.
    struct InputKey: Equatable {
        var width: Int32, height: Int32, format: Int32, tbNum: Int32, tbDen: Int32
    }

    final class Instance {
        var graph: UnsafeMutablePointer<AVFilterGraph>?
        let source: UnsafeMutablePointer<AVFilterContext>
        let sink: UnsafeMutablePointer<AVFilterContext>
        let key: InputKey
        let outputTimeBase: Rational
        let outputFrameRate: Rational?
        var ended = false
        /// Where the input ends so far: the last frame's pts plus its duration (the source's
        /// time base), the timestamp the source is closed at.
        var endPTS: Int64?

        init(graph: UnsafeMutablePointer<AVFilterGraph>, source: UnsafeMutablePointer<AVFilterContext>,
             sink: UnsafeMutablePointer<AVFilterContext>, key: InputKey) {
            self.graph = graph; self.source = source; self.sink = sink; self.key = key
            let tb = av_buffersink_get_time_base(sink)
            outputTimeBase = Rational(tb.num, tb.den)
            let fr = av_buffersink_get_frame_rate(sink)
            outputFrameRate = fr.num > 0 && fr.den > 0 ? Rational(fr.num, fr.den) : nil
        }

        deinit { avfilter_graph_free(&graph) }
    }

    /// Checks `graph` (parsing it: syntax, filters, their options, the files they open, and
    /// its shape: one video input, one video output) and prepares to run it with `threads`
    /// filter threads.
    public init(graph: String, threads: Int = 0) throws(FilterError) {
        self.graph = graph
        self.threads = max(0, threads)
        installLogCapture()
        // Parse once against a stand-in source: what is wrong with the text shows up now,
        // before any frame is taken from the stream.
        let probe = InputKey(width: 64, height: 64, format: AV_PIX_FMT_YUV420P.rawValue, tbNum: 1, tbDen: 25)
        _ = try build(probe, sampleAspectRatio: Rational(0, 1), configure: false)
    }

    /// The frame rate the graph's output has (nil until a graph is built, or when unknown).
    public var outputFrameRate: Rational? { instance?.outputFrameRate }
    /// The time base of the output frames' timestamps (nil until a graph is built).
    public var outputTimeBase: Rational? { instance?.outputTimeBase }

    /// Whether `header`'s frame can go into the current graph (true when none is built):
    /// false means call `sendEnd()`, receive what is left, then `send` builds a new graph.
    public func accepts(_ header: FrameHeader) -> Bool {
        guard !isFinished, let instance, !instance.ended else { return true }
        return (try? key(for: header)) == instance.key
    }

    private func key(for header: FrameHeader) throws(FilterError) -> InputKey {
        let name = header.pixelFormat?.name ?? header.pixelFormatName
        let format = av_get_pix_fmt(name)
        guard format != AV_PIX_FMT_NONE else { throw .unknownPixelFormat(name) }
        let d = header.description
        let tb = d.timeBase.num > 0 && d.timeBase.den > 0 ? d.timeBase : Rational(1, 1_000_000)
        return InputKey(width: Int32(header.width), height: Int32(header.height), format: format.rawValue,
                        tbNum: tb.num, tbDen: tb.den)
    }

    /// Whether libavfilter can use the slot's layout as it is: planes and strides aligned
    /// as FFmpeg aligns its own frames, and room after the last plane for SIMD over-reads.
    static func layoutIsUsable(_ header: FrameHeader, slotBytes: Int) -> Bool {
        var end = 0
        for i in 0..<header.planeCount {
            let offset = header.offset(plane: i), stride = header.stride(plane: i)
            guard offset % 64 == 0, stride % 32 == 0, stride > 0 else { return false }
            end = max(end, offset + header.size(plane: i))
        }
        return end + 64 <= slotBytes
    }

    /// Feeds one frame to the graph (building it first if needed: see `accepts`).
    ///
    /// With `inPlace`, libavfilter reads the slot itself and the frame is released when
    /// libavfilter frees its last reference (often at once, sometimes frames later); else, or
    /// when the layout does not suit libavfilter, the frame is copied into an FFmpeg buffer
    /// first and released now. Then collect what the graph made with `receive()`.
    public func send(_ frame: SharedFrame, inPlace: Bool) throws(FilterError) {
        guard !isFinished else { return }
        let header = frame.header
        let k = try key(for: header)
        let d = header.description
        if let instance, instance.ended || instance.key != k {
            // A new format without sendEnd(): end the old graph here (its last frames are lost).
            self.instance = nil
        }
        if instance == nil {
            instance = try build(k, sampleAspectRatio: d.sampleAspectRatio, configure: true)
        }
        guard let instance else { return }

        var av: UnsafeMutablePointer<AVFrame>? = try Self.wrap(frame, key: k)
        defer { av_frame_free(&av) }
        guard let f = av else { return }
        if let pts = d.pts {
            // The frame's end: its duration, else one period of the nominal rate (as ffmpeg
            // estimates a frame's duration), else nothing past its pts.
            var duration = max(0, d.duration)
            if duration == 0, let fr = inputFrameRate, fr.num > 0, fr.den > 0 {
                duration = av_rescale_q(1, AVRational(num: fr.den, den: fr.num), AVRational(num: k.tbNum, den: k.tbDen))
            }
            instance.endPTS = max(instance.endPTS ?? Int64.min, pts + duration)
        }

        if inPlace, Self.layoutIsUsable(header, slotBytes: frame.slotBytes) {
            framesInPlace += 1
        } else {
            // The buffer is read-only, so this copies into an FFmpeg buffer and frees ours.
            let r = av_frame_make_writable(f)
            guard r >= 0 else { throw .ffmpeg("av_frame_make_writable", ffmpegMessage(r)) }
            framesCopied += 1
        }
        let r = withLogCapture { av_buffersrc_add_frame_flags(instance.source, f, Int32(AV_BUFFERSRC_FLAG_PUSH)) }
        guard r.value >= 0 else {
            throw .cannotConfigure(graph, describe(k), r.message ?? ffmpegMessage(r.value))
        }
    }

    /// `frame` as an `AVFrame` for input `k`, without a copy: the planes at the header's
    /// offsets in one read-only buffer over the whole slot, whose free drops the SharedFrame;
    /// timestamps, colour, field order and chroma location from the header.
    private static func wrap(_ frame: SharedFrame, key k: InputKey) throws(FilterError) -> UnsafeMutablePointer<AVFrame> {
        let planes: FramePlanes
        do { planes = try FramePlanes(frame.header, base: frame.base, as: AVPixelFormat(rawValue: k.format)) } catch { throw .layout(error) }
        var av: UnsafeMutablePointer<AVFrame>? = av_frame_alloc()
        guard let f = av else { throw .ffmpeg("av_frame_alloc", "out of memory") }
        let d = frame.header.description
        f.pointee.format = k.format
        f.pointee.width = k.width
        f.pointee.height = k.height
        planes.install(in: f)
        let opaque = Unmanaged.passRetained(frame).toOpaque()
        let buffer = av_buffer_create(UnsafeMutablePointer(mutating: frame.base.assumingMemoryBound(to: UInt8.self)),
                                      frame.slotBytes, { opaque, _ in
                                          if let opaque { Unmanaged<SharedFrame>.fromOpaque(opaque).release() }
                                      }, opaque, Int32(AV_BUFFER_FLAG_READONLY))
        guard let buffer else {
            Unmanaged<SharedFrame>.fromOpaque(opaque).release()
            av_frame_free(&av)
            throw .ffmpeg("av_buffer_create", "out of memory")
        }
        f.pointee.buf.0 = buffer
        f.pointee.pts = d.pts ?? cffmpeg_nopts()
        f.pointee.pkt_duration = d.duration
        f.pointee.key_frame = d.flags.contains(.keyframe) ? 1 : 0
        f.pointee.sample_aspect_ratio = d.sampleAspectRatio.av
        f.pointee.colorspace = AVColorSpace(rawValue: d.color.matrix)
        f.pointee.color_range = AVColorRange(rawValue: d.color.range)
        f.pointee.color_primaries = AVColorPrimaries(rawValue: d.color.primaries)
        f.pointee.color_trc = AVColorTransferCharacteristic(rawValue: d.color.transfer)
        // Field order and chroma location: what field filters (yadif, bwdif) and scale read.
        d.applyFields(to: f)
        return f
    }

    /// Ends the current graph's input: `receive()` then returns everything still in it, and
    /// nil once it is empty (the graph is then freed; the next `send` builds a new one).
    /// The source is closed at the end of the last frame sent (ffmpeg's `ifilter_send_eof`).
    public func sendEnd() throws(FilterError) {
        guard !isFinished, let instance, !instance.ended else { return }
        instance.ended = true
        let r = av_buffersrc_close(instance.source, instance.endPTS ?? cffmpeg_nopts(), UInt32(AV_BUFFERSRC_FLAG_PUSH))
        guard r >= 0 else { throw .ffmpeg("av_buffersrc_close", ffmpegMessage(r)) }
    }

    /// Forgets the current graph, finished or not, without taking its last frames out (call
    /// `sendEnd()` and `receive()` first to keep them): the next `send` builds a new one.
    public func restart() {
        instance = nil
        isFinished = false
    }

    /// The next frame the graph made, or nil when it needs more input (or, after
    /// `sendEnd()`, when it is empty).
    public func receive() throws(FilterError) -> FilteredFrame? {
        guard !isFinished, let instance else { return nil }
        var av: UnsafeMutablePointer<AVFrame>? = av_frame_alloc()
        guard let f = av else { throw .ffmpeg("av_frame_alloc", "out of memory") }
        let r = withLogCapture { av_buffersink_get_frame(instance.sink, f) }
        if r.value >= 0 {
            do { return try FilteredFrame(frame: f, timeBase: instance.outputTimeBase, inputTimeBase: Rational(instance.key.tbNum, instance.key.tbDen)) } catch {
                av_frame_free(&av)
                throw error
            }
        }
        av_frame_free(&av)
        if instance.ended {
            // Drained (an ended graph that asks for more input has nothing left either): the
            // next send builds a new graph.
            self.instance = nil
            return nil
        }
        if r.value == cffmpeg_eof() {
            // The graph's output ended before its input (trim): it stays, finished, and what
            // comes next is discarded, as ffmpeg stops filtering there.
            instance.ended = true
            isFinished = true
            return nil
        }
        if r.value == cffmpeg_eagain() { return nil }
        throw .cannotConfigure(graph, describe(instance.key), r.message ?? ffmpegMessage(r.value))
    }

    func describe(_ k: InputKey) -> String {
        let name = av_get_pix_fmt_name(AVPixelFormat(rawValue: k.format)).map { String(cString: $0) } ?? "format \(k.format)"
        return "\(k.width)x\(k.height) \(name)"
    }
}
