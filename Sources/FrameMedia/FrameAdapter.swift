import CFFmpeg
import FrameServer
import Glibc

/// What can go wrong writing frames out: y4m/raw streams and recordings.
public enum MediaOutputError: Error, CustomStringConvertible, Sendable {
    /// The output file cannot be opened for writing (path, reason).
    case cannotOpen(String, String)
    /// Writing failed (path, errno).
    case io(String, Errno)
    /// A stop signal came while a write was blocked (a reader that does not read) (path).
    case interrupted(String)
    /// `-f NAME`: libavformat has no output format by that name.
    case unknownContainer(String)
    /// The file name's extension names no container this sink writes (path).
    case unknownExtension(String)
    /// The container carries no video.
    case noVideoInContainer(String)
    /// `-c:v NAME`: libavcodec has no video encoder by that name.
    case unknownEncoder(String)
    /// The container cannot carry the codec (container, codec).
    case codecNotInContainer(String, String)
    /// The encoder has no such option (encoder, option).
    case encoderOption(String, String)
    /// The encoder did not open with the settings (encoder, settings, FFmpeg's message).
    case encoderRefused(String, String, String)
    /// The output cannot carry frames of this pixel format (what, format, what it carries).
    case pixelFormat(String, String, String)
    /// Frames are in a pixel format FFmpeg does not know.
    case unreadablePixelFormat(String)
    /// An FFmpeg call failed (its name and FFmpeg's message).
    case ffmpeg(String, String)
    /// The frame's planes do not hold what FFmpeg reads for its pixel format (a damaged frame).
    case layout(FrameLayoutError)
    /// The recording's sound: its stream failed (the stream, why), or its encoder cannot be used.
    case audio(String, String)

    public var description: String {
        switch self {
        case .audio(let what, let why): return "the recording's audio (\(what)): \(why)"
        case .cannotOpen(let path, let why): return "cannot write '\(path)': \(why)"
        case .io(let path, let e): return "cannot write '\(path)': \(e)"
        case .interrupted(let path):
            return "stopped while writing '\(path)', which nobody was reading (its last frame is incomplete)"
        case .unknownContainer(let name): return "FFmpeg knows no output format '\(name)' (ffmpeg -muxers lists them)"
        case .unknownExtension(let path):
            return "cannot tell the container from the name '\(path)': use .mp4, .mov, .mkv or .nut, or -f FORMAT"
        case .noVideoInContainer(let name): return "the output format '\(name)' carries no video"
        case .unknownEncoder(let name): return "FFmpeg has no video encoder '\(name)' (ffmpeg -encoders lists them)"
        case .codecNotInContainer(let container, let codec): return "\(container) cannot carry \(codec) video; choose another -c:v or container"
        case .encoderOption(let codec, let option): return "the \(codec) encoder has no \(option) option"
        case .encoderRefused(let codec, let settings, let message):
            return "the \(codec) encoder refused \(settings): \(message)"
        case .pixelFormat(let what, let format, let carried):
            return "\(what) cannot carry \(format) frames (it carries \(carried))"
        case .unreadablePixelFormat(let f): return "frames are in pixel format '\(f)', which FFmpeg does not know"
        case .ffmpeg(let call, let message): return "FFmpeg's \(call) failed: \(message)"
        case .layout(let e): return e.description
        }
    }
}

/// Presents a consumer's frames to FFmpeg as `AVFrame`s of one fixed size and pixel format.
///
/// A frame already in that format is wrapped in place: the data pointers and line sizes are
/// the slot's planes, as the frame header lays them out (offsets and strides from the
/// header, never recomputed), so nothing is copied. Any other frame (a different pixel
/// format, or a size change mid-stream) is converted with libswscale into a buffer owned by
/// the adapter, as `FrameConverter` does: bicubic, the frame's own matrix, its range when
/// tagged, and the output range asked for (else libswscale's default for the format).
final class FrameAdapter {
    let width: Int32
    let height: Int32
    let format: AVPixelFormat
    /// Full (true) or limited (false) range output when converting; nil: libswscale's default.
    let fullRange: Bool?
    /// Frames converted with libswscale (the others were wrapped in place).
    private(set) var convertedFrames = 0
    /// The colour of the last frame `avFrame` returned.
    private(set) var color = ColorDescription()

    private var wrapped: UnsafeMutablePointer<AVFrame>?
    private var converted: UnsafeMutablePointer<AVFrame>?
    private var sws: OpaquePointer?
    private var swsKey: [Int64] = []
    private var swsFullOutput = false
    let isRGB: Bool

    init(width: Int, height: Int, format: AVPixelFormat, fullRange: Bool?) throws(MediaOutputError) {
        self.width = Int32(width)
        self.height = Int32(height)
        self.format = format
        self.fullRange = fullRange
        isRGB = Self.isRGB(format)
        guard let w = av_frame_alloc() else { throw .ffmpeg("av_frame_alloc", "out of memory") }
        wrapped = w
    }

    deinit {
        av_frame_free(&wrapped)
        av_frame_free(&converted)
        sws_freeContext(sws)
    }

    static func isRGB(_ f: AVPixelFormat) -> Bool {
        guard let d = av_pix_fmt_desc_get(f) else { return false }
        return d.pointee.flags & UInt64(AV_PIX_FMT_FLAG_RGB) != 0
    }

    /// FFmpeg's pixel format for a frame header's pixel format name.
    static func pixelFormat(of header: FrameHeader) throws(MediaOutputError) -> AVPixelFormat {
        let f = av_get_pix_fmt(header.pixelFormatName)
        guard f != AV_PIX_FMT_NONE else { throw .unreadablePixelFormat(header.pixelFormatName) }
        return f
    }

    /// `frame`'s pixels as an AVFrame of this adapter's size and format (width, height,
    /// format, data, linesize and colour set; timestamps are the caller's). Valid until the
    /// next call and, when wrapped, only while `frame` is held. Not reference-counted:
    /// libavcodec copies it when an encoder keeps it.
    func avFrame(_ frame: borrowing Frame) throws(MediaOutputError) -> UnsafeMutablePointer<AVFrame> {
        let header = frame.header
        let source = try Self.pixelFormat(of: header)
        var c = header.description.color
        if source == format, header.width == Int(width), header.height == Int(height) {
            let w = wrapped!
            w.pointee.width = width
            w.pointee.height = height
            w.pointee.format = format.rawValue
            try planes(header, frame.base, source).install(in: w)
            setColor(w, c)
            color = c
            return w
        }

        // Convert.
        let out = try convertedFrame()
        try prepareScaler(header, source: source, color: c)
        let planes = try planes(header, frame.base, source)
        let r = av_frame_make_writable(out)
        guard r >= 0 else { throw .ffmpeg("av_frame_make_writable", ffmpegMessage(r)) }
        let rows = withUnsafeMutableBytes(of: &out.pointee.data) { d in
            withUnsafeMutableBytes(of: &out.pointee.linesize) { l in
                sws_scale(sws, planes.sources, planes.linesize, 0, Int32(header.height),
                          d.bindMemory(to: UnsafeMutablePointer<UInt8>?.self).baseAddress,
                          l.bindMemory(to: Int32.self).baseAddress)
            }
        }
        guard rows == height else { throw .ffmpeg("sws_scale", "wrote \(rows) of \(height) rows") }
        convertedFrames += 1
        // The colour of what was written (as FrameConverter reports it).
        c = c.converted(toRGB: isRGB, fullRange: swsFullOutput)
        setColor(out, c)
        color = c
        return out
    }

    /// The slot's planes as FFmpeg reads them as `source`, checked (`FramePlanes`).
    private func planes(_ header: FrameHeader, _ base: UnsafeRawPointer, _ source: AVPixelFormat) throws(MediaOutputError) -> FramePlanes {
        do { return try FramePlanes(header, base: base, as: source) } catch { throw .layout(error) }
    }

    /// The frame conversions write into, of this adapter's size and format (made once).
    private func convertedFrame() throws(MediaOutputError) -> UnsafeMutablePointer<AVFrame> {
        if let converted { return converted }
        guard let f = av_frame_alloc() else { throw .ffmpeg("av_frame_alloc", "out of memory") }
        f.pointee.width = width
        f.pointee.height = height
        f.pointee.format = format.rawValue
        let r = av_frame_get_buffer(f, 0)
        guard r >= 0 else {
            var g: UnsafeMutablePointer<AVFrame>? = f
            av_frame_free(&g)
            throw .ffmpeg("av_frame_get_buffer", ffmpegMessage(r))
        }
        converted = f
        return f
    }

    /// Makes `sws` the libswscale context from `header`'s size, `source` and `c`'s matrix and
    /// range to this adapter's size and format (kept while those stay the same).
    private func prepareScaler(_ header: FrameHeader, source: AVPixelFormat, color c: ColorDescription) throws(MediaOutputError) {
        let key: [Int64] = [Int64(header.width), Int64(header.height), Int64(source.rawValue), Int64(c.matrix), Int64(c.range)]
        guard sws == nil || key != swsKey else { return }
        sws_freeContext(sws)
        sws = nil
        guard let (s, full) = FrameConverter.scaleContext(from: (Int32(header.width), Int32(header.height), source),
                                                          to: (width, height, format), color: c,
                                                          fullRangeOutput: isRGB ? nil : fullRange) else {
            let name = av_get_pix_fmt_name(format).map { String(cString: $0) } ?? "?"
            throw .ffmpeg("sws_getContext", "no conversion from \(header.pixelFormatName) to \(name)")
        }
        sws = s
        swsKey = key
        swsFullOutput = full
    }

    private func setColor(_ f: UnsafeMutablePointer<AVFrame>, _ c: ColorDescription) {
        f.pointee.colorspace = AVColorSpace(rawValue: c.matrix)
        f.pointee.color_range = AVColorRange(rawValue: c.range)
        f.pointee.color_primaries = AVColorPrimaries(rawValue: c.primaries)
        f.pointee.color_trc = AVColorTransferCharacteristic(rawValue: c.transfer)
    }
}

/// Opens the output file `path` for writing (created or truncated, mode 0644), or nil for
/// `-`, standard output (which is not ours to close).
func openOutput(_ path: String) throws(MediaOutputError) -> FileDescriptor? {
    guard path != "-" else { return nil }
    do { return try .open(path, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o644) } catch {
        throw .cannotOpen(path, error.description)
    }
}

/// The descriptor number of an output from `openOutput`: standard output's for nil.
func outputNumber(_ descriptor: borrowing FileDescriptor?) -> Int32 {
    switch descriptor {
    case .some(let d): d.rawValue
    case .none: 1
    }
}

/// Where packed frames or a recording go: a file (created or truncated), or standard output for `-`.
final class OutputFile {
    let path: String
    /// The file, or nil for standard output.
    private let descriptor: FileDescriptor?
    private(set) var bytesWritten: Int64 = 0
    private let shouldStop: (() -> Bool)?

    init(path: String, shouldStop: (() -> Bool)? = nil) throws(MediaOutputError) {
        self.shouldStop = shouldStop
        self.path = path == "-" ? "standard output" : path
        descriptor = try openOutput(path)
    }

    var fd: Int32 { outputNumber(descriptor) }

    /// Writes every byte the vectors describe (retrying short writes). A write that a signal
    /// interrupts (framesrv's stop signals do not restart calls: EINTR, or a short write into
    /// a full pipe) throws `.interrupted` once `shouldStop` says so.
    func write(_ vectors: inout [iovec]) throws(MediaOutputError) {
        let total = vectors.reduce(0) { $0 + $1.iov_len }
        // On a throw `vectors` holds what was not written: count what was.
        defer { bytesWritten += Int64(total - vectors.reduce(0) { $0 + $1.iov_len }) }
        do { try writeAll(fd, &vectors, shouldStop: shouldStop) } catch {
            throw error == .interrupted ? .interrupted(path) : .io(path, error)
        }
    }

    func write(_ bytes: [UInt8]) throws(MediaOutputError) {
        let failure: MediaOutputError? = bytes.withUnsafeBytes { buffer in
            var vectors = [iovec(iov_base: UnsafeMutableRawPointer(mutating: buffer.baseAddress), iov_len: buffer.count)]
            do throws(MediaOutputError) { try write(&vectors) } catch { return error }
            return nil
        }
        if let failure { throw failure }
    }
}
