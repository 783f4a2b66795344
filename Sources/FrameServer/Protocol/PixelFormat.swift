import CFrameServer

/// A pixel format the protocol names by a stable code (FS_PIX_* in CFrameServer.h).
public enum PixelFormat: UInt32, CaseIterable, Sendable, CustomStringConvertible {
    case gray8 = 1, nv12, yuv420p, yuv422p, yuv444p, yuv420p10le, rgb24, bgra, rgba,
         p010le, yuv422p10le, yuv444p10le, gray16le, bgr24, gbrp

    /// One plane's geometry relative to the frame: subsampling shifts and bytes per sample group.
    public struct Plane: Sendable, Equatable {
        /// log2 of horizontal and vertical subsampling.
        public let widthShift: Int, heightShift: Int
        /// Bytes per (subsampled) pixel in this plane.
        public let bytesPerPixel: Int
    }

    /// FFmpeg's name for the format (`-pix_fmt` value).
    public var name: String {
        switch self {
        case .gray8: "gray"
        case .nv12: "nv12"
        case .yuv420p: "yuv420p"
        case .yuv422p: "yuv422p"
        case .yuv444p: "yuv444p"
        case .yuv420p10le: "yuv420p10le"
        case .rgb24: "rgb24"
        case .bgra: "bgra"
        case .rgba: "rgba"
        case .p010le: "p010le"
        case .yuv422p10le: "yuv422p10le"
        case .yuv444p10le: "yuv444p10le"
        case .gray16le: "gray16le"
        case .bgr24: "bgr24"
        case .gbrp: "gbrp"
        }
    }

    public var description: String { name }

    /// Accepts FFmpeg's names plus a few common aliases (`gray8`, `yuv420p10`).
    public init?(name: String) {
        let aliases = ["gray8": "gray", "yuv420p10": "yuv420p10le", "p010": "p010le", "i420": "yuv420p"]
        let n = aliases[name.lowercased()] ?? name.lowercased()
        guard let f = PixelFormat.allCases.first(where: { $0.name == n }) else { return nil }
        self = f
    }

    /// The planes of this format (a shared table: reading it allocates nothing).
    public var planes: [Plane] { Self.planeTable[Int(rawValue)] }

    private static let planeTable: [[Plane]] = [[]] + allCases.map { $0.computePlanes() }

    private func computePlanes() -> [Plane] {
        switch self {
        case .gray8: [Plane(widthShift: 0, heightShift: 0, bytesPerPixel: 1)]
        case .gray16le: [Plane(widthShift: 0, heightShift: 0, bytesPerPixel: 2)]
        case .nv12: [Plane(widthShift: 0, heightShift: 0, bytesPerPixel: 1), Plane(widthShift: 1, heightShift: 1, bytesPerPixel: 2)]
        case .p010le: [Plane(widthShift: 0, heightShift: 0, bytesPerPixel: 2), Plane(widthShift: 1, heightShift: 1, bytesPerPixel: 4)]
        case .yuv420p: Self.yuv(1, 1, 1)
        case .yuv422p: Self.yuv(1, 0, 1)
        case .yuv444p: Self.yuv(0, 0, 1)
        case .yuv420p10le: Self.yuv(1, 1, 2)
        case .yuv422p10le: Self.yuv(1, 0, 2)
        case .yuv444p10le: Self.yuv(0, 0, 2)
        case .gbrp: Self.yuv(0, 0, 1)
        case .rgb24, .bgr24: [Plane(widthShift: 0, heightShift: 0, bytesPerPixel: 3)]
        case .bgra, .rgba: [Plane(widthShift: 0, heightShift: 0, bytesPerPixel: 4)]
        }
    }

    private static func yuv(_ ws: Int, _ hs: Int, _ b: Int) -> [Plane] {
        [Plane(widthShift: 0, heightShift: 0, bytesPerPixel: b),
         Plane(widthShift: ws, heightShift: hs, bytesPerPixel: b),
         Plane(widthShift: ws, heightShift: hs, bytesPerPixel: b)]
    }

    /// Whether the format carries RGB (so the colour matrix is "RGB"/identity).
    public var isRGB: Bool { [.rgb24, .bgr24, .bgra, .rgba, .gbrp].contains(self) }
}

/// Width, height and pixel format, with the plane layout framesrv uses for them.
public struct FrameFormat: Sendable, Equatable, CustomStringConvertible {
    public var pixelFormat: PixelFormat
    public var width: Int
    public var height: Int

    /// Row alignment of every plane, in bytes (what SIMD code and FFmpeg expect).
    public static let strideAlignment = 64
    /// Bytes at the start of every slot that hold the `fs_frame` header.
    public static let headerSize = MemoryLayout<fs_frame>.size

    public init(_ pixelFormat: PixelFormat, width: Int, height: Int) {
        self.pixelFormat = pixelFormat; self.width = width; self.height = height
    }

    public var description: String { "\(width)x\(height) \(pixelFormat.name)" }

    /// Bytes per row of each plane that carry pixels (no padding): what framemd5 hashes.
    public func rowBytes(plane i: Int) -> Int {
        let p = pixelFormat.planes[i]
        return ((width + (1 << p.widthShift) - 1) >> p.widthShift) * p.bytesPerPixel
    }

    /// Rows of plane `i`.
    public func rows(plane i: Int) -> Int {
        let p = pixelFormat.planes[i]
        return (height + (1 << p.heightShift) - 1) >> p.heightShift
    }

    /// Stride of plane `i`: its row bytes rounded up to `strideAlignment`.
    public func stride(plane i: Int) -> Int {
        let a = Self.strideAlignment
        return (rowBytes(plane: i) + a - 1) / a * a
    }

    /// Offset of plane `i` from the slot's start (after the header), aligned to `strideAlignment`.
    public func planeOffset(_ i: Int) -> Int {
        var off = Self.headerSize
        for k in 0..<i {
            let a = Self.strideAlignment
            off += (stride(plane: k) * rows(plane: k) + a - 1) / a * a
        }
        return off
    }

    /// Offsets of all planes from the slot's start.
    public func planeOffsets() -> [Int] { pixelFormat.planes.indices.map(planeOffset) }

    /// Bytes a slot needs for a frame of this format, header included.
    public var slotBytes: Int {
        let last = pixelFormat.planes.count - 1
        return planeOffset(last) + stride(plane: last) * rows(plane: last)
    }

    /// Checks the dimensions are something a pool can hold.
    public func validate() throws(ProducerError) {
        guard width > 0, height > 0, width <= 16384, height <= 16384 else {
            throw .frameSize(width: width, height: height)
        }
    }
}
