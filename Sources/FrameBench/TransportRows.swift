import FoundationEssentials
import FrameServer
import Glibc

/// The sections `bench transport` prints, each figure next to its peer's from the same run.
extension Bench {
    /// 1 and 2: one consumer at three sizes, framesrv and each peer, with the ratios.
    func transportAlone(_ budget: Budget, peers: TransportPeers) throws {
        print("1-2. transport alone, one lossless consumer process, frames/s (\(roundsText(budget))):")
        var rows = [["size", "framesrv", "pipe", "fs/pipe", "iceoryx2", "fs/iceoryx2", "GStreamer", "fs/GStreamer"]]
        var framesrv: [Double] = []
        for size in [BenchSize.small, .hd, .uhd] {
            let gstreamer = size.width >= 1920 ? peers.gstreamer : nil   // GStreamer at 1080p and 4K
            let m = try alternated(budget, [
                { try framesrvRun(size, consumers: [.sink(0)], rate: nil, budget: budget).fps },
                { try pipePeer(bytes: size.bytes, budget: budget) },
                peers.iceoryx2.map { peer in { peer.throughput(bytes: size.bytes, subscribers: 1, budget: budget) } },
                gstreamer.map { peer in { peer.throughput(size, budget: budget) } },
            ])
            framesrv.append(m[0] ?? 0)
            rows.append([size.label, rate(m[0]), rate(m[1]), ratio(m[0], m[1]), rate(m[2]), ratio(m[0], m[2]),
                         rate(m[3]), ratio(m[0], m[3])])
        }
        printTable(rows)
        print("  framesrv 4K/1080p \(ratio(framesrv[2], framesrv[1])), 4K/64x64 \(ratio(framesrv[2], framesrv[0])) "
              + "(frames/s ratios; the issue's target: 4K within 1.5x of both, a ratio of at least 0.67)")
        printAbsentPeers(peers, gstreamer: true)
        for failure in peers.gstreamer?.failures ?? [] { print("  GStreamer run failed at " + failure) }
    }

    /// 3: 4 lossless consumers at 1080p (Swift sinks, then Python stages), frames/s each, and
    /// iceoryx2 with 4 Python subscribers.
    func fanOut(_ budget: Budget, peers: TransportPeers) throws {
        print("3. fan-out at 1920x1080, 4 consumer processes, frames/s each one receives (\(roundsText(budget))):")
        var rows: [(label: String, run: () throws -> Double)] = [
            ("framesrv, 4 x 'sink --null --lossless'", { try self.framesrvRun(.hd, consumers: (0..<4).map { .sink($0) }, rate: nil, budget: budget).fps }),
        ]
        if let python = framesrvPython(peers) {
            rows.append(("framesrv, 4 x 'python -m framesrv consume --touch'",
                         { try self.framesrvRun(.hd, consumers: (0..<4).map { _ in .python(python, touch: true) }, rate: nil, budget: budget).fps }))
        }
        try versusIceoryx2(budget, peers: peers, subscribers: 4, framesrv: rows, iceoryx2: "iceoryx2, 4 Python subscribers")
    }

    /// The venv's python when it imports framesrv's package (else said, and nil).
    func framesrvPython(_ peers: TransportPeers) -> String? {
        guard case .success(let python) = peers.python, TransportPeers.moduleVersion(python: python, module: "framesrv") != nil else {
            print("  framesrv's Python package: not available (scripts/python-env)")
            return nil
        }
        return python
    }

    /// 4: Python at 1080p: a consumer of a Swift producer, taking only `frame.seq`, then every
    /// frame's planes and its publish_ns; a producer (reserve -> publish) into a Swift sink; and
    /// iceoryx2's Python pair, the peer of each.
    func pythonConsumers(_ budget: Budget, peers: TransportPeers) throws {
        print("4. Python at 1920x1080, frames/s (\(roundsText(budget))):")
        guard let python = framesrvPython(peers) else { return }
        let scratch = ScratchDirectory(prefix: "framesrv-bench-python")
        defer { withExtendedLifetime(scratch) {} }   // its files are used to the end of the scope
        let script = try Self.writeClientScript(in: scratch)
        let seconds = budget.frames.map { Double($0) / 200_000 } ?? budget.seconds
        try versusIceoryx2(budget, peers: peers, subscribers: 1, framesrv: [
            ("framesrv: Swift producer, 'python -m framesrv consume' (frame.seq)",
             { try self.framesrvRun(.hd, consumers: [.python(python)], rate: nil, budget: budget).fps }),
            ("framesrv: Swift producer, 'consume --touch' (planes as numpy views, publish_ns)",
             { try self.framesrvRun(.hd, consumers: [.python(python, touch: true)], rate: nil, budget: budget).fps }),
            ("framesrv: Python producer (reserve -> publish) into 'sink --null'",
             { try self.pythonProducerRun(python, script: script, fill: false, seconds: seconds) }),
        ], iceoryx2: "iceoryx2: Python publisher, Python subscriber (blocking Listener)")
    }

    /// framesrv's `rows` and iceoryx2 with `subscribers` subscribers at 1080p, alternated:
    /// frames/s each consumer receives, and each row's ratio to iceoryx2.
    func versusIceoryx2(_ budget: Budget, peers: TransportPeers, subscribers: Int,
                        framesrv rows: [(label: String, run: () throws -> Double)], iceoryx2: String) throws {
        let m = try alternated(budget, rows.map { Optional($0.run) } + [
            peers.iceoryx2.map { peer in { peer.throughput(bytes: BenchSize.hd.bytes, subscribers: subscribers, budget: budget) } },
        ])
        let peer = m[rows.count]
        printTable([["system", "frames/s each", "framesrv/iceoryx2"]]
                   + rows.enumerated().map { [$0.element.label, rate(m[$0.offset]), ratio(m[$0.offset], peer)] }
                   + [[iceoryx2, rate(peer), ""]])
        printAbsentPeers(peers, gstreamer: false)
    }

    /// Frames at the start of each latency run left out of its percentiles, every system's alike.
    static let latencyWarmup = 50

    /// 5: publish -> acquire at 200 fps with a consumer asleep between frames, p50/p99, beside
    /// the bare futex wake between two processes (CPeers.futexSource) measured in the same rounds.
    func wakeLatency(_ budget: Budget, peers: TransportPeers) throws {
        let rate = 200.0
        // A wake's p50 moves with where the scheduler puts the two processes, run to run (on a
        // 2-core VM 11-25 us for the bare futex itself): more rounds than the throughputs take.
        let latency = Budget(frames: budget.frames.map { max(100, $0 / 20) }, seconds: max(budget.seconds, 0.5),
                             rounds: budget.rounds == 1 ? 1 : max(budget.rounds, 7))
        let frames = latency.frames.map { "\($0) frames" } ?? "\(formatDouble(latency.seconds, 2)) s"
        // Every system's first frames pay for first-touch page faults and cold code: a warm-up
        // (a quarter second), left out of every row's percentiles alike.
        let warmup = Self.latencyWarmup
        print("5. wake latency publish -> acquire at \(formatDouble(rate, 0)) fps, one consumer process asleep between frames, "
              + "p50 / p99 us (\(frames) a run, its first \(warmup) frames a warm-up, median of \(latency.rounds)):")
        var rows = [["size", "framesrv --poll-us 0", "--poll-us 1000", "--poll-us 1000000", "iceoryx2 Listener", "iceoryx2 busy-poll",
                     "bare futex (floor)", "futex, shm + timeout"]]
        let scratch = ScratchDirectory(prefix: "framesrv-bench-futex")
        defer { withExtendedLifetime(scratch) {} }   // its files are used to the end of the scope
        let floorFrames = String(latency.frames ?? max(Int(latency.seconds * rate), 100))
        let futex = try CPeers.compile("futex_floor", source: CPeers.futexSource, in: scratch)
        var ratios: [String] = []
        for size in [BenchSize.small, .hd] {
            var p99: [[Double]] = Array(repeating: [], count: 7)
            func measure(_ i: Int, _ run: @escaping () throws -> (Double, Double)) -> (() throws -> Double) {
                { let (p50, q) = try run(); p99[i].append(q); return p50 }
            }
            let sink = { (poll: Int?) in
                { try framesrvRun(size, consumers: [.sink(0, pollMicros: poll, warmup: warmup)], rate: rate, budget: latency) }
            }
            let within = (Double(floorFrames) ?? 0) / rate + 60
            let floor = futex.map { binary in
                { try CPeers.run(binary, [String(rate), floorFrames, String(warmup)], bench: "transport", within: within) }
            }
            let shmFloor = futex.map { binary in
                { try CPeers.run(binary, [String(rate), floorFrames, String(warmup), "shm"], bench: "transport", within: within) }
            }
            let p50 = try alternated(latency, [
                measure(0) { let r = try sink(0)(); return (r.p50, r.p99) },
                measure(1) { let r = try sink(1000)(); return (r.p50, r.p99) },
                measure(2) { let r = try sink(1_000_000)(); return (r.p50, r.p99) },
                peers.iceoryx2.map { peer in measure(3) { peer.latency(bytes: size.bytes, rate: rate, spin: false, warmup: warmup, budget: latency) } },
                peers.iceoryx2.map { peer in measure(4) { peer.latency(bytes: size.bytes, rate: rate, spin: true, warmup: warmup, budget: latency) } },
                floor.map { run in measure(5) { let r = try run(); return (r.p50, r.p99) } },
                shmFloor.map { run in measure(6) { let r = try run(); return (r.p50, r.p99) } },
            ])
            rows.append([size.label] + (0..<7).map { i in p50[i].map { $0.isNaN ? "failed" : "\(formatDouble($0)) / \(formatDouble(median(p99[i])))" } ?? "-" })
            if let f50 = p50[5], let fs50 = p50[0] {
                ratios.append("\(size.label): p50 \(ratio(fs50, f50)) (goal <= 1.3), p99 \(ratio(median(p99[0]), median(p99[5]))) (goal <= 2)"
                              + (p50[6].map { ", against the shm + timeout futex p50 \(ratio(fs50, $0))" } ?? ""))
            }
        }
        printTable(rows)
        print("  the issue's targets: framesrv p50 <= 10 us, p99 <= 40 us, below iceoryx2's Listener; with --poll-us 1000 p50 <= 2 us")
        print(ratios.isEmpty ? "  bare futex: absent (no C compiler 'cc' on PATH: scripts/setup --test installs gcc)"
              : "  framesrv --poll-us 0 / bare futex: " + ratios.joined(separator: "; "))
        print("  (--poll-us N spins at most N us per frame; at 200 fps the window is centred on when the next frame "
              + "is due, so 1000 costs about a fifth of a core; --poll-us 1000000 spins throughout, as iceoryx2's busy-poll does; "
              + "the bare futex: two processes of a C program, a store and FUTEX_WAKE, the waiter timing its wake, nothing else; "
              + "'shm + timeout': the same on a page of a /dev/shm file with a 500 ms timeout on each wait, as framesrv's consumer sleeps)")
        printAbsentPeers(peers, gstreamer: false)
    }

    func roundsText(_ budget: Budget) -> String {
        let each = budget.frames.map { "\($0) frames" } ?? "\(formatDouble(budget.seconds, 2)) s"
        return budget.rounds == 1 ? "one run of \(each)" : "median of \(budget.rounds) alternated rounds of \(each)"
    }

    /// Frames/s as a whole number, "-" for a system not run.
    func rate(_ value: Double?) -> String { value.map { $0.isNaN ? "failed" : formatDouble($0, 0) } ?? "-" }

    /// a/b with two decimals, "-" when either is missing.
    func ratio(_ a: Double?, _ b: Double?) -> String {
        guard let a, let b, b > 0 else { return "-" }
        return formatFixed(a / b, 2)
    }

    /// The peers a section could not run, and iceoryx2's frame count so far.
    func printAbsentPeers(_ peers: TransportPeers, gstreamer: Bool) {
        if let i = peers.iceoryx2 { print("  " + i.countLine) } else { print("  " + peers.iceoryx2Absent) }
        if gstreamer, peers.gstreamer == nil { print("  GStreamer: not installed (scripts/setup --bench)") }
    }

    /// Rows of cells: the first column left-aligned, the others right-aligned, two spaces apart.
    func printTable(_ rows: [[String]]) {
        let columns = rows.map(\.count).max() ?? 0
        let widths = (0..<columns).map { c in rows.map { c < $0.count ? $0[c].count : 0 }.max() ?? 0 }
        for row in rows {
            let cells = row.enumerated().map { c, cell in c == 0 ? cell.padded(to: widths[0])
                                                               : cell.leftPadding(widths[c]) }
            print("  " + cells.joined(separator: "  "))
        }
    }
}
