import CFrameServer
import Glibc

/// A shared-memory file mapped into this process and guarded against truncation: if
/// another process truncates the file while it is mapped, the SIGBUS guard (shim.c,
/// `fs_guard_*`) maps zero pages over the whole mapping and counts the fault instead of
/// letting the access kill the process. Readers check `truncated` after reading what
/// they use, and give up on the segment when it is set.
final class Segment: @unchecked Sendable {
    // @unchecked Sendable: address, size and guard entry never change; what the bytes
    // mean and who may touch them is the protocol's business (atomics in CFrameServer.h).
    let path: String
    let base: UnsafeMutableRawPointer
    let size: Int
    private let created: MappedFile?
    /// The open file of a segment mapped by `open` (nil for `create`: `created` owns it).
    private let descriptor: FileDescriptor?
    private let guardEntry: Int32

    private init(path: String, base: UnsafeMutableRawPointer, size: Int, writable: Bool, created: MappedFile?,
                 descriptor: consuming FileDescriptor?) {
        self.path = path; self.base = base; self.size = size; self.created = created; self.descriptor = descriptor
        guardEntry = fs_guard_register(base, size, writable ? 1 : 0)
    }

    /// Creates a new file of `size` zero bytes (mode 0600, fails if it exists), mapped read-write.
    static func create(_ path: String, size: Int) throws(SegmentError) -> Segment {
        let file = try MappedFile.create(path, size: size)
        return Segment(path: path, base: file.base, size: file.size, writable: true, created: file, descriptor: nil)
    }

    /// Maps an existing segment another process made. The file is opened with
    /// O_NONBLOCK and O_NOFOLLOW (a FIFO or a symlink in its place cannot hang or redirect
    /// the reader) and must be a regular file of at least `minimumSize` bytes.
    ///
    /// `populate`: fault every page in now (`MAP_POPULATE`) if the file's memory is all
    /// there (a producer's pool is: it `posix_fallocate`s it), so that the first frames of
    /// each slot do not pay a page fault per 4 KiB read. A sparse file is mapped lazily:
    /// faulting its holes in would allocate them (tmpfs), on a hostile file's word.
    ///
    /// The corresponding C functions are `open`, `fstat` and `mmap`.
    static func open(_ path: String, writable: Bool, minimumSize: Int = 1, populate: Bool = false) throws(SegmentError) -> Segment {
        let fd: FileDescriptor
        do { fd = try .open(path, (writable ? O_RDWR : O_RDONLY) | O_NONBLOCK | O_NOFOLLOW) } catch {
            if error == Errno(rawValue: ELOOP) { throw .notRegularFile(path: path) }
            throw .system(operation: "open", path: path, error)
        }
        let st: stat
        do { st = try fd.status() } catch { throw .system(operation: "stat", path: path, error) }
        guard st.st_mode & S_IFMT == S_IFREG else { throw .notRegularFile(path: path) }
        let size = Int(st.st_size)
        guard size >= max(1, minimumSize) else { throw .tooSmall(path: path, size: size, needed: max(1, minimumSize)) }
        let p: UnsafeMutableRawPointer
        let allocated = Int(st.st_blocks).multipliedReportingOverflow(by: 512)
        let whole = populate && !allocated.overflow && allocated.partialValue >= size
        do { p = try fd.map(size: size, writable: writable, populate: whole) } catch { throw .system(operation: "map", path: path, error) }
        return Segment(path: path, base: p, size: size, writable: writable, created: nil, descriptor: fd)
    }

    /// Maps pool `path` of a stream with `slotCount` (validated) slots, read-only, and
    /// returns it with its slot stride. The file must hold a whole number of slots of a
    /// multiple of 64 bytes (the producer uses whole pages), each at least a frame header:
    /// anything else is a damaged pool, and a stride that is not a multiple of 64 would
    /// misalign every slot's header.
    static func openPool(_ path: String, slotCount: UInt32, populate: Bool = false) throws(SegmentError) -> (pool: Segment, slotBytes: Int) {
        let n = Int(slotCount)
        let pool = try open(path, writable: false, minimumSize: n * FrameFormat.headerSize, populate: populate)
        let slotBytes = pool.size / n
        guard pool.size % n == 0, slotBytes % 64 == 0 else {
            throw .badField(path: path, field: "file size", value: UInt64(pool.size),
                            expected: "\(n) slots of a multiple of 64 bytes")
        }
        return (pool, slotBytes)
    }

    /// The frame header at the start of slot `i` of a pool with `slotBytes`-byte slots (a copy).
    func frameHeader(slot i: UInt32, slotBytes: Int) -> fs_frame {
        (base + Int(i) * slotBytes).loadUnaligned(as: fs_frame.self)
    }

    /// Whether a SIGBUS was caught on this mapping: the file was truncated under us and
    /// the mapping now reads zeros.
    var truncated: Bool { fs_guard_faults(guardEntry) != 0 }

    /// Throws `.truncated` once the file was truncated under this mapping.
    func checkIntact() throws(SegmentError) {
        if truncated { throw .truncated(path: path) }
    }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: size) }

    deinit {
        // Forget the range before it is unmapped, so the handler never maps over a reuse.
        fs_guard_unregister(guardEntry)
        if created == nil { unmap(base, size: size) }   // then the descriptor closes itself
    }
}
