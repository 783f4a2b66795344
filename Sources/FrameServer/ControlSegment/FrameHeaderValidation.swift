import CFrameServer

extension FrameHeader {
    /// The largest |pts| and duration a frame may carry: 2^62, so `pts + duration`,
    /// `pts - duration` and a sum of two durations cannot overflow an Int64 downstream.
    /// A frame outside it is rejected as a bad frame, not clamped (a clamped timestamp
    /// would be a wrong one).
    public static let timestampLimit: Int64 = 1 << 62

    /// Checks everything a reader of this header relies on, before anyone reads through it.
    ///
    /// - magic, version, `seq` (equal to the slot's `sequence`), width and height (1..16384);
    /// - `plane_count` 1..4, each plane at `offset >= planesFrom` and `offset + size <= slotBytes`
    ///   (overflow-checked); `planesFrom` is 256 (after the header) in a host pool, 0 in a
    ///   CUDA slot, whose planes are in the device allocation (PROTOCOL.md 4.5);
    /// - `pix_fmt` and `pix_fmt_name`: a known code's name must match it (or be empty); code
    ///   0 with a name of the format table is invalid (the producer must write its code). For a known format,
    ///   `plane_count` is its plane count and every plane's `stride >= row bytes` and
    ///   `stride x (rows - 1) + row bytes <= size`, so a reader of rows x stride stays in
    ///   the plane. Code 0 with an unknown name: only the plane bounds hold, and a reader
    ///   that interprets the name must read no more than `size(plane:)` per plane
    ///   (`FrameHeader.plane(_:holds:rowBytes:)` checks a geometry of its own);
    /// - `pts` (unless FS_PTS_NONE) and `duration` within +-`timestampLimit`, duration >= 0;
    /// - `time_base_num` and `time_base_den` >= 1, `field_order` <= FS_FIELD_MAX,
    ///   `chroma_location` <= FS_CHROMA_MAX.
    ///
    ///
    /// `media` is the stream's (`fs_control.media`): the frame must say the same. An audio
    /// frame's own fields are checked by `checkAudio` (PROTOCOL.md 4.6) instead of the
    /// picture's geometry.
    ///
    /// Pure (no shared memory), so a fuzz target can call it with any header.
    public static func validate(_ h: fs_frame, sequence: UInt64, slotBytes: Int,
                                planesFrom: Int = FrameFormat.headerSize, media: MediaKind = .video) throws(FrameHeaderError) {
        guard h.magic == FS_MAGIC_FRAME else { throw .badMagic(found: h.magic) }
        guard h.version == FS_PROTOCOL_VERSION else { throw .versionMismatch(found: h.version) }
        guard h.seq == sequence else { throw .badField(field: "seq", value: Int64(bitPattern: h.seq), expected: "\(sequence), the slot's") }
        guard h.media == media.rawValue else {
            throw .badField(field: "media", value: Int64(h.media), expected: "\(media.rawValue), the stream's (\(media))")
        }
        if media == .audio {
            try checkPlaneBounds(FrameHeader(h), planesFrom: planesFrom, slotBytes: slotBytes)
            try FrameHeader(h).checkAudio()
        } else {
            try checkRange("width", Int64(h.width), 1...16384)
            try checkRange("height", Int64(h.height), 1...16384)
            try checkRange("plane_count", Int64(h.plane_count), 1...Int64(FS_MAX_PLANES))
            let header = FrameHeader(h)
            try checkPlaneBounds(header, planesFrom: planesFrom, slotBytes: slotBytes)
            if let format = try header.checkedFormat() {
                try header.checkRows(of: format)
            }
        }
        try checkTimestamps(h)
        try checkRange("time_base_num", Int64(h.time_base_num), 1...Int64(Int32.max))
        try checkRange("time_base_den", Int64(h.time_base_den), 1...Int64(Int32.max))
        try checkRange("field_order", Int64(h.field_order), 0...Int64(FS_FIELD_MAX))
        try checkRange("chroma_location", Int64(h.chroma_location), 0...Int64(FS_CHROMA_MAX))
    }

    /// Every plane starts at `planesFrom` or later and ends inside the slot (overflow-checked).
    private static func checkPlaneBounds(_ header: FrameHeader, planesFrom: Int, slotBytes: Int) throws(FrameHeaderError) {
        for i in 0..<header.planeCount {
            let offset = header.offset(plane: i), size = header.size(plane: i)
            guard offset >= planesFrom else {
                throw .badField(field: "plane_offset[\(i)]", value: Int64(offset), expected: ">= \(planesFrom)")
            }
            let (end, overflow) = offset.addingReportingOverflow(size)
            guard !overflow, end <= slotBytes else {
                throw .badField(field: "plane_size[\(i)]", value: Int64(size),
                                expected: "a plane inside the slot's \(slotBytes) bytes (it starts at \(offset))")
            }
        }
    }

    /// `validate` on the 256 raw bytes of a header (a fuzz target's input); shorter input
    /// is a bad frame.
    public static func validate(bytes: UnsafeRawBufferPointer, sequence: UInt64, slotBytes: Int) throws(FrameHeaderError) {
        guard bytes.count >= MemoryLayout<fs_frame>.size else {
            throw .badField(field: "header", value: Int64(bytes.count), expected: "\(MemoryLayout<fs_frame>.size) bytes")
        }
        try validate(bytes.loadUnaligned(as: fs_frame.self), sequence: sequence, slotBytes: slotBytes)
    }

    /// Whether plane `i` (validated) has room for `rows` rows of `rowBytes` at its stride:
    /// for a reader that takes a format's geometry from elsewhere (FFmpeg, for code 0).
    public func plane(_ i: Int, holds rows: Int, rowBytes: Int) -> Bool {
        guard i >= 0, i < planeCount, rows >= 0, rowBytes >= 0 else { return false }
        guard rows > 0 else { return true }
        let stride = stride(plane: i)
        let (span, o1) = stride.multipliedReportingOverflow(by: rows - 1)
        let (total, o2) = span.addingReportingOverflow(rowBytes)
        return !o1 && !o2 && stride >= rowBytes && total <= size(plane: i)
    }

    /// The format the code says; nil for code 0 with a name outside the table. Throws when
    /// code and name disagree, the code is unknown, or code 0 names a format of the table.
    private func checkedFormat() throws(FrameHeaderError) -> FrameFormat? {
        let name = pixelFormatName
        let code = raw.pix_fmt
        let pixel: PixelFormat
        if code == FS_PIX_OTHER {
            guard let known = PixelFormat(exactName: name) else { return nil }
            throw .badField(field: "pix_fmt", value: 0, expected: "\(known.rawValue), the code of pix_fmt_name '\(name)'")
        } else {
            guard let known = PixelFormat(rawValue: code) else {
                throw .badField(field: "pix_fmt", value: Int64(code), expected: "0..\(PixelFormat.allCases.count)")
            }
            guard name.isEmpty || name == known.name else {
                throw .badField(field: "pix_fmt", value: Int64(code), expected: "the code of pix_fmt_name '\(name.prefix(31))'")
            }
            pixel = known
        }
        guard pixel.planes.count == planeCount else {
            throw .badField(field: "plane_count", value: Int64(planeCount), expected: "\(pixel.planes.count) for \(pixel.name)")
        }
        return FrameFormat(pixel, width: width, height: height)
    }

    /// Every row a reader takes (rows x stride, row bytes each) lies inside its plane.
    private func checkRows(of format: FrameFormat) throws(FrameHeaderError) {
        for i in 0..<planeCount where !plane(i, holds: format.rows(plane: i), rowBytes: format.rowBytes(plane: i)) {
            throw .badField(field: "plane_stride[\(i)]", value: Int64(stride(plane: i)),
                            expected: "a stride and size \(size(plane: i)) that hold \(format.rows(plane: i)) rows of \(format.rowBytes(plane: i)) bytes (\(format))")
        }
    }

    private static func checkTimestamps(_ h: fs_frame) throws(FrameHeaderError) {
        if h.pts != Int64.min { try checkRange("pts", h.pts, -timestampLimit...timestampLimit) }   // FS_PTS_NONE: unknown
        try checkRange("duration", h.duration, 0...timestampLimit)
    }

    private static func checkRange(_ field: String, _ v: Int64, _ r: ClosedRange<Int64>) throws(FrameHeaderError) {
        guard r.contains(v) else { throw .badField(field: field, value: v, expected: "\(r.lowerBound)..\(r.upperBound)") }
    }
}

extension PixelFormat {
    /// The format whose FFmpeg name is exactly `exactName` (no aliases, case-sensitive).
    init?(exactName: String) {
        guard let f = PixelFormat.allCases.first(where: { $0.name == exactName }) else { return nil }
        self = f
    }
}

extension FrameHeader {
    /// Plane `i`'s bytes in the slot starting at `base`, as this (validated) header lays
    /// them out; empty past `planeCount`.
    func planeBytes(_ i: Int, base: UnsafeRawPointer) -> UnsafeRawBufferPointer {
        guard i >= 0, i < planeCount else { return UnsafeRawBufferPointer(start: base, count: 0) }
        return UnsafeRawBufferPointer(start: base + offset(plane: i), count: size(plane: i))
    }
}
