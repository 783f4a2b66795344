import Dispatch
import FoundationEssentials
import FrameServer
import Glibc

/// What a child writes into one pipe, read on a thread of its own (a chatty child never
/// blocks on a full pipe), each complete line told to `lines` as it comes.
///
/// The pipe's end is not the child's end: a descendant that inherited the pipe can hold it
/// open long after. `finish(within:)`, called once the child has exited, waits for the end
/// at most that long and then keeps what had arrived: everything the child itself wrote.
final class PipeReader: @unchecked Sendable {
    private let fd: Int32
    private let lines: (@Sendable (String) -> Void)?
    private let lock = ThreadLock()
    private var collected = Data()
    private var giveUp = false
    private let done = DispatchSemaphore(value: 0)

    /// Starts reading `fd` (the read end, owned from now on: closed at the end).
    init(_ fd: Int32, lines: (@Sendable (String) -> Void)?) {
        self.fd = fd
        self.lines = lines
        pthread_detach(spawnThread { [self] in
            read()
            close(fd)
            done.signal()
        })
    }

    /// Everything read: waits for the pipe's end for `seconds` at most, then stops reading
    /// (after taking what is already in the pipe). The same text on every call.
    func finish(within seconds: Double) -> String {
        if done.wait(timeout: .now() + seconds) == .timedOut {
            lock.withLock { giveUp = true }
            done.wait()
        }
        done.signal()
        return lock.withLock { String(decoding: collected, as: UTF8.self) }
    }

    private func read() {
        var pending = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        var readsLeft = Self.readsAfterGivingUp
        while readsLeft > 0 {
            let stop = lock.withLock { giveUp }
            // Once told to stop: only what is there now (a writer that never pauses cannot keep it going).
            guard stop || pollReadable([fd], timeoutMillis: 100) != nil else { continue }
            if stop {
                readsLeft -= 1
                if pollReadable([fd], timeoutMillis: 0) == nil { break }
            }
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            guard n > 0 else { break }
            let chunk = Data(buffer[..<n])
            lock.withLock { collected.append(chunk) }
            if let lines { deliver(chunk, &pending, to: lines) }
        }
        if let lines, !pending.isEmpty { lines(String(decoding: pending, as: UTF8.self)) }
    }

    /// The most reads after `finish(within:)` gave up waiting: a pipe's worth many times over.
    static let readsAfterGivingUp = 64

    /// Each complete line of `pending` + `chunk` told to `lines`; the rest stays pending.
    private func deliver(_ chunk: Data, _ pending: inout Data, to lines: (String) -> Void) {
        pending.append(chunk)
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
            lines(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
            pending = Data(pending[(newline + 1)...])
        }
    }
}
