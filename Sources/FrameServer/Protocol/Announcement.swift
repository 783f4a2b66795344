import CFrameServer

/// One ZeroMQ message on a stream's PUB socket: the doorbell, never the truth.
///
/// Wire format (PROTOCOL.md, "Announcements"): the 64-byte little-endian `fs_announce`
/// followed by `name_len` bytes of stream name.
public struct Announcement: Sendable, Equatable {
    public enum Kind: UInt16, Sendable {
        /// A frame was published into `slot`.
        case frame = 1
        /// The stream ended; `sequence` is the last frame's sequence number.
        case end = 2
        /// A new pool epoch begins with frame `sequence`.
        case epoch = 3
    }

    public var kind: Kind
    public var stream: String
    public var sequence: UInt64
    public var slot: UInt32
    public var flags: FrameFlags
    public var epoch: UInt64
    public var captureNanos: UInt64
    /// Presentation timestamp in the frame's time base, nil if unknown.
    public var pts: Int64?
    public var publishNanos: UInt64

    public init(kind: Kind, stream: String, sequence: UInt64, slot: UInt32 = 0, flags: FrameFlags = [],
                epoch: UInt64 = 0, captureNanos: UInt64 = 0, pts: Int64? = nil, publishNanos: UInt64 = 0) {
        self.kind = kind; self.stream = stream; self.sequence = sequence; self.slot = slot; self.flags = flags
        self.epoch = epoch; self.captureNanos = captureNanos; self.pts = pts; self.publishNanos = publishNanos
    }

    static let fixedSize = MemoryLayout<fs_announce>.size

    /// Writes the message into `buffer` (at least 64 + name bytes) and returns its length.
    public func encode(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let name = stream.utf8
        var a = fs_announce()
        a.magic = FS_MAGIC_ANNOUNCE.littleEndian
        a.version = UInt16(FS_PROTOCOL_VERSION).littleEndian
        a.kind = kind.rawValue.littleEndian
        a.seq = sequence.littleEndian
        a.slot = slot.littleEndian
        a.flags = flags.rawValue.littleEndian
        a.epoch = epoch.littleEndian
        a.capture_ns = captureNanos.littleEndian
        a.pts = (pts ?? Int64.min).littleEndian
        a.publish_ns = publishNanos.littleEndian
        a.name_len = UInt16(name.count).littleEndian
        buffer.storeBytes(of: a, as: fs_announce.self)
        var i = Self.fixedSize
        for c in name { buffer[i] = c; i += 1 }
        return i
    }

    /// The message as bytes.
    public var bytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Self.fixedSize + stream.utf8.count) { buf, n in
            n = encode(into: UnsafeMutableRawBufferPointer(buf))
        }
    }

    /// Parses a message, checking magic, version, kind, name length (1...48) and length.
    /// Only the version error (`.versionMismatch`, naming both versions) is fatal to a receiver.
    public init(decoding bytes: UnsafeRawBufferPointer) throws(FrameServerError) {
        guard bytes.count >= Self.fixedSize else {
            throw .invalidArgument("announcement of \(bytes.count) bytes is shorter than the 64-byte header")
        }
        let magic = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
        guard magic == FS_MAGIC_ANNOUNCE else { throw .badMagic(what: "announcement", found: magic) }
        let version = UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt16.self))
        guard UInt32(version) == FS_PROTOCOL_VERSION else {
            throw .versionMismatch(what: "announcement", found: UInt32(version), expected: FS_PROTOCOL_VERSION)
        }
        let rawKind = UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: 6, as: UInt16.self))
        guard let kind = Kind(rawValue: rawKind) else {
            throw .invalidArgument("announcement of unknown kind \(rawKind)")
        }
        func u64(_ o: Int) -> UInt64 { UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: UInt64.self)) }
        func u32(_ o: Int) -> UInt32 { UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: UInt32.self)) }
        let nameLen = Int(UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: 56, as: UInt16.self)))
        guard (1...48).contains(nameLen) else {
            throw .invalidArgument("announcement name-len \(nameLen) is outside 1...48")
        }
        guard bytes.count == Self.fixedSize + nameLen else {
            throw .invalidArgument("announcement length \(bytes.count) does not match its name length \(nameLen)")
        }
        let name = bytes[Self.fixedSize...]
        guard name.allSatisfy(Self.isNameByte) else {
            throw .invalidArgument("announcement name has a byte outside [A-Za-z0-9._-]")
        }
        let pts = Int64(bitPattern: u64(40))
        self.init(kind: kind,
                  stream: String(decoding: name, as: UTF8.self),
                  sequence: u64(8), slot: u32(16), flags: FrameFlags(rawValue: u32(20)),
                  epoch: u64(24), captureNanos: u64(32), pts: pts == Int64.min ? nil : pts,
                  publishNanos: u64(48))
    }

    /// A byte a stream name may have (PROTOCOL.md 3.1): `[A-Za-z0-9._-]`.
    static func isNameByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"): true
        default: false
        }
    }

    public init(decoding bytes: [UInt8]) throws(FrameServerError) {
        var result: Result<Announcement, FrameServerError>
        result = bytes.withUnsafeBytes { raw in
            do throws(FrameServerError) { return .success(try Announcement(decoding: raw)) } catch { return .failure(error) }
        }
        self = try result.get()
    }
}
