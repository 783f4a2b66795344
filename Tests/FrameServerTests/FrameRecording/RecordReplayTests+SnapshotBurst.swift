import Foundation
import FrameControl
import FrameServer
import Glibc
import Testing

extension RecordReplayTests {
    /// Snapshot mode writes one snapshot at a time (issue 26 item 8: 500 requests in 24.5 s
    /// wrote 409 files, 759 MB): of 20 `ctl NAME snapshot` requests at once, those that come
    /// while one is requested or being written are refused with a reply that says so, and each
    /// accepted one writes exactly one file.
    @Test func aSnapshotRequestedWhileOneIsWrittenIsRefused() throws {
        let scratch = try Scratch()
        let rec = scratch.file("burst.nut")
        let producer = try scratch.start(["produce", "--pattern", "--out", "cam", "--rate", "30", "--size", "160x120", "--wait-for", "1"])
        defer { producer.kill() }
        let recorder = try scratch.start(["record", "--in", "cam", "-o", rec, "--snapshot", "1"])
        defer { recorder.kill() }
        #expect(eventually { recorder.stderr.contains("memory bound") })
        #expect(eventually { (scratch.snapshot("cam")?.published ?? 0) >= 30 })
        let replies = Locked<[ControlReply]>([])
        let directory = scratch.directory
        let threads = (0..<20).map { _ in
            Thread { if let r = try? ControlClient.send(.snapshot, to: "burst", directory: directory) { replies.withLock { $0.append(r) } } }
        }
        for t in threads { t.start() }
        #expect(eventually { replies.withLock { $0.count } == 20 })
        let all = replies.withLock { $0 }
        let accepted = all.filter { if case .ok = $0 { true } else { false } }.count
        let refused = all.filter { if case .error(let m) = $0 { m.contains("a snapshot is being written") } else { false } }.count
        #expect(accepted >= 1 && refused >= 1 && accepted + refused == 20, "\(all)")
        // Each accepted request wrote its own file, and no other was written.
        #expect(eventually { recorder.stdout.components(separatedBy: "record: snapshot ").count - 1 == accepted }, "\(recorder.stdout)")
        #expect(access(scratch.file("burst-\(accepted + 1).nut"), F_OK) != 0)
        let ctl = try scratch.run(["ctl", "burst", "snapshot"])
        #expect(ctl.status == 0, "an idle recorder takes a request again: \(ctl.stderr)")
        #expect(eventually { recorder.stdout.contains("snapshot \(scratch.file("burst-\(accepted + 1).nut"))") })
    }
}
