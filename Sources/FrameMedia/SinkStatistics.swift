import FrameServer
import Glibc

/// What a sink counts: frames, sequence range, misses, corruption, latency.
public struct SinkStatistics: Sendable {
    public var received = 0
    public var first: UInt64 = 0
    public var last: UInt64 = 0
    public var corrupt = 0
    public var missed: UInt64 = 0
    /// Frames the live source upstream dropped before frames this sink received
    /// (`fs_frame.source_dropped`), and the frames that carried the discontinuity flag.
    public var droppedAtSource: UInt64 = 0
    public var discontinuities = 0
    public var seconds = 0.0
    /// Frames left out of the latency percentiles at the start: a consumer's first frames
    /// pay for first-touch page faults and cold code, which a benchmark's warm-up excludes.
    public var latencyWarmup = 0
    /// Latency samples in ns; the first million are kept (8 MB), enough for percentiles.
    private var latencies: [UInt64] = {
        var a: [UInt64] = []
        a.reserveCapacity(1 << 20)
        return a
    }()

    public init() {}

    /// Counts `frame`: its sequence number, its discontinuity and drops, its latency.
    public mutating func record(_ frame: borrowing Frame) {
        received += 1
        if first == 0 { first = frame.sequence }
        last = frame.sequence
        if frame.header.flags.contains(.discontinuity) {
            discontinuities += 1
            droppedAtSource += UInt64(frame.header.sourceDropped)
        }
        if received > latencyWarmup, latencies.count < latencies.capacity { latencies.append(frame.latencyNanos) }
    }

    /// The latency at percentile `p` (0 to 1), in microseconds; 0 with no samples.
    public func percentileMicros(_ p: Double) -> Double {
        guard !latencies.isEmpty else { return 0 }
        let sorted = latencies.sorted()
        let i = min(sorted.count - 1, Int((Double(sorted.count - 1) * p).rounded()))
        return Double(sorted[i]) / 1000
    }

    /// The figures of the sink's summary line.
    public var summary: String {
        "received \(received) frames (first \(first), last \(last)), missed \(missed), corrupt \(corrupt), "
            + "dropped at source \(droppedAtSource) (\(discontinuities) discontinuit\(discontinuities == 1 ? "y" : "ies")), "
            + "latency p50 \(formatDouble(percentileMicros(0.5))) us p99 \(formatDouble(percentileMicros(0.99))) us, "
            + "\(formatDouble(Double(received) / max(seconds, 1e-9), 0)) fps"
    }

    /// The same figures as one JSON object (`--stats-json`), for programs.
    public func json(stream: String, mode: DeliveryMode) -> String {
        "{\"stream\":\"\(stream)\",\"mode\":\"\(mode.rawValue)\",\"received\":\(received),\"first\":\(first),\"last\":\(last),"
            + "\"missed\":\(missed),\"corrupt\":\(corrupt),\"dropped_at_source\":\(droppedAtSource),"
            + "\"discontinuities\":\(discontinuities),\"seconds\":\(seconds),"
            + "\"latency_p50_us\":\(percentileMicros(0.5)),\"latency_p99_us\":\(percentileMicros(0.99))}"
    }
}

/// --seq-log FILE: one write(2) per line, so a sink killed with SIGKILL leaves a log that is
/// complete up to its death.
public final class SequenceLog {
    private let descriptor: FileDescriptor?

    /// Opens `path` for appending; no log (every write a no-op) when `path` is nil.
    public init(path: String?) throws {
        guard let path else { descriptor = nil; return }
        do { descriptor = try .open(path, O_WRONLY | O_CREAT | O_APPEND, mode: 0o644) } catch {
            throw SystemCallError("open", path: path, error)
        }
    }

    /// Appends `line` (built only when there is a log: the null sink pays nothing per frame).
    public func write(_ line: @autoclosure () -> String) {
        guard descriptor != nil else { return }
        var l = line() + "\n"
        l.withUTF8 { bytes in _ = try? descriptor?.writeAll(UnsafeRawBufferPointer(bytes)) }
    }
}
