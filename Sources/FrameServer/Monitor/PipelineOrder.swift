/// The order monitors list streams in: the order frames flow.
///
/// Stream B is downstream of stream A when B's producer is one of A's consumers (a filter
/// reads A and writes B). Sources (streams nobody upstream feeds) come first, by name;
/// each stream follows the last of its upstream streams, and a chain stays together
/// (depth first), so `ls` and `top` read like the pipeline: `film`, `soft`, `gray`.
extension StreamSnapshot {
    public static func pipelineOrder(_ streams: [StreamSnapshot]) -> [StreamSnapshot] {
        let byName = streams.sorted { $0.name < $1.name }
        var upstream: [[Int]] = Array(repeating: [], count: byName.count)
        var downstream: [[Int]] = Array(repeating: [], count: byName.count)
        for (a, s) in byName.enumerated() {
            let readers = Set(s.consumers.map(\.pid))
            for (b, t) in byName.enumerated() where b != a && readers.contains(t.producerPID) {
                upstream[b].append(a)
                downstream[a].append(b)
            }
        }
        var waiting = upstream.map(\.count)
        var ready = (0..<byName.count).filter { waiting[$0] == 0 }.reversed().map { $0 }
        var order: [Int] = []
        while let next = ready.popLast() {
            order.append(next)
            for b in downstream[next].reversed() {
                waiting[b] -= 1
                if waiting[b] == 0 { ready.append(b) }
            }
        }
        // A cycle (pids reused across streams) cannot be ordered: its streams come last, by name.
        let placed = Set(order)
        order += (0..<byName.count).filter { !placed.contains($0) }
        return order.map { byName[$0] }
    }
}
