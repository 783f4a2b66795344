import FoundationEssentials

/// The fields the benchmarks read from a stage's JSON line: a sink's --stats-json (received,
/// latency), a producer's --stats-json file (zero_copy, copied), iceoryx2_pair.py's result
/// (sent, received per subscriber, fps, p50_us, p99_us), bench gpu's Python processes (role,
/// frames, seconds, cpu_s, copies, cuda_calls_per_frame; p50_us, p99_us, wake_p50_us; ended_ns). A field that is not
/// there is nil.
struct StatsLine: Decodable {
    var received: Int?
    var receivedPerSubscriber: [Int]?
    var sent: Int?
    var latencyP50: Double?, latencyP99: Double?
    var zeroCopy: Int?, copied: Int?
    var fps: Double?, p50: Double?, p99: Double?
    var role: String?, frames: Int?, seconds: Double?, cpuSeconds: Double?, copies: Double?, cudaCallsPerFrame: Double?
    var wakeP50: Double?
    var endedNanos: Int?

    enum CodingKeys: String, CodingKey {
        case received, sent, copied, fps, role, frames, seconds, copies
        case latencyP50 = "latency_p50_us", latencyP99 = "latency_p99_us", zeroCopy = "zero_copy", p50 = "p50_us", p99 = "p99_us"
        case cpuSeconds = "cpu_s", cudaCallsPerFrame = "cuda_calls_per_frame", wakeP50 = "wake_p50_us"
        case endedNanos = "ended_ns"
    }

    /// `text`'s JSON object, nil when it is not one.
    init?(_ text: some StringProtocol) {
        guard let s = try? JSONDecoder().decode(StatsLine.self, from: Data(text.utf8)) else { return nil }
        self = s
    }

    /// `received` is a count in a sink's line and one count per subscriber in iceoryx2's.
    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        received = try? c.decodeIfPresent(Int.self, forKey: .received)
        receivedPerSubscriber = try? c.decodeIfPresent([Int].self, forKey: .received)
        sent = try? c.decodeIfPresent(Int.self, forKey: .sent)
        latencyP50 = try? c.decodeIfPresent(Double.self, forKey: .latencyP50)
        latencyP99 = try? c.decodeIfPresent(Double.self, forKey: .latencyP99)
        zeroCopy = try? c.decodeIfPresent(Int.self, forKey: .zeroCopy)
        copied = try? c.decodeIfPresent(Int.self, forKey: .copied)
        fps = try? c.decodeIfPresent(Double.self, forKey: .fps)
        p50 = try? c.decodeIfPresent(Double.self, forKey: .p50)
        p99 = try? c.decodeIfPresent(Double.self, forKey: .p99)
        role = try? c.decodeIfPresent(String.self, forKey: .role)
        frames = try? c.decodeIfPresent(Int.self, forKey: .frames)
        seconds = try? c.decodeIfPresent(Double.self, forKey: .seconds)
        cpuSeconds = try? c.decodeIfPresent(Double.self, forKey: .cpuSeconds)
        copies = try? c.decodeIfPresent(Double.self, forKey: .copies)
        cudaCallsPerFrame = try? c.decodeIfPresent(Double.self, forKey: .cudaCallsPerFrame)
        wakeP50 = try? c.decodeIfPresent(Double.self, forKey: .wakeP50)
        endedNanos = try? c.decodeIfPresent(Int.self, forKey: .endedNanos)
    }
}
