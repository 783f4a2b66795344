import CFFmpeg
import FrameServer
import Glibc

/// Writes frames as uncompressed video with tightly packed planes, frame after frame:
///
/// - `.y4m`: a YUV4MPEG2 stream, the header as ffmpeg's `yuv4mpegpipe` muxer writes it
///   (`W H F I[ptb] A C... XYSCSS=... XCOLORRANGE=...`), then `FRAME` and the planes for each
///   frame, so `ffmpeg -i -` and `ffplay -` read it from a pipe;
/// - `.raw`: the planes only (what `ffmpeg -f rawvideo` writes); `readBackOptions` says how
///   to read them.
///
/// Planes are written straight from the slot (one `writev` per frame, rows gathered from
/// the header's strides), nothing copied. The output keeps the first frame's size and pixel
/// format: a later frame of another size or format is converted to it with libswscale.
public final class PackedVideoWriter {
    public enum Kind: Sendable { case y4m, raw }

    public let kind: Kind
    private let out: OutputFile
    private var adapter: FrameAdapter?
    private var rowBytes: [Int] = []
    private var rows: [Int] = []
    private let frameMarker: UnsafeMutableRawBufferPointer
    /// `.raw` of an audio stream: its samples go here.
    private var samples: AudioSamplesWriter?

    /// The stream's exact nominal frame rate (set it before the first frame): y4m's `F`, as
    /// framemd5 derives its time base (else the first frame's duration).
    public var frameRate: Rational?
    /// Frames written.
    public private(set) var frames = 0
    /// Bytes written so far.
    public var bytesWritten: Int64 { out.bytesWritten }
    /// Frames converted to the first frame's format or size (the rest were written in place).
    public var convertedFrames: Int { adapter?.convertedFrames ?? 0 }
    /// `.raw`, after the first frame: the ffmpeg input options that read the output back.
    public private(set) var readBackOptions: String?

    /// Writes to `path` (created or truncated), or to standard output for `-`. `shouldStop`
    /// is asked when a signal interrupts a write that blocks (a reader that does not read):
    /// true ends the write with `.interrupted`.
    public init(path: String, kind: Kind, shouldStop: (() -> Bool)? = nil) throws(MediaOutputError) {
        self.kind = kind
        out = try OutputFile(path: path, shouldStop: shouldStop)
        frameMarker = UnsafeMutableRawBufferPointer.allocate(byteCount: 6, alignment: 1)
        for (i, c) in "FRAME\n".utf8.enumerated() { frameMarker[i] = c }
    }

    deinit { frameMarker.deallocate() }

    /// y4m's colour-space tags for the pixel formats it carries, as ffmpeg's muxer writes them
    /// (yuv420p's depends on the chroma location: see `y4mTag(_:chroma:)`).
    static let y4mTags: [String: String] = [
        "gray": "Cmono", "gray9le": "Cmono9", "gray10le": "Cmono10", "gray12le": "Cmono12", "gray16le": "Cmono16",
        "yuv411p": "C411 XYSCSS=411",
        "yuv420p": "C420jpeg XYSCSS=420JPEG", "yuvj420p": "C420jpeg XYSCSS=420JPEG",
        "yuv422p": "C422 XYSCSS=422", "yuvj422p": "C422 XYSCSS=422",
        "yuv444p": "C444 XYSCSS=444", "yuvj444p": "C444 XYSCSS=444", "yuva444p": "C444alpha XYSCSS=444",
        "yuv420p9le": "C420p9 XYSCSS=420P9", "yuv422p9le": "C422p9 XYSCSS=422P9", "yuv444p9le": "C444p9 XYSCSS=444P9",
        "yuv420p10le": "C420p10 XYSCSS=420P10", "yuv422p10le": "C422p10 XYSCSS=422P10", "yuv444p10le": "C444p10 XYSCSS=444P10",
        "yuv420p12le": "C420p12 XYSCSS=420P12", "yuv422p12le": "C422p12 XYSCSS=422P12", "yuv444p12le": "C444p12 XYSCSS=444P12",
        "yuv420p14le": "C420p14 XYSCSS=420P14", "yuv422p14le": "C422p14 XYSCSS=422P14", "yuv444p14le": "C444p14 XYSCSS=444P14",
        "yuv420p16le": "C420p16 XYSCSS=420P16", "yuv422p16le": "C422p16 XYSCSS=422P16", "yuv444p16le": "C444p16 XYSCSS=444P16",
    ]

    /// The y4m colour-space tag for `name` with chroma location `chroma`: yuv4mpegenc's switch
    /// for yuv420p (top left: `420paldv`, left: `420mpeg2`, otherwise `420jpeg`), the table's
    /// tag for the other formats; nil for a format y4m does not carry.
    static func y4mTag(_ name: String, chroma: ChromaLocation) -> String? {
        guard name == "yuv420p" else { return y4mTags[name] }
        switch chroma {
        case .topLeft: return "C420paldv XYSCSS=420PALDV"
        case .left: return "C420mpeg2 XYSCSS=420MPEG2"
        default: return y4mTags[name]
        }
    }

    /// y4m's interlacing tag for a field order, as ffmpeg writes it: `t` for top field first
    /// (TT, TB), `b` for bottom field first (BB, BT), else `p`.
    static func y4mInterlacing(_ order: FieldOrder) -> String {
        switch order {
        case .topFirst, .topCodedBottomShown: return "It"
        case .bottomFirst, .bottomCodedTopShown: return "Ib"
        default: return "Ip"
        }
    }

    /// The pixel formats framesrv streams can have that y4m carries.
    public static var y4mFormats: [String] {
        PixelFormat.allCases.map(\.name).filter { y4mTags[$0] != nil }
    }

    /// Appends `frame` (after the stream header, before the first frame).
    public func write(_ frame: borrowing Frame) throws(MediaOutputError) {
        if frame.header.media == .audio {   // --raw of a sound stream: its samples, packed (AudioSamplesWriter)
            guard kind == .raw else { throw .audio(out.path, "y4m carries pictures; this stream carries sound") }
            samples = samples ?? AudioSamplesWriter(raw: out)
            return try samples!.write(frame)
        }
        if adapter == nil { try start(frame) }
        let f = try adapter!.avFrame(frame)
        var vectors: [iovec] = []
        vectors.reserveCapacity(8)
        if kind == .y4m { vectors.append(iovec(iov_base: frameMarker.baseAddress, iov_len: frameMarker.count)) }
        for (i, plane) in avPlanes(f, count: rowBytes.count).enumerated() {
            guard let base = plane.data else { continue }
            if plane.linesize == rowBytes[i] {
                vectors.append(iovec(iov_base: UnsafeMutableRawPointer(base), iov_len: rowBytes[i] * rows[i]))
            } else {
                for y in 0..<rows[i] {
                    vectors.append(iovec(iov_base: UnsafeMutableRawPointer(base + y * plane.linesize), iov_len: rowBytes[i]))
                }
            }
        }
        try out.write(&vectors)
        frames += 1
    }

    /// Fixes the output format from the first frame and writes the y4m header.
    private func start(_ frame: borrowing Frame) throws(MediaOutputError) {
        let header = frame.header
        let format = try FrameAdapter.pixelFormat(of: header)
        let name = header.pixelFormatName
        let d = header.description
        let tag = Self.y4mTag(name, chroma: d.chromaLocation)
        if kind == .y4m, tag == nil {
            throw .pixelFormat("y4m", name, Self.y4mFormats.joined(separator: ", ")
                + "; convert with 'framesrv produce --pix-fmt', or use --raw or --record")
        }
        let planes = Int(av_pix_fmt_count_planes(format))
        var sizes = [Int32](repeating: 0, count: 4)
        let r = av_image_fill_linesizes(&sizes, format, Int32(header.width))
        guard r >= 0, planes > 0, let desc = av_pix_fmt_desc_get(format) else {
            throw .ffmpeg("av_image_fill_linesizes", ffmpegMessage(r))
        }
        let chromaShift = Int(desc.pointee.log2_chroma_h)
        rowBytes = (0..<planes).map { Int(sizes[$0]) }
        rows = (0..<planes).map { i in i == 1 || i == 2 ? (header.height + (1 << chromaShift) - 1) >> chromaShift : header.height }
        let full: Bool? = d.color.range == 2 ? true : d.color.range == 1 ? false : nil
        adapter = try FrameAdapter(width: header.width, height: header.height, format: format, fullRange: full)

        let tb = FrameMD5Writer.rateTimeBase(frameRate) ?? FrameMD5Writer.outputTimeBase(d)
        var rateNum: Int32 = 25, rateDen: Int32 = 1
        if tb.num > 0, tb.den > 0 { _ = av_reduce(&rateNum, &rateDen, Int64(tb.den), Int64(tb.num), Int64(Int32.max)) }
        switch kind {
        case .y4m:
            let sar = d.sampleAspectRatio
            let aspect = sar.num > 0 && sar.den > 0 ? "\(sar.num):\(sar.den)" : "0:0"
            var range = ""
            if d.color.range == 1 { range = " XCOLORRANGE=LIMITED" }
            if d.color.range == 2 || name.hasPrefix("yuvj") { range = " XCOLORRANGE=FULL" }
            let text = "YUV4MPEG2 W\(header.width) H\(header.height) F\(rateNum):\(rateDen) \(Self.y4mInterlacing(d.fieldOrder)) A\(aspect) \(tag!)\(range)\n"
            try out.write(Array(text.utf8))
        case .raw:
            let rate = rateDen == 1 ? "\(rateNum)" : "\(rateNum)/\(rateDen)"
            readBackOptions = "-f rawvideo -pix_fmt \(name) -s \(header.width)x\(header.height) -framerate \(rate)"
        }
    }
}
