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
    public init(decoding bytes: UnsafeRawBufferPointer) throws(AnnouncementError) {
        guard bytes.count >= Self.fixedSize else {
            throw .tooShort(bytes: bytes.count)
        }
        let magic = UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: 0, as: UInt32.self))
        guard magic == FS_MAGIC_ANNOUNCE else { throw .badMagic(found: magic) }
        let version = UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: 4, as: UInt16.self))
        guard UInt32(version) == FS_PROTOCOL_VERSION else {
            throw .versionMismatch(found: UInt32(version))
        }
        let rawKind = UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: 6, as: UInt16.self))
        guard let kind = Kind(rawValue: rawKind) else {
            throw .unknownKind(rawKind)
        }
        func u64(_ o: Int) -> UInt64 { UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: UInt64.self)) }
        func u32(_ o: Int) -> UInt32 { UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: o, as: UInt32.self)) }
        let nameLen = Int(UInt16(littleEndian: bytes.loadUnaligned(fromByteOffset: 56, as: UInt16.self)))
        guard (1...48).contains(nameLen) else {
            throw .nameLength(nameLen)
        }
        guard bytes.count == Self.fixedSize + nameLen else {
            throw .lengthMismatch(length: bytes.count, nameLength: nameLen)
        }
        let name = bytes[Self.fixedSize...]
        guard name.allSatisfy(Self.isNameByte) else {
            throw .badNameByte
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

    public init(decoding bytes: [UInt8]) throws(AnnouncementError) {
        var result: Result<Announcement, AnnouncementError>
        result = bytes.withUnsafeBytes { raw in
            do throws(AnnouncementError) { return .success(try Announcement(decoding: raw)) } catch { return .failure(error) }
        }
        self = try result.get()
    }
}

/// Why received bytes are not an announcement (PROTOCOL.md 3.1). Only `.versionMismatch`
/// is fatal to a receiver: run the same framesrv version on both sides. The others are a
/// peer's bad message: the receiver drops it and looks at shared memory again.
public enum AnnouncementError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Fewer bytes than the 64-byte header.
    case tooShort(bytes: Int)
    /// Not `FS_MAGIC_ANNOUNCE`: something else is sending on this socket.
    case badMagic(found: UInt32)
    /// Another protocol version: run the same framesrv version on both sides.
    case versionMismatch(found: UInt32)
    /// A kind the protocol does not define.
    case unknownKind(UInt16)
    /// A name length outside 1...48.
    case nameLength(Int)
    /// The message's length is not the header's plus its name's.
    case lengthMismatch(length: Int, nameLength: Int)
    /// The name has a byte a stream name may not have.
    case badNameByte

    public var description: String {
        switch self {
        case .tooShort(let n): "announcement of \(n) bytes is shorter than the 64-byte header"
        case .badMagic(let found):
            "announcement is not a framesrv announcement (magic 0x\(String(found, radix: 16))); is something else using this path?"
        case .versionMismatch(let found): versionMismatchLine("announcement", found: found)
        case .unknownKind(let kind): "announcement of unknown kind \(kind)"
        case .nameLength(let n): "announcement name-len \(n) is outside 1...48"
        case .lengthMismatch(let length, let n): "announcement length \(length) does not match its name length \(n)"
        case .badNameByte: "announcement name has a byte outside [A-Za-z0-9._-]"
        }
    }
}
