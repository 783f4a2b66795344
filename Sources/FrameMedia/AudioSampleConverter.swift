import CFFmpeg
import FrameServer
import Glibc

/// Converts audio frames read from slots to another sample format through libavfilter
/// (`abuffer -> aformat -> abuffersink`), the graph ffmpeg builds when its encoder wants
/// another format: libavfilter inserts the same `aresample` with the same defaults, so the
/// samples come out as ffmpeg's do. Rebuilt when the stream's format changes.
final class AudioSampleConverter {
    let target: SampleFormat
    /// Samples per output frame (an encoder's frame size); 0: as they come.
    let frameSize: Int
    private var graph: UnsafeMutablePointer<AVFilterGraph>?
    private var source: UnsafeMutablePointer<AVFilterContext>?
    private var sink: UnsafeMutablePointer<AVFilterContext>?
    private var input: UnsafeMutablePointer<AVFrame>?
    private var output: UnsafeMutablePointer<AVFrame>?
    private var built: AudioFormat?

    init(to target: SampleFormat, frameSize: Int = 0) throws(MediaOutputError) {
        self.target = target
        self.frameSize = frameSize
        input = av_frame_alloc()
        output = av_frame_alloc()
        guard input != nil, output != nil else { throw .ffmpeg("av_frame_alloc", "out of memory") }
    }

    deinit {
        avfilter_graph_free(&graph)
        av_frame_free(&input)
        av_frame_free(&output)
    }

    /// Feeds `frame` (validated, audio) and hands each converted frame to `body`: its packed
    /// samples and their count.
    func convert(_ frame: borrowing Frame, _ body: (UnsafeRawBufferPointer, Int) throws(MediaOutputError) -> Void) throws(MediaOutputError) {
        guard let format = frame.header.audioFormat, let input else { return }
        // The slot's rows, read in place; av_buffersrc_add_frame copies them into its own buffer.
        try Self.withAVFrame(input, frame, format) { f throws(MediaOutputError) in
            try convert(f, format) { out throws(MediaOutputError) in
                let bytes = Int(out.pointee.nb_samples) * Int(out.pointee.ch_layout.nb_channels) * target.bytesPerSample
                try body(UnsafeRawBufferPointer(start: out.pointee.data.0, count: bytes), Int(out.pointee.nb_samples))
            }
        }
    }

    /// Feeds an AVFrame of `format` (nil: the end, flushing what the graph holds) and hands
    /// each converted frame to `body`, valid until it returns.
    func convert(_ frame: UnsafeMutablePointer<AVFrame>?, _ format: AudioFormat?,
                 _ body: (UnsafeMutablePointer<AVFrame>) throws(MediaOutputError) -> Void) throws(MediaOutputError) {
        guard let output else { return }
        if let format, built.map({ !$0.sameStream(as: format) }) ?? true { try build(for: format) }
        guard source != nil else { return }   // the end of a stream that never had a frame
        let r = av_buffersrc_add_frame_flags(source, frame, Int32(AV_BUFFERSRC_FLAG_KEEP_REF))
        guard r >= 0 else { throw .ffmpeg("av_buffersrc_add_frame", ffmpegMessage(r)) }
        while true {
            av_frame_unref(output)
            let got = av_buffersink_get_frame(sink, output)
            if got == cffmpeg_eagain() || got == cffmpeg_eof() { return }
            guard got >= 0 else { throw .ffmpeg("av_buffersink_get_frame", ffmpegMessage(got)) }
            try body(output)
        }
    }

    /// `frame`'s samples as an AVFrame (`f`, reused) whose rows point into the slot, for the
    /// length of `body`.
    static func withAVFrame(_ f: UnsafeMutablePointer<AVFrame>, _ frame: borrowing Frame, _ format: AudioFormat,
                            _ body: (UnsafeMutablePointer<AVFrame>) throws(MediaOutputError) -> Void) throws(MediaOutputError) {
        av_frame_unref(f)
        describe(f, format, pts: frame.header.description.pts)
        var rows = [UnsafeMutablePointer<UInt8>?](repeating: nil, count: format.rows)
        for i in 0..<format.rows {
            rows[i] = UnsafeMutablePointer(mutating: frame.audioRow(i).baseAddress?.assumingMemoryBound(to: UInt8.self))
        }
        defer {
            f.pointee.extended_data = nil
            _ = withUnsafeMutableBytes(of: &f.pointee.data) { $0.initializeMemory(as: UInt8.self, repeating: 0) }
        }
        try rows.withUnsafeMutableBufferPointer { (r: inout UnsafeMutableBufferPointer<UnsafeMutablePointer<UInt8>?>) throws(MediaOutputError) in
            f.pointee.extended_data = r.baseAddress
            withUnsafeMutableBytes(of: &f.pointee.data) { d in
                for i in 0..<min(format.rows, 8) {
                    d.storeBytes(of: r[i], toByteOffset: i * MemoryLayout<UnsafeMutablePointer<UInt8>?>.stride, as: UnsafeMutablePointer<UInt8>?.self)
                }
            }
            f.pointee.linesize.0 = Int32(clamping: format.rowBytes ?? 0)
            try body(f)
        }
    }

    /// Sets an AVFrame's format, rate, layout, sample count and pts (1/sample_rate).
    static func describe(_ f: UnsafeMutablePointer<AVFrame>, _ format: AudioFormat, pts: Int64?) {
        f.pointee.format = Int32(avFormat(format.sampleFormat).rawValue)
        f.pointee.sample_rate = Int32(format.sampleRate)
        f.pointee.nb_samples = Int32(format.samples)
        f.pointee.pts = pts ?? cffmpeg_nopts()
        setLayout(&f.pointee.ch_layout, format.layout)
    }

    /// The graph for frames of `format`.
    private func build(for format: AudioFormat) throws(MediaOutputError) {
        avfilter_graph_free(&graph)
        guard let g = avfilter_graph_alloc() else { throw .ffmpeg("avfilter_graph_alloc", "out of memory") }
        graph = g
        let args = Self.abufferArguments(format)
        var aformat: UnsafeMutablePointer<AVFilterContext>?
        var r = avfilter_graph_create_filter(&source, avfilter_get_by_name("abuffer"), "in", args, nil, g)
        if r >= 0 { r = avfilter_graph_create_filter(&aformat, avfilter_get_by_name("aformat"), "format", "sample_fmts=\(target.name)", nil, g) }
        if r >= 0 { r = avfilter_graph_create_filter(&sink, avfilter_get_by_name("abuffersink"), "out", nil, nil, g) }
        if r >= 0 { r = avfilter_link(source, 0, aformat, 0) }
        if r >= 0 { r = avfilter_link(aformat, 0, sink, 0) }
        if r >= 0 { r = avfilter_graph_config(g, nil) }
        if r >= 0, frameSize > 0 { av_buffersink_set_frame_size(sink, UInt32(frameSize)) }
        guard r >= 0 else { throw .ffmpeg("building the audio conversion to \(target.name) (\(args))", ffmpegMessage(r)) }
        built = format
    }

    /// `abuffer`'s arguments for frames of `format`: time base 1/sample_rate, the rate, the
    /// sample format, and the layout's mask (or, without one, the channel count).
    static func abufferArguments(_ format: AudioFormat) -> String {
        let layout = format.layout.isNative ? "channel_layout=0x\(String(format.layout.mask, radix: 16))" : "channels=\(format.channels)"
        return "time_base=1/\(format.sampleRate):sample_rate=\(format.sampleRate):sample_fmt=\(format.sampleFormat.name):\(layout)"
    }

    /// FFmpeg's AVSampleFormat for `format` (by its name).
    static func avFormat(_ format: SampleFormat) -> AVSampleFormat { av_get_sample_fmt(format.name) }

    /// Sets an AVChannelLayout from framesrv's.
    static func setLayout(_ target: inout AVChannelLayout, _ layout: ChannelLayout) {
        av_channel_layout_uninit(&target)
        if layout.isNative {
            _ = av_channel_layout_from_mask(&target, layout.mask)
        } else {
            target.order = AV_CHANNEL_ORDER_UNSPEC
            target.nb_channels = Int32(layout.channels)
        }
    }

    /// FFmpeg's name for a layout (`stereo`, `5.1(side)`, `6 channels`), as framemd5 prints it.
    static func layoutName(_ layout: ChannelLayout) -> String {
        var l = AVChannelLayout()
        setLayout(&l, layout)
        defer { av_channel_layout_uninit(&l) }
        var text = [CChar](repeating: 0, count: 128)
        guard av_channel_layout_describe(&l, &text, text.count) >= 0 else { return "\(layout.channels) channels" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
