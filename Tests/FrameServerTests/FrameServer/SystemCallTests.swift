import Foundation
@testable import FrameServer
import Glibc
import Testing

/// The syscall layer in System/: the owned descriptor, the EINTR loop, writeAll, and the
/// checks Segment.open makes before it maps a file of a stream.
@Suite struct SystemCallTests {
    static func isOpen(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) != -1 }

    @Test func descriptorClosesWhenItsOwnerEnds() throws {
        let folder = TemporaryFolder("framesrv-sys")
        var raw: Int32 = -1
        do {
            let fd = try FileDescriptor.open(folder.path + "/f", O_RDWR | O_CREAT)
            raw = fd.rawValue
            #expect(Self.isOpen(raw))
            #expect(fcntl(raw, F_GETFD) & FD_CLOEXEC != 0, "every descriptor is opened close-on-exec")
        }
        #expect(!Self.isOpen(raw))
        let taken = try FileDescriptor.open(folder.path + "/f", O_RDONLY).take()
        #expect(Self.isOpen(taken), "take() hands the descriptor over without closing it")
        FileDescriptor(adopting: taken).close()
        #expect(!Self.isOpen(taken))
    }

    @Test func writeAllThenReadBack() throws {
        let folder = TemporaryFolder("framesrv-sys")
        let bytes = (0..<100_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        do {
            let fd = try FileDescriptor.open(folder.path + "/f", O_WRONLY | O_CREAT | O_TRUNC)
            let out = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
            defer { out.deallocate() }
            out.copyBytes(from: bytes)
            try fd.writeAll(UnsafeRawBufferPointer(out))
        }
        let fd = try FileDescriptor.open(folder.path + "/f", O_RDONLY)
        #expect(try fd.status().st_size == bytes.count)
        let back = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count + 1, alignment: 1)
        defer { back.deallocate() }
        var got = 0
        while case let n = try fd.read(into: UnsafeMutableRawBufferPointer(rebasing: back[got...])), n > 0 { got += n }
        #expect(got == bytes.count && Array(back[..<got]) == bytes)
    }

    /// 3,000 vectors (more than one writev can take), some empty, land in order.
    @Test func gatheredWriteAllWritesEveryVector() throws {
        let folder = TemporaryFolder("framesrv-sys")
        let pieces: [[UInt8]] = (0..<3000).map { i in i % 7 == 0 ? [] : [UInt8](repeating: UInt8(i % 251), count: i % 13 + 1) }
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: pieces.reduce(0) { $0 + $1.count } + 1, alignment: 1)
        defer { storage.deallocate() }
        var vectors: [iovec] = []
        var offset = 0
        for p in pieces {
            UnsafeMutableRawBufferPointer(rebasing: storage[offset..<(offset + p.count)]).copyBytes(from: p)
            vectors.append(iovec(iov_base: storage.baseAddress! + offset, iov_len: p.count))
            offset += p.count
        }
        let path = folder.path + "/v"
        do {
            let fd = try FileDescriptor.open(path, O_WRONLY | O_CREAT | O_TRUNC)
            #expect(try writeAll(fd.rawValue, &vectors) == offset)
        }
        #expect(vectors.allSatisfy { $0.iov_len == 0 }, "the vectors say nothing is left")
        let back = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(Array(back) == pieces.flatMap { $0 })
    }

    @Test func failuresCarryTheirErrno() {
        let folder = TemporaryFolder("framesrv-sys")
        #expect(throws: Errno.noSuchFileOrDirectory) { _ = try FileDescriptor.open(folder.path + "/missing", O_RDONLY) }
        #expect(throws: Errno.noSuchFileOrDirectory) { try removeFile(folder.path + "/missing") }
        #expect(throws: Errno.badFileDescriptor) { _ = try retryOnInterrupt { close(-1) } }
        #expect(Errno.tooManyOpenFiles.description == String(cString: strerror(EMFILE)))
    }

    @Test func readableDescriptorsNamesEveryReadyOne() throws {
        let a = try makeEventDescriptor(), b = try makeEventDescriptor(), c = try makeEventDescriptor()
        #expect(readableDescriptors(among: [a.rawValue, b.rawValue, c.rawValue], timeoutMillis: 0).isEmpty)
        signalEvent(a.rawValue)
        signalEvent(c.rawValue)
        #expect(readableDescriptors(among: [a.rawValue, b.rawValue, c.rawValue], timeoutMillis: 0) == [a.rawValue, c.rawValue])
        drainEvent(a.rawValue)
        #expect(pollReadable([a.rawValue, b.rawValue, c.rawValue], timeoutMillis: 0) == c.rawValue)
    }

    /// Finding 6: a FIFO in place of NAME.ctl hung every monitor in open(). Segment.open (the
    /// one opener of another process's segment) opens without blocking and maps regular
    /// files only; a symbolic link is not followed.
    @Test func segmentOpenRefusesFifosAndLinks() throws {
        let folder = TemporaryFolder("framesrv-sys")
        let fifo = folder.path + "/s.ctl"
        #expect(mkfifo(fifo, 0o600) == 0)
        for writable in [false, true] {
            #expect(throws: SegmentError.self) { _ = try Segment.open(fifo, writable: writable) }
        }
        let target = folder.path + "/real"
        #expect(FileManager.default.createFile(atPath: target, contents: Data(count: 4096)))
        #expect(symlink(target, folder.path + "/link.ctl") == 0)
        #expect(throws: SegmentError.self) { _ = try Segment.open(folder.path + "/link.ctl", writable: false) }
        let file = try Segment.open(target, writable: false)
        #expect(file.size == 4096)
    }

    /// A consumer maps a pool with every page faulted in (no page fault per 4 KiB in its first
    /// frames), but only a pool whose memory is all there, as a producer's is: faulting in a
    /// sparse tmpfs file's holes would allocate them, 64 MiB here on a hostile file's word.
    @Test func populateFaultsInAnAllocatedPoolAndNeverAllocatesASparseOne() throws {
        let folder = TemporaryFolder("framesrv-sys")
        let size = 64 << 20
        let sparse = folder.file("sparse.pool"), whole = folder.file("whole.pool")
        #expect(FileManager.default.createFile(atPath: sparse, contents: nil) && truncate(sparse, off_t(size)) == 0)
        let fd = try FileDescriptor.open(whole, O_RDWR | O_CREAT)
        try fd.allocate(size)
        let lazy = try Segment.open(sparse, writable: false, populate: true)
        var st = stat()
        #expect(stat(sparse, &st) == 0 && st.st_blocks == 0, "the sparse file stays unallocated (\(st.st_blocks) blocks)")
        #expect(Self.presentPages(lazy.base, bytes: size) == 0)
        let populated = try Segment.open(whole, writable: false, populate: true)
        #expect(Self.presentPages(populated.base, bytes: size) == size / 4096, "every page of the allocated pool is mapped")
        let plain = try Segment.open(whole, writable: false)
        #expect(Self.presentPages(plain.base, bytes: size) == 0, "without populate, nothing is mapped before it is read")
    }

    /// Pages of [base, base + bytes) with a page table entry (/proc/self/pagemap's bit 63).
    static func presentPages(_ base: UnsafeRawPointer, bytes: Int) -> Int {
        guard let f = fopen("/proc/self/pagemap", "r") else { return -1 }
        defer { fclose(f) }
        let first = Int(bitPattern: base) / 4096, count = bytes / 4096
        var entries = [UInt64](repeating: 0, count: count)
        guard fseek(f, first * 8, SEEK_SET) == 0, fread(&entries, 8, count, f) == count else { return -1 }
        return entries.filter { $0 & (1 << 63) != 0 }.count
    }

    @Test func raisingTheLimitReachesTheHardLimit() throws {
        let soft = try raiseFileDescriptorLimit()
        var rl = rlimit()
        #expect(getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &rl) == 0)
        #expect(UInt64(soft) == UInt64(rl.rlim_cur) && rl.rlim_cur == rl.rlim_max)
    }
}
