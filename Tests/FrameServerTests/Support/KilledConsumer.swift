import Foundation
import Glibc

// A consumer killed while it holds slots: what PipelineTests, MonitorTests and the timing
// suite kill, and the condition that says the producer has reclaimed it.

/// A producer of `stream` (4 slots, 200/s) and a lossless sink that holds each frame it takes
/// for 10 s, returned once the sink holds a slot (the producer is stuck on it after 4 frames).
func producerAndHolder(_ stream: String, _ scratch: Scratch) throws -> (producer: Spawned, holder: Spawned) {
    let producer = try scratch.start(["produce", "--pattern", "--out", stream, "--size", "64x48", "--rate", "200", "--slots", "4"])
    let holder = try scratch.start(["sink", "--in", stream, "--null", "--lossless", "--hold-us", "10000000"])
    guard eventually(timeout: 30, { scratch.snapshot(stream)?.slotTable.contains { !$0.holders.isEmpty } ?? false }) else {
        throw TestFailure("the holder of \(stream) never held a slot: \(holder.stderr)")
    }
    return (producer, holder)
}

/// Whether the producer of `stream` has reclaimed consumer `pid`: its entry is gone from the
/// consumer table and no slot is held but the one being written.
func isReclaimed(_ pid: pid_t, of stream: String, in scratch: Scratch) -> Bool {
    guard let s = scratch.snapshot(stream) else { return false }
    return !s.consumers.contains { $0.pid == pid } && s.slotTable.allSatisfy { $0.holders.isEmpty || $0.state == "writing" }
}
