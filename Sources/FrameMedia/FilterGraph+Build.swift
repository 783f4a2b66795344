// FilterGraph's building: buffer source -> the parsed graph -> buffersink, checked and configured.

import CFFmpeg
import FrameServer
import Glibc

extension FilterGraph {
    /// Builds source -> graph -> sink for input `key`; configures it (negotiates formats)
    /// when `configure`, else only checks that the text parses into a one-in, one-out video graph.
    func build(_ key: InputKey, sampleAspectRatio sar: Rational, configure: Bool) throws(FilterError) -> Instance? {
        guard var g = avfilter_graph_alloc() else { throw .ffmpeg("avfilter_graph_alloc", "out of memory") }
        var owned: UnsafeMutablePointer<AVFilterGraph>? = g
        var keep = false
        defer { if !keep { avfilter_graph_free(&owned) } }
        g.pointee.nb_threads = Int32(threads)
        // ffmpeg's default sws_flags, which it gives every scale filter of a graph.
        g.pointee.scale_sws_opts = av_strdup("flags=bicubic")

        let source = try bufferSource(key, sampleAspectRatio: sar, in: g)
        let sink = try Self.bufferSink(in: g, formats: Self.carriedFormats)

        try Self.connect(graph, source: source, sink: sink, media: AVMEDIA_TYPE_VIDEO, in: g)
        guard configure else { return nil }
        let configured = withLogCapture { avfilter_graph_config(g, nil) }
        guard configured.value >= 0 else {
            throw .cannotConfigure(graph, describe(key), configured.message ?? ffmpegMessage(configured.value))
        }
        keep = true
        g = owned!
        return Instance(graph: g, source: source, sink: sink, key: key)
    }

    /// Parses `text` into `g` and links it between `source` and `sink`: it must be one unconnected
    /// input and one unconnected output of `media` (the video and audio graphs, and the CUDA one).
    static func connect(_ text: String, source: UnsafeMutablePointer<AVFilterContext>, sink: UnsafeMutablePointer<AVFilterContext>,
                        media: AVMediaType, in g: UnsafeMutablePointer<AVFilterGraph>) throws(FilterError) {
        let wrong: (String) -> FilterError = { media == AVMEDIA_TYPE_AUDIO ? .notAnAudioGraph(text, $0) : .notAVideoGraph(text, $0) }
        let kind = media == AVMEDIA_TYPE_AUDIO ? "audio" : "video"
        var inputs: UnsafeMutablePointer<AVFilterInOut>?
        var outputs: UnsafeMutablePointer<AVFilterInOut>?
        defer { avfilter_inout_free(&inputs); avfilter_inout_free(&outputs) }
        let parsed = withLogCapture { avfilter_graph_parse2(g, text, &inputs, &outputs) }
        guard parsed.value >= 0 else { throw .invalidGraph(text, parsed.message ?? ffmpegMessage(parsed.value)) }
        func count(_ l: UnsafeMutablePointer<AVFilterInOut>?) -> Int {
            var n = 0, p = l
            while let q = p { n += 1; p = q.pointee.next }
            return n
        }
        guard let input = inputs, count(inputs) == 1 else { throw wrong("it has \(count(inputs)) unconnected inputs") }
        guard let output = outputs, count(outputs) == 1 else { throw wrong("it has \(count(outputs)) unconnected outputs") }
        let inCtx = input.pointee.filter_ctx!, outCtx = output.pointee.filter_ctx!
        guard avfilter_pad_get_type(inCtx.pointee.input_pads, input.pointee.pad_idx) == media else {
            throw wrong("its input is not \(kind)")
        }
        guard avfilter_pad_get_type(outCtx.pointee.output_pads, output.pointee.pad_idx) == media else {
            throw wrong("its output is not \(kind)")
        }
        var r = avfilter_link(source, 0, inCtx, UInt32(input.pointee.pad_idx))
        if r >= 0 { r = avfilter_link(outCtx, UInt32(output.pointee.pad_idx), sink, 0) }
        guard r >= 0 else { throw .ffmpeg("avfilter_link", ffmpegMessage(r)) }
    }

    /// The arguments ffmpeg gives a video buffer source (`pixelFormat`: FFmpeg's code or name; cuda for CUDA frames).
    static func bufferArguments(width: Int, height: Int, pixelFormat: String, timeBase: Rational, sampleAspectRatio sar: Rational,
                                frameRate: Rational?) -> String {
        var args = "video_size=\(width)x\(height):pix_fmt=\(pixelFormat):time_base=\(timeBase.num)/\(timeBase.den)"
        args += ":pixel_aspect=\(sar.num > 0 && sar.den > 0 ? sar.num : 0)/\(sar.num > 0 && sar.den > 0 ? sar.den : 1)"
        if let fr = frameRate, fr.num > 0, fr.den > 0 { args += ":frame_rate=\(fr.num)/\(fr.den)" }
        return args
    }

    /// The buffer source for input `key`, with the arguments ffmpeg gives it.
    private func bufferSource(_ key: InputKey, sampleAspectRatio sar: Rational,
                              in g: UnsafeMutablePointer<AVFilterGraph>) throws(FilterError) -> UnsafeMutablePointer<AVFilterContext> {
        let args = Self.bufferArguments(width: Int(key.width), height: Int(key.height), pixelFormat: "\(key.format)",
                                        timeBase: Rational(key.tbNum, key.tbDen), sampleAspectRatio: sar, frameRate: inputFrameRate)
        var source: UnsafeMutablePointer<AVFilterContext>?
        let r = avfilter_graph_create_filter(&source, avfilter_get_by_name("buffer"), "in", args, nil, g)
        guard r >= 0, let source else { throw .ffmpeg("avfilter_graph_create_filter(buffer)", ffmpegMessage(r)) }
        return source
    }

    /// A buffersink that takes `formats` (FFmpeg's codes): what framesrv carries, or CUDA frames.
    static func bufferSink(in g: UnsafeMutablePointer<AVFilterGraph>, formats: [Int32]) throws(FilterError) -> UnsafeMutablePointer<AVFilterContext> {
        guard let sink = avfilter_graph_alloc_filter(g, avfilter_get_by_name("buffersink"), "out") else {
            throw .ffmpeg("avfilter_graph_alloc_filter(buffersink)", "out of memory")
        }
        var r = formats.withUnsafeBytes { av_opt_set_bin(UnsafeMutableRawPointer(sink), "pix_fmts", $0.baseAddress, Int32($0.count), AV_OPT_SEARCH_CHILDREN) }
        guard r >= 0 else { throw .ffmpeg("av_opt_set_bin(pix_fmts)", ffmpegMessage(r)) }
        r = avfilter_init_str(sink, nil)
        guard r >= 0 else { throw .ffmpeg("avfilter_init_str(buffersink)", ffmpegMessage(r)) }
        return sink
    }

    /// FFmpeg's codes of the pixel formats framesrv carries (the sink's list).
    static let carriedFormats: [Int32] = PixelFormat.allCases.map { av_get_pix_fmt($0.name).rawValue }
        .filter { $0 != AV_PIX_FMT_NONE.rawValue }
}
