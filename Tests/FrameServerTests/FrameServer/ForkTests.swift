import Foundation
import FrameServer
import Glibc
import Testing

/// A Consumer or Producer used in a forked child (issue 26 item 4, the Swift library's half;
/// libframesrv's FRAMESRV_E_FORKED and Python's ForkedError are the others). The child's copy
/// names the parent's consumer entry and slots: each call refuses in one line naming both
/// pids, a frame held across the fork is let go without touching shared memory, and the
/// parent's consumer still gets every frame in order with nothing missed.
@Suite(.serialized) struct ForkTests {
    /// What the child's calls on its parent's objects come to, one line each (the refusal, or
    /// what the call did instead).
    static func childCalls(_ consumer: Consumer, _ producer: Producer, _ format: FrameFormat) -> [String] {
        var lines: [String] = []
        do {
            if let frame = try consumer.next() {
                lines.append("next: NOT REFUSED: took frame \(frame.sequence)")
                frame.release()
            } else {
                lines.append("next: NOT REFUSED: nil")
            }
        } catch { lines.append("next: \(error)") }
        do { try consumer.attach(); lines.append("attach: NOT REFUSED") } catch { lines.append("attach: \(error)") }
        do {
            if let frame = try producer.reserve(format) {
                lines.append("reserve: NOT REFUSED: slot \(frame.slot)")
                frame.publish()
            } else {
                lines.append("reserve: NOT REFUSED: nil")
            }
        } catch { lines.append("reserve: \(error)") }
        return lines
    }

    @Test func aForkedChildIsRefusedAndTheParentKeepsEveryFrame() throws {
        let scratch = try Scratch()
        let (producer, consumer) = try producerAndConsumer("fk", slots: 4, scratch)
        defer { producer.close() }
        let format = FrameFormat(.gray8, width: 32, height: 16)
        try publishPattern(producer, format)
        try publishPattern(producer, format)
        let held = try nextFrame(consumer)   // frame 1, held across the fork
        #expect(held.sequence == 1)
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        let child = fork()
        if child == 0 {
            // The child: only the calls under test, then _exit (no test machinery runs here).
            close(fds[0])
            var text = Self.childCalls(consumer, producer, format).joined(separator: "\n")
            held.release()   // the parent's hold: let go here without touching it
            text.withUTF8 { _ = write(fds[1], $0.baseAddress, $0.count) }
            _exit(0)
        }
        close(fds[1])
        defer { close(fds[0]) }
        #expect(child > 0)
        var poll = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
        guard Glibc.poll(&poll, 1, 30_000) == 1 else {
            kill(child, SIGKILL)
            waitpid(child, nil, 0)
            throw TestFailure("the child hung on its parent's consumer or producer")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fds[0], &chunk, chunk.count)
            if n <= 0 { break }
            bytes += chunk[..<n]
        }
        var status: Int32 = 0
        #expect(waitpid(child, &status, 0) == child)
        #expect(status == 0, "the child exited with status \(status)")
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(lines)")
        for line in lines {
            #expect(line.contains("was opened by pid \(getpid()); a forked child (pid \(child)) must open its own"), "\(line)")
        }
        // The parent: frame 1 still held (the child's release did nothing), then every frame in
        // order; a frame the child took would never come, so each wait is bounded.
        let deadline = monotonicNanos() + 20_000_000_000
        consumer.shouldStop = { monotonicNanos() > deadline }
        #expect(held.sequence == 1)
        held.release()
        for seq in UInt64(2)...6 {
            if seq > 2 { try publishPattern(producer, format) }
            let frame = try nextFrame(consumer)
            #expect(frame.sequence == seq, "the parent's frame \(seq)")
            frame.release()
        }
        #expect(consumer.missed == 0 && consumer.delivered == 6, "missed \(consumer.missed), delivered \(consumer.delivered)")
        #expect(producer.publishedCount == 6, "the child published nothing into the parent's stream")
    }
}
