import CFFmpeg
import FrameServer
import Glibc

/// One decoded frame, valid until the decoder's next `next()`.
public struct DecodedFrame: ~Copyable {
    let frame: UnsafeMutablePointer<AVFrame>
    /// The frame's pixel format, nil when framesrv has no code for it (see `pixelFormatName`).
    public let pixelFormat: PixelFormat?
    /// FFmpeg's name for the decoded pixel format.
    public let pixelFormatName: String
    public let width: Int
    public let height: Int
    /// Timestamps (rebased, in the stream's time base), colour, aspect ratio (the container's
    /// when it has one, as ffmpeg), key flag, field order and chroma location (the stream's
    /// when the frame does not say).
    public let description: FrameDescription

    let allocator: SlotAllocator?
    /// Decoded by NVDEC into CUDA memory (`--hwaccel cuda`): the planes are device addresses,
    /// and the pixel format is the hardware frames' software format (nv12, p010le).
    public let isCUDA: Bool

    /// The deprecated full-range "j" formats have the layout of their plain twins.
    private static let jpegFormats = ["yuvj420p": PixelFormat.yuv420p, "yuvj422p": .yuv422p, "yuvj444p": .yuv444p]

    /// The framesrv format that carries FFmpeg's pixel format `name`, if any.
    static func framesrvFormat(named name: String) -> PixelFormat? {
        jpegFormats[name] ?? PixelFormat(name: name)
    }

    init(frame: UnsafeMutablePointer<AVFrame>, timeBase: Rational, sampleAspectRatio: Rational, chroma: ChromaLocation,
         allocator: SlotAllocator?) {
        self.frame = frame
        self.allocator = allocator
        let f = frame.pointee
        isCUDA = f.format == AV_PIX_FMT_CUDA.rawValue
        let fmt = AVPixelFormat(rawValue: isCUDA ? cffmpeg_frame_sw_format(frame) : f.format)
        pixelFormatName = av_get_pix_fmt_name(fmt).map { String(cString: $0) } ?? "format \(fmt.rawValue)"
        pixelFormat = Self.framesrvFormat(named: pixelFormatName)
        width = Int(f.width)
        height = Int(f.height)
        var color = ColorDescription(f)
        // The "j" formats are full range when the frame does not say.
        if Self.jpegFormats[pixelFormatName] != nil, color.range == 0 { color.range = 2 }
        // best_effort_timestamp: packets were rebased.
        description = FrameDescription(f, color: color, pts: f.best_effort_timestamp, duration: f.pkt_duration,
                                       timeBase: timeBase, sampleAspectRatio: sampleAspectRatio, chroma: chroma)
    }

    /// The frame's framesrv format, or the error naming a pixel format framesrv cannot carry.
    public func frameFormat() throws(MediaInputError) -> FrameFormat {
        guard let pixelFormat else { throw .unsupportedPixelFormat(pixelFormatName) }
        return FrameFormat(pixelFormat, width: width, height: height)
    }

    /// Publishes the frame where it is, without a copy, when the decoder decoded it into one
    /// of `producer`'s slots (see `SlotAllocator`). False when it must be copied instead: it
    /// lives in FFmpeg's memory, or its slot was published already (a decoder that outputs
    /// one picture twice) or belongs to an earlier pool epoch.
    public func publishInPlace(to producer: Producer, description: FrameDescription) -> Bool {
        guard let allocator, let lease = allocator.lease(of: frame), let pixelFormat else { return false }
        let format = FrameFormat(pixelFormat, width: width, height: height)
        var offsets: [Int] = [], strides: [Int] = []
        let f = frame.pointee
        withUnsafeBytes(of: f.data) { dataTuple in
            withUnsafeBytes(of: f.linesize) { linesizeTuple in
                let data = dataTuple.bindMemory(to: UnsafeMutablePointer<UInt8>?.self)
                let linesize = linesizeTuple.bindMemory(to: Int32.self)
                for i in pixelFormat.planes.indices {
                    guard let p = data[i] else { return }
                    offsets.append(UnsafeMutableRawPointer(p) - lease.base)
                    strides.append(Int(linesize[i]))
                }
            }
        }
        guard offsets.count == pixelFormat.planes.count else { return false }
        return producer.publish(lease, format: format, layout: PlaneLayout(offsets: offsets, strides: strides),
                                description: description)
    }

    /// The planes of `format` (the frame's own): first bytes (device addresses for a CUDA frame) and row pitches.
    public func planeAddresses(of format: FrameFormat) -> (planes: [UInt64], pitches: [Int]) {
        avPlaneAddresses(frame, count: format.pixelFormat.planes.count)
    }

    /// Copies the frame's planes, row by row, into `slot` (which must have this frame's format).
    public func copyPlanes(into slot: borrowing WritableFrame) { copyFramePlanes(frame, into: slot) }
}

/// Copies `frame`'s planes, row by row, into `slot` (which must have the frame's format).
func copyFramePlanes(_ frame: UnsafePointer<AVFrame>, into slot: borrowing WritableFrame) {
    let format = slot.format
    for (i, plane) in avPlanes(frame, count: format.pixelFormat.planes.count).enumerated() {
        guard let src = plane.data else { continue }
        let dst = slot.plane(i).baseAddress!
        let rowBytes = format.rowBytes(plane: i), stride = format.stride(plane: i)
        for y in 0..<format.rows(plane: i) {
            memcpy(dst + y * stride, src + y * plane.linesize, rowBytes)
        }
    }
}
