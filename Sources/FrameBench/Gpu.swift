import FoundationEssentials
import FrameProcess
import FrameServer
import Glibc

/// `framesrv bench gpu` (issue 24): 4K NV12 frames between two processes through a framesrv
/// CUDA stream, next to torch.multiprocessing, a host stream uploaded with `.cuda()` and one
/// device-to-device copy a frame (the floor of any design that copies); then publish -> ready
/// on the consumer's stream at 60 and 200 fps; then NVDEC into slots against ffmpeg's NVDEC
/// decode, with one consumer and with four (GpuDecode.swift). Every process is a role of the Python script
/// (GpuScript.swift) run by --python (default python3; PYTHONPATH as this process has it).
/// Without a CUDA device it says so in one line and measures nothing.
extension Bench {
    /// `sections`: 1 (transport), 2 (latency), 3 (NVDEC); empty: all.
    func gpu(seconds: Double, sections: Set<Int>, python: String?, input: String?) throws {
        if let why = Self.gpuAbsent() {
            print("framesrv bench gpu: skipped: \(why)")
            return
        }
        let runner = GpuRunner(python: python ?? "python3", scratch: ScratchDirectory(prefix: "framesrv-bench-gpu"), seconds: seconds)
        try Data(Self.gpuScript.utf8).write(to: URL(fileURLWithPath: runner.script))
        let probe = try runner.probe()
        if probe.hasPrefix("skip: ") {
            print("framesrv bench gpu: skipped: \(probe.dropFirst(6))")
            return
        }
        print("framesrv bench gpu: \(probe.dropFirst(4)); python \(runner.python); "
              + "\(ProcessInfo.processInfo.activeProcessorCount) cores; \(formatDouble(seconds, 2)) s per measurement")
        let all = sections.isEmpty, c = all || !sections.isDisjoint(with: [1, 2]) ? Self.compileGpuCTransport(in: runner.scratch) : (nil, "")
        if all || sections.contains(1) { try gpuTransport(runner, c: c) }
        if all || sections.contains(2) { try gpuLatency(runner, c: c) }
        if all || sections.contains(3) { try gpuDecode(runner, input: input) }
    }

    /// Why there is no CUDA device to measure on (nvidia-smi missing, or listing no GPU), nil when there is one.
    static func gpuAbsent() -> String? {
        guard let smi = try? Child(["nvidia-smi", "-L"], label: "nvidia-smi", executable: "/usr/bin/env", captureErrors: true) else {
            return "no CUDA device (cannot run /usr/bin/env nvidia-smi)"
        }
        let (status, out, _, killed) = finish(smi, within: 30)
        if status == 127 { return "no CUDA device (nvidia-smi is not on PATH)" }
        guard status == 0, !killed, out.contains("GPU ") else { return "no CUDA device (nvidia-smi -L lists no GPU)" }
        return nil
    }

    /// Section 1: framesrv's two rows (C, and Python with torch tensors), the peers', their
    /// ratios to framesrv's C row, and what each includes.
    func gpuTransport(_ runner: GpuRunner, c compiled: (path: String?, why: String)) throws {
        print("1. 3840x2160 nv12 (12,441,600 bytes a frame) between two processes, transport alone: frames/s over the "
              + "consumer's timed window (after 16 frames); CPU: user+sys of each process over its own window, per frame, summed")
        let s = String(runner.seconds), pair: Set = ["producer", "consumer"]
        let c = try compiled.path.map {
            try GpuRow("framesrv CUDA stream, C", roles: pair, kind: "",
                       runner.pair(producer: ["produce", "bench", s], consumer: ["consume", "bench"], program: $0))
        }
        let python = try GpuRow("framesrv CUDA stream, Python + torch", roles: pair, kind: "",
                                runner.pair(producer: ["fs-produce", "bench", s], consumer: ["fs-consume", "bench"]))
        let dropped = try GpuRow("torch.multiprocessing, tensor dropped", roles: pair, kind: "",
                                 runner.single(["mp", s, "drop"], label: "the torch.multiprocessing run"))
        let kept = try GpuRow("torch.multiprocessing, tensors kept", roles: pair, kind: "",
                              runner.single(["mp", s, "keep"], label: "the torch.multiprocessing run"))
        let host = try GpuRow("host framesrv stream + .cuda()", roles: pair, kind: " H2D",
                              runner.pair(producer: ["host-produce", "bench", s], consumer: ["host-consume", "bench"]))
        let floor = try GpuRow("one device-to-device copy (floor)", roles: ["copier"], kind: " D2D",
                               runner.single(["d2d", s], label: "the d2d copier"))
        let base = c ?? python
        print("  " + "row".padded(to: 38) + "frames/s".leftPadding(10) + "CPU us/frame".leftPadding(14)
              + "   ratio to \(base.label)   copies/frame")
        for row in [c, python, dropped, kept, host, floor].compactMap({ $0 }) { print(row.line(against: base.fps)) }
        if c == nil { print("  framesrv CUDA stream, C: not measured: \(compiled.why)") }
        let torch = max(dropped.fps, 1e-9, kept.fps)
        for row in [c, python].compactMap({ $0 }) {
            print("  \(row.label) / torch.multiprocessing (its faster row): \(formatDouble(row.fps / torch, 1))x (goal: at least 10x)")
        }
        print("  what each row includes:")
        for line in Self.gpuRowsInclude { print("    " + line) }
    }

    static let gpuRowsInclude = [
        "framesrv CUDA stream, C: libframesrv's framesrv_producer_reserve_on -> framesrv_producer_publish_on on a CUDA stream, "
            + "nothing written; a lossless consumer's framesrv_consumer_next_on -> framesrv_frame_release_on on its own stream: the "
            + "transport without an interpreter (the program is compiled by this bench against the bundle's libframesrv). No copy: "
            + "the consumer's planes are the producer's slot",
        "framesrv CUDA stream, Python + torch: Producer(device='cuda:0', slots=8, rate=None) reserve(stream=S) -> publish(stream=S), nothing written; "
            + "Consumer(device='cuda', lossless, stream=S): next on S, torch.from_dlpack of both planes, release(stream=S); the fences "
            + "both ways are queued on the streams (no CPU waits for the GPU). Copies: each tensor's data_ptr against "
            + "frame.device_plane(i)'s pointer on the first frame, plus the bytes torch allocated in either process",
        "torch.multiprocessing: a ring of 8 CUDA uint8 tensors (2160*3/2 x 3840) written once, each sent through a spawn-context "
            + "Queue (a CUDA IPC handle); the consumer touches it (.data_ptr()) and sends its index back as the done token; the "
            + "producer reuses a tensor only after its token (8 in flight). 'dropped': the consumer lets go of each tensor before "
            + "its token, as torch's docs ask (torch maps the buffer again at each receive); 'kept': it keeps the last tensor of "
            + "each buffer, unread, so torch's mapping stays open. Copies: the bytes torch allocated in either process",
        "host path: a host framesrv stream (reserve -> publish, nothing written), the lossless consumer doing "
            + "torch.from_numpy(plane).cuda() per plane (pageable memory). Copies: the bytes its .cuda() calls moved",
        "floor: dst.copy_(src) of a whole frame then torch.cuda.synchronize() (the CPU column includes its wait), one process. "
            + "Copies: the bytes copy_ moved",
    ]

    /// Section 2: publish -> ready on the consumer's stream at 60 and 200 fps, a C consumer's
    /// (libframesrv) and a Python one's, asleep between frames and busy-polling (`poll_us`
    /// 1000). The C rows are medians of `latencyRounds` runs; asleep, they alternate with runs
    /// with libframesrv's opt-in poll of a ready fence not yet written (`FRAMESRV_READY_SPIN_US=50`;
    /// a busy-polling consumer never polls the fence).
    func gpuLatency(_ runner: GpuRunner, c compiled: (path: String?, why: String)) throws {
        print("2. publish -> ready on the consumer's stream, 3840x2160 nv12 CUDA stream: the producer reserves and publishes on its "
              + "stream at the rate (nothing written); the consumer, asleep between frames or busy-polling up to 1000 us around "
              + "when each is due (poll_us), takes each with next on its stream, synchronizes that stream and reads "
              + "CLOCK_MONOTONIC: ready - the frame's publish_ns (after 16 warm-up frames). C: both processes on libframesrv, "
              + "median of \(Self.latencyRounds) runs, asleep alternated with runs with libframesrv's opt-in 50 us poll of a "
              + "ready fence not yet written (FRAMESRV_READY_SPIN_US=50; a busy-polling consumer never polls it); Python: both "
              + "with framesrv's Python package and torch streams, one run. Goal: p50 at most 50 us")
        for fps in [60, 200] {
            for poll in [0, 1000] {
                let producer = ["lat-produce", "bench", String(fps), String(runner.seconds)], consumer = ["lat-consume", "bench", String(poll)]
                let what = "\(fps) fps, \(poll == 0 ? "asleep" : "polling")"
                if let program = compiled.path {
                    var plain: [StatsLine] = [], polled: [StatsLine] = []
                    for _ in 0..<Self.latencyRounds {
                        plain.append(try latency(runner.pair(producer: producer, consumer: consumer, program: program), what))
                        guard poll == 0 else { continue }
                        polled.append(try latency(runner.pair(producer: producer, consumer: consumer, program: program,
                                                              environment: ["FRAMESRV_READY_SPIN_US": "50"]), what))
                    }
                    let ab = polled.isEmpty ? "" : "; with a 50 us ready poll: \(latencyFigures(polled))"
                    print("  \(what), C: \(latencyFigures(plain))\(ab)")
                }
                let python = try latency(runner.pair(producer: producer, consumer: consumer), what)
                print("  \(what), Python: \(latencyFigures([python]))")
            }
        }
        if compiled.path == nil { print("  C: not measured: \(compiled.why)") }
    }

    static let latencyRounds = 3

    private func latency(_ lines: [StatsLine], _ what: String) throws -> StatsLine {
        guard let l = lines.first(where: { $0.role == "latency" }), l.p50 != nil, l.p99 != nil else {
            throw BenchError.incompleteRun(bench: "gpu", what: "the \(what) latency consumer printed no figures", said: "")
        }
        return l
    }

    /// "p50 X us, p99 Y us, next returned at p50 Z us (N frames)": the medians of the runs'.
    func latencyFigures(_ runs: [StatsLine]) -> String {
        let p50 = median(runs.compactMap(\.p50)), p99 = median(runs.compactMap(\.p99))
        let wake = runs.compactMap(\.wakeP50).isEmpty ? "" : ", next returned at p50 \(formatDouble(median(runs.compactMap(\.wakeP50)), 1)) us"
        return "p50 \(formatDouble(p50, 1)) us, p99 \(formatDouble(p99, 1)) us\(wake) (\(runs.compactMap(\.frames).reduce(0, +)) frames)"
    }
}

/// One row of section 1: frames/s, CPU per frame of its processes together, copies per frame.
struct GpuRow {
    var label: String
    var fps: Double
    var cpuMicros: Double
    var copies: String

    /// A row from the lines of its processes (one of each of `roles`): the consumer's (or the
    /// copier's) frames/s, and every process's CPU per frame and copies per frame summed.
    init(_ label: String, roles: Set<String>, kind: String, _ lines: [StatsLine]) throws {
        guard lines.count == roles.count, Set(lines.compactMap(\.role)) == roles,
              let timed = lines.first(where: { $0.role == "consumer" || $0.role == "copier" }), let frames = timed.frames,
              let s = timed.seconds, s > 0, lines.allSatisfy({ ($0.frames ?? 0) > 0 && $0.cpuSeconds != nil && $0.copies != nil }) else {
            throw BenchError.incompleteRun(bench: "gpu", what: "\(label): no timed window in the lines printed",
                                           said: lines.compactMap(\.role).joined(separator: ", "))
        }
        let cpu = lines.reduce(0) { $0 + ($1.cpuSeconds ?? 0) / Double($1.frames ?? 1) }
        let copies = lines.reduce(0) { $0 + ($1.copies ?? 0) }
        let calls = lines.compactMap(\.cudaCallsPerFrame).first.map { " (\(formatDouble($0, 0)) .cuda())" } ?? ""
        self.label = label
        fps = Double(frames) / s
        cpuMicros = cpu * 1e6
        self.copies = formatDouble(copies, 2) + (copies > 0 ? kind : "") + calls
    }

    func line(against framesrv: Double) -> String {
        let ratio = fps / max(framesrv, 1e-9)
        return "  " + label.padded(to: 38) + formatDouble(fps, 0).leftPadding(10) + formatDouble(cpuMicros, 1).leftPadding(14)
            + formatDouble(ratio, ratio < 0.1 ? 3 : 2).leftPadding(20) + "   " + copies
    }
}

/// Runs the Python script's roles with --python, each with FRAMESRV_DIR set to a fresh
/// directory under /dev/shm (the fences' control segment is registered with the device).
struct GpuRunner {
    let python: String
    /// Where the script is written (it lives as long as the runner).
    let scratch: ScratchDirectory
    let seconds: Double
    var script: String { scratch.path + "/bench_gpu.py" }

    /// The script's probe: "ok: DEVICE, torch ..., framesrv ..." or "skip: WHY"; an error throws.
    func probe() throws -> String {
        let child = try start(["probe"], label: "the probe", directory: scratch.path)
        let (status, out, err, _) = finish(child, within: 120)
        let line = out.split(separator: "\n").last.map(String.init) ?? ""
        if status == 127 { throw BenchError.missingProgram(python, remedy: "give --python PATH: a python with torch and the framesrv package") }
        guard status == 0, line.hasPrefix("ok: ") || line.hasPrefix("skip: ") else {
            throw BenchError.missingProgram("\(python) with torch and framesrv (\(line.isEmpty ? err.trimmed : line))",
                                            remedy: "build the package with 'scripts/test-gpu --python' and set "
                                                + "PYTHONPATH=clients/c/build-gpu/python, or pip install ./clients/python")
        }
        return line
    }

    /// `python script ARGS` (or `program ARGS`), FRAMESRV_DIR=`directory` and `environment`, the
    /// rest of the environment (PYTHONPATH) as ours.
    func start(_ arguments: [String], label: String, directory: String, program: String? = nil,
               environment: [String: String] = [:]) throws -> Child {
        do {
            return try Child(program.map { [$0] + arguments } ?? [python, script] + arguments, label: label, executable: "/usr/bin/env",
                             environment: environment.merging(["FRAMESRV_DIR": directory]) { $1 }, captureErrors: true)
        } catch {
            if let program {
                throw BenchError.missingProgram("\(program) (\(error))", remedy: "the C transport bench gpu compiled; run it by hand to see why")
            }
            throw BenchError.missingProgram("\(python) (\(error))", remedy: "give --python PATH")
        }
    }

    /// The child's JSON lines once it exited 0 (within the run's seconds and 5 minutes for
    /// torch's start); else an error with its last lines, and those of `others`, killed.
    func lines(of child: Child, besides others: [Child] = []) throws -> [StatsLine] {
        let (status, out, err, killed) = finish(child, within: seconds + 300)
        guard status == 0, !killed else {
            var said = [child.label + ": " + Self.tail(out + err)]
            for other in others {
                let (_, o, e, _) = finish(other, within: 0)
                said.append(other.label + ": " + Self.tail(o + e))
            }
            throw BenchError.stageFailed(bench: "gpu", stage: child.label + (killed ? " (killed after \(Int(seconds + 300)) s)" : ""),
                                         status: status, said: said.joined(separator: "; "))
        }
        return out.split(separator: "\n").compactMap { StatsLine($0) }.filter { $0.role != nil }
    }

    /// The last 3 lines of what a process said (a Python traceback's last is its exception), as one.
    static func tail(_ text: String) -> String {
        text.split(separator: "\n").suffix(3).joined(separator: " ")
    }

    /// One process (which may start its own): its lines.
    func single(_ arguments: [String], label: String) throws -> [StatsLine] {
        let run = ScratchDirectory(prefix: "framesrv-bench-gpu")
        return try withExtendedLifetime(run) { try lines(of: start(arguments, label: label, directory: run.path)) }
    }

    /// A producer and a consumer process of one stream in a fresh directory: the lines of both
    /// (the first of them to fail is reported, the other killed).
    func pair(producer: [String], consumer: [String], program: String? = nil, environment: [String: String] = [:]) throws -> [StatsLine] {
        let run = ScratchDirectory(prefix: "framesrv-bench-gpu")
        defer { withExtendedLifetime(run) {} }
        let c = try start(consumer, label: "the \(consumer[0]) process", directory: run.path, program: program, environment: environment)
        let p: Child
        do {
            p = try start(producer, label: "the \(producer[0]) process", directory: run.path, program: program, environment: environment)
        } catch {
            c.kill()
            _ = c.finishWithErrors()
            throw error
        }
        let deadline = monotonicNanos() + UInt64((seconds + 300) * 1e9)
        while [c, p].contains(where: \.isRunning), ![c, p].contains(where: Self.failed), monotonicNanos() < deadline { usleep(10_000) }
        let (first, second) = Self.failed(p) ? (p, c) : (c, p)
        return try lines(of: first, besides: [second]) + lines(of: second)
    }

    /// Whether the child has exited with a status other than 0 (or by a signal).
    static func failed(_ child: Child) -> Bool {
        (child.process.terminationStatus ?? 0) != 0
    }
}
