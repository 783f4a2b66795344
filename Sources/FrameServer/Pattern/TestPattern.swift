import Glibc

/// The built-in moving test pattern: every byte is derived from the frame's sequence number.
///
/// Plane `p`, row `y`, byte `x` (within the row's pixel bytes) holds
/// `(x + 2*y + 3*seq + 61*p) & 0xFF`: diagonal ramps that move with every frame. A
/// consumer that recomputes it detects any torn, stale or recycled frame, which is
/// what the stress tests and `sink --verify` rely on. Python and C clients use the same
/// formula.
public enum TestPattern {
    /// 0...255 twice, so any 256-byte run of the ramp starting anywhere is one memcpy.
    private static let ramp: [UInt8] = (0..<512).map { UInt8($0 & 0xFF) }

    /// The byte the pattern puts at (`x`, `y`) of plane `plane` in frame `sequence`.
    public static func value(plane: Int, x: Int, y: Int, sequence: UInt64) -> UInt8 {
        UInt8(truncatingIfNeeded: x &+ 2 &* y &+ 3 &* Int(truncatingIfNeeded: sequence) &+ 61 &* plane)
    }

    private static func rowStart(plane: Int, y: Int, sequence: UInt64) -> Int {
        Int(value(plane: plane, x: 0, y: y, sequence: sequence))
    }

    /// Writes frame `sequence` of the pattern into a reserved slot.
    public static func fill(_ frame: borrowing WritableFrame, sequence: UInt64) {
        let format = frame.format
        ramp.withUnsafeBytes { r in
            for p in format.pixelFormat.planes.indices {
                let plane = frame.plane(p)
                let stride = format.stride(plane: p), rowBytes = format.rowBytes(plane: p)
                for y in 0..<format.rows(plane: p) {
                    let c = rowStart(plane: p, y: y, sequence: sequence)
                    let row = plane.baseAddress! + y * stride
                    var x = 0
                    while x < rowBytes {
                        let n = min(256, rowBytes - x)
                        memcpy(row + x, r.baseAddress! + ((c + x) & 0xFF), n)
                        x += n
                    }
                }
            }
        }
    }

    /// Whether a received frame is exactly pattern frame `frame.sequence` (every pixel byte checked).
    public static func verify(_ frame: borrowing Frame) -> Bool {
        let h = frame.header
        guard let format = h.format, h.magic != 0 else { return false }
        return ramp.withUnsafeBytes { r in
            for p in 0..<h.planeCount {
                let plane = frame.plane(p)
                let stride = h.stride(plane: p), rowBytes = format.rowBytes(plane: p)
                guard stride >= rowBytes, plane.count >= stride * (format.rows(plane: p) - 1) + rowBytes else { return false }
                for y in 0..<format.rows(plane: p) {
                    let c = rowStart(plane: p, y: y, sequence: frame.sequence)
                    let row = plane.baseAddress! + y * stride
                    var x = 0
                    while x < rowBytes {
                        let n = min(256, rowBytes - x)
                        if memcmp(row + x, r.baseAddress! + ((c + x) & 0xFF), n) != 0 { return false }
                        x += n
                    }
                }
            }
            return true
        }
    }
}
