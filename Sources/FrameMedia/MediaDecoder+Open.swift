// MediaDecoder's opening steps: the input, its video stream and the decoder.

import CFFmpeg
import FrameServer
import Glibc

extension MediaDecoder {
    /// Opens `input` (`-`: standard input), as input format `formatName` when given (ffmpeg's
    /// `-f`), and reads its streams' information.
    static func openInput(_ input: String, formatName: String?) throws(MediaInputError) -> UnsafeMutablePointer<AVFormatContext> {
        var inputFormat: UnsafePointer<AVInputFormat>?
        if let formatName {
            guard let f = av_find_input_format(formatName) else { throw .unknownInputFormat(formatName) }
            inputFormat = f
        }
        var ctx: UnsafeMutablePointer<AVFormatContext>?
        var r = avformat_open_input(&ctx, input == "-" ? "pipe:0" : input, inputFormat, nil)
        guard r >= 0, let opened = ctx else { throw .cannotOpen(input, ffmpegMessage(r)) }
        r = avformat_find_stream_info(opened, nil)
        guard r >= 0 else {
            avformat_close_input(&ctx)
            throw .cannotOpen(input, ffmpegMessage(r))
        }
        return opened
    }

    /// The video stream ffmpeg would pick (`av_find_best_stream`) and a decoder for its codec.
    static func videoDecoder(in ctx: UnsafeMutablePointer<AVFormatContext>,
                             input: String) throws(MediaInputError) -> (index: Int32, decoder: UnsafePointer<AVCodec>) {
        let index = av_find_best_stream(ctx, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
        guard index >= 0 else {
            if index == cffmpeg_decoder_not_found() { throw .unsupportedCodec(input, "?") }
            throw .noVideoStream(input)
        }
        let codecID = ctx.pointee.streams[Int(index)]!.pointee.codecpar!.pointee.codec_id
        guard let decoder = avcodec_find_decoder(codecID) else {
            throw .unsupportedCodec(input, String(cString: avcodec_get_name(codecID)))
        }
        return (index, decoder)
    }

    /// Opens `decoder` for the stream's `parameters`, with `threads` threads, decoding into
    /// the allocator's slots when there is one. A failure closes everything opened so far.
    func openCodec(_ decoder: UnsafePointer<AVCodec>, parameters: UnsafeMutablePointer<AVCodecParameters>,
                   timeBase tb: AVRational, threads: Int) throws(MediaInputError) {
        codec = avcodec_alloc_context3(decoder)
        packet = av_packet_alloc()
        frame = av_frame_alloc()
        guard let codec, packet != nil, frame != nil else {
            close()
            throw .ffmpeg("avcodec_alloc_context3", "out of memory")
        }
        var r = avcodec_parameters_to_context(codec, parameters)
        guard r >= 0 else { close(); throw .ffmpeg("avcodec_parameters_to_context", ffmpegMessage(r)) }
        codec.pointee.pkt_timebase = tb
        codec.pointee.thread_count = Int32(max(0, threads))
        allocator?.install(on: codec)
        if let device = options.cudaDevice { try useCUDA(device, on: codec) }
        r = avcodec_open2(codec, decoder, nil)
        guard r >= 0 else { close(); throw .unsupportedCodec(input, "\(codecName) (\(ffmpegMessage(r)))") }
    }

    /// `--hwaccel cuda`: NVDEC on CUDA device `device` (its primary context), CUDA frames out
    /// when the codec has a CUDA hwaccel; else FFmpeg decodes in software (`hardwareDecoded` says which).
    func useCUDA(_ device: Int, on codec: UnsafeMutablePointer<AVCodecContext>) throws(MediaInputError) {
        var hw: UnsafeMutablePointer<AVBufferRef>?
        var options: OpaquePointer?
        av_dict_set(&options, "primary_ctx", "1", 0)
        let r = av_hwdevice_ctx_create(&hw, AV_HWDEVICE_TYPE_CUDA, "\(device)", options, 0)
        av_dict_free(&options)
        guard r >= 0, let hw else { close(); throw .hardwareDevice("\(device)", ffmpegMessage(r)) }
        codec.pointee.hw_device_ctx = hw   // the codec owns the reference
        cffmpeg_use_cuda_format(codec)
    }

    /// The format the first picture will most likely have on a CUDA stream, from the stream's
    /// parameters: NVDEC's output (`nvdec`: nv12, p010le up to 10 bits, p016le past; yuv444p,
    /// yuv444p16le), else the decoder's own (yuvj420p as yuv420p); nil when the input does not
    /// say, or framesrv has no such format.
    public func expectedCUDAFormat(nvdec: Bool) -> FrameFormat? {
        guard let c = codec, c.pointee.width > 0, c.pointee.height > 0,
              let d = av_pix_fmt_desc_get(c.pointee.pix_fmt) else { return nil }
        let depth = d.pointee.comp.0.depth, name: String
        switch (nvdec, d.pointee.log2_chroma_w, d.pointee.log2_chroma_h) {
        case (true, 1, 1): name = depth > 10 ? "p016le" : depth > 8 ? "p010le" : "nv12"
        case (true, 0, 0): name = depth > 8 ? "yuv444p16le" : "yuv444p"
        default: name = String(cString: d.pointee.name)
        }
        return DecodedFrame.framesrvFormat(named: name).map { FrameFormat($0, width: Int(c.pointee.width), height: Int(c.pointee.height)) }
    }

    /// Every stream of `ctx` but those of `carried`, as `#N type (codec)`.
    static func streamNames(_ ctx: UnsafeMutablePointer<AVFormatContext>, except carried: [Int32]) -> [String] {
        (0..<Int(ctx.pointee.nb_streams)).filter { !carried.contains(Int32($0)) }.map { i in
            let par = ctx.pointee.streams[i]!.pointee.codecpar!.pointee
            let type = av_get_media_type_string(par.codec_type).map { String(cString: $0) } ?? "unknown"
            return "#\(i) \(type) (\(String(cString: avcodec_get_name(par.codec_id))))"
        }
    }
}
