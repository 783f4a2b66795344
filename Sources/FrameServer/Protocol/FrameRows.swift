// What a stage of its own needs besides `plane(_:)`: the frame's format and description in
// one word, and rows by number (a row's pixel bytes, without the stride's padding), so a
// filter reads row y of a frame and writes row y of its output whatever strides they have.

extension FrameHeader {
    /// Row `y` of plane `p` in the slot starting at `base`: its pixel bytes (the format's
    /// row bytes, no padding). Empty for a format this build does not know. A validated
    /// header's rows all lie inside their plane (`validate` checks stride and size).
    func rowBytes(_ y: Int, plane p: Int, base: UnsafeRawPointer) -> UnsafeRawBufferPointer {
        guard let format else { return UnsafeRawBufferPointer(start: base, count: 0) }
        precondition(p >= 0 && p < planeCount && y >= 0 && y < format.rows(plane: p),
                     "row \(y) of plane \(p) is outside a \(format) frame")
        return UnsafeRawBufferPointer(start: base + offset(plane: p) + y * stride(plane: p), count: format.rowBytes(plane: p))
    }
}

extension Frame {
    /// The frame's size and pixel format; nil when the producer used a format this build
    /// has no code for (`header.pixelFormatName` says which).
    public var format: FrameFormat? { header.format }

    /// Timestamps (pts, time base, duration), colour, aspect ratio and flags, as the
    /// producer wrote them. A filter passes them through with `output.description = frame.description`.
    public var description: FrameDescription { header.description }

    /// Row `y` of plane `p`, in place: its `format.rowBytes(plane: p)` pixel bytes, at the
    /// stride the producer chose (`header.stride(plane: p)`). Empty when `format` is nil;
    /// `y` and `p` must lie inside the format (`format.rows(plane:)`, its plane count).
    public func row(_ y: Int, plane p: Int) -> UnsafeRawBufferPointer { header.rowBytes(y, plane: p, base: base) }
}

extension SharedFrame {
    /// The frame's size and pixel format (see `Frame.format`).
    public var format: FrameFormat? { header.format }

    /// Timestamps, colour, aspect ratio and flags (see `Frame.description`).
    public var description: FrameDescription { header.description }

    /// Row `y` of plane `p`, in place (see `Frame.row(_:plane:)`).
    public func row(_ y: Int, plane p: Int) -> UnsafeRawBufferPointer { header.rowBytes(y, plane: p, base: base) }
}

extension WritableFrame {
    /// Row `y` of plane `p`, to write: its `format.rowBytes(plane: p)` pixel bytes (the
    /// slot's stride is `format.stride(plane: p)`). `y` and `p` must lie inside `format`.
    public func row(_ y: Int, plane p: Int) -> UnsafeMutableRawBufferPointer {
        precondition(p >= 0 && p < format.pixelFormat.planes.count && y >= 0 && y < format.rows(plane: p),
                     "row \(y) of plane \(p) is outside a \(format) frame")
        let start = y * format.stride(plane: p)
        return UnsafeMutableRawBufferPointer(rebasing: plane(p)[start..<start + format.rowBytes(plane: p)])
    }
}
