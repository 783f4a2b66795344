import FoundationEssentials
import FrameProcess
import FrameServer
import Glibc

/// The peers of `bench transport`: a pipe, iceoryx2 (Python publisher and subscribers, through
/// peers/iceoryx2_pair.py) and GStreamer's shmsink/shmsrc; each one found or said absent.
extension Bench {
    /// What this machine has of the peers and of the Python consumer.
    final class TransportPeers {
        /// The venv python with the framesrv package, or why there is none.
        let python: Result<String, BenchError>
        let iceoryx2: Iceoryx2Peer?
        let iceoryx2Absent: String
        let gstreamer: GStreamerPeer?

        init(python given: String?) {
            do { python = .success(try venvPython(given)) } catch {
                python = .failure(error as? BenchError ?? .noPython(status: -1, said: "\(error)"))
            }
            let script = repositoryRoot + "/Sources/FrameBench/peers/iceoryx2_pair.py"
            if case .success(let path) = python, let version = Self.moduleVersion(python: path, module: "iceoryx2"),
               FileManager.default.fileExists(atPath: script) {
                iceoryx2 = Iceoryx2Peer(python: path, script: script, version: version)
                iceoryx2Absent = ""
            } else {
                iceoryx2 = nil
                iceoryx2Absent = FileManager.default.fileExists(atPath: script)
                    ? "iceoryx2: not installed (scripts/setup --bench)" : "iceoryx2: no \(script) (run from a framesrv checkout)"
            }
            gstreamer = GStreamerPeer.find()
        }

        /// The version of `module` that `python` imports, nil when it cannot import it.
        static func moduleVersion(python: String, module: String) -> String? {
            let code = "import \(module), importlib.metadata as m; print(m.version('\(module)'))"
            guard let child = try? Child(["-c", code], label: "python", executable: python, captureErrors: true) else { return nil }
            let (status, out, _) = child.finishWithErrors()
            return status == 0 ? out.trimmed : nil
        }

        /// One line per peer: what it is, or why it is absent.
        func describe() -> [String] {
            var lines = ["framesrv: a Swift producer in this process, 8 slots, each painted once; consumers 'framesrv sink --null --lossless'",
                         "pipe: each frame's bytes written to 'cat > /dev/null' (a copy in and a copy out per frame)"]
            if let i = iceoryx2 {
                lines.append("iceoryx2 \(i.version): a Python publisher and Python subscriber processes (\(i.script)): Slice[u8] of the frame "
                             + "size, nothing written, subscriber buffer 8, safe overflow off, RetryUntilDelivered, an event notified after "
                             + "every send, a blocking Listener; a start-up handshake (each subscriber past its first receive) so no frame is lost")
            } else {
                lines.append(iceoryx2Absent)
            }
            lines.append(gstreamer != nil
                ? "GStreamer: 'videotestsrc pattern=solid-color ! shmsink shm-size=32 frames' -> 'shmsrc ! fakesink' processes (sync=false, "
                  + "enable-last-sample=false: with a smaller area or the last sample kept, 1.22 stalls here now and then); videotestsrc "
                  + "paints the solid frame once and copies that cached frame into each buffer (a memcpy per frame, which framesrv "
                  + "does not do); frames/s from the receiver's PLAYING to its EOS after N buffers"
                : "GStreamer: gst-launch-1.0 with shmsink not installed (scripts/setup --bench)")
            if case .failure(let error) = python { lines.append("python: not available: \(error)") }
            return lines
        }
    }

    /// The peer that copies: `budget`'s frames of `bytes` written through a pipe to a reader
    /// process; frames/s from the first write to the last.
    func pipePeer(bytes: Int, budget: Budget) throws -> Double {
        let reader = try Child(["-c", "cat > /dev/null"], label: "pipe reader", executable: "/bin/sh", captureOutput: false, feedInput: true)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes, alignment: 64)
        defer { buffer.deallocate() }
        memset(buffer.baseAddress!, 0x80, bytes)
        let fd = reader.input
        let start = monotonicNanos()
        var last = start, frames = 0
        while budget.frames.map({ frames < $0 }) ?? (last - start < UInt64(budget.seconds * 1e9)) {
            do { try writeAll(fd, UnsafeRawBufferPointer(buffer)) } catch {
                throw SystemCallError("write to pipe", path: nil, error)
            }
            frames += 1
            last = monotonicNanos()
        }
        reader.closeInput()
        _ = reader.finish()
        return Double(frames) / max(Double(last - start) / 1e9, 1e-9)
    }
}

/// Waits up to `seconds` for `child` to exit, kills it if it has not, and returns what it said.
func finish(_ child: Child, within seconds: Double) -> (status: Int32, output: String, errors: String, killed: Bool) {
    let deadline = monotonicNanos() + UInt64(seconds * 1e9)
    while child.isRunning, monotonicNanos() < deadline { usleep(10_000) }
    let killed = child.isRunning
    child.kill()
    let (status, out, err) = child.finishWithErrors()
    return (status, out, err, killed)
}

/// iceoryx2's Python publisher and subscribers, run by peers/iceoryx2_pair.py (one JSON
/// line per run). Counts the frames each subscriber received; a run that lost any is noted.
final class Iceoryx2Peer {
    let python: String, script: String, version: String
    private(set) var runs = 0, framesSent = 0
    private(set) var losses: [String] = [], failures: [String] = []

    init(python: String, script: String, version: String) {
        self.python = python; self.script = script; self.version = version
    }

    private func run(_ mode: String, _ arguments: [String]) -> StatsLine? {
        guard let child = try? Child([script, mode] + arguments, label: "iceoryx2_pair.py", executable: python, captureErrors: true) else {
            failures.append("\(mode): cannot start \(python)")
            return nil
        }
        let (status, out, err, killed) = finish(child, within: 120)
        guard !killed, status == 0 || status == 1, let line = out.split(separator: "\n").last,
              let json = StatsLine(line), let sent = json.sent, let received = json.receivedPerSubscriber else {
            failures.append("\(mode) \(arguments.joined(separator: " ")) (\(killed ? "killed after 120 s" : "status \(status)")): "
                            + (out + err).split(separator: "\n").suffix(2).joined(separator: " "))
            return nil
        }
        runs += 1
        framesSent += sent
        if received.contains(where: { $0 != sent }) {
            losses.append("\(mode) \(arguments.joined(separator: " ")): received \(received.map(String.init).joined(separator: ", ")) of \(sent)")
        }
        return json
    }

    private func budgetArguments(_ budget: TransportBudget) -> [String] {
        budget.frames.map { ["--frames", String($0)] } ?? ["--seconds", String(budget.seconds)]
    }

    /// Frames/s (first send to last) of a publisher into `subscribers` subscriber processes;
    /// NaN when the run failed (said in `countLine`: the peer's failure does not stop the bench).
    func throughput(bytes: Int, subscribers: Int, budget: TransportBudget) -> Double {
        let json = run("throughput", ["--bytes", String(bytes), "--subscribers", String(subscribers)] + budgetArguments(budget))
        return json?.fps ?? .nan
    }

    /// Publish -> receive p50 and p99 in us at `rate` frames/s; the subscriber waits on its
    /// Listener, or with `spin` calls receive() in a loop (busy-poll). NaN when the run failed.
    /// The first `warmup` frames are left out of the percentiles.
    func latency(bytes: Int, rate: Double, spin: Bool, warmup: Int, budget: TransportBudget) -> (Double, Double) {
        let json = run("latency", ["--bytes", String(bytes), "--rate", String(rate), "--wait", spin ? "spin" : "listener",
                                   "--warmup", String(warmup)] + budgetArguments(budget))
        return (json?.p50 ?? .nan, json?.p99 ?? .nan)
    }

    /// The frame count line the issue asks for: every frame received, or the runs that lost
    /// some; and the runs that failed.
    var countLine: String {
        (losses.isEmpty ? "iceoryx2 so far: every subscriber received every frame sent, in all \(runs) runs (\(framesSent) frames sent)"
            : "iceoryx2 so far: LOST frames in \(losses.count) of \(runs) runs: " + losses.joined(separator: "; "))
            + (failures.isEmpty ? "" : "; \(failures.count) runs FAILED: " + failures.joined(separator: "; "))
    }
}

/// GStreamer's shared-memory transport: `videotestsrc ! shmsink` into `shmsrc ! fakesink`,
/// two gst-launch-1.0 processes.
final class GStreamerPeer {
    let launch: String
    /// Frames per run at each size when the budget is in seconds (from a short first run).
    private var framesPerRun: [String: Int] = [:]

    private init(launch: String) { self.launch = launch }

    /// gst-launch-1.0 on PATH, with the shm elements (gst-inspect-1.0 shmsink succeeds).
    static func find() -> GStreamerPeer? {
        let dirs = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin").split(separator: ":").map(String.init)
        guard let dir = dirs.first(where: { FileManager.default.isExecutableFile(atPath: $0 + "/gst-launch-1.0") }),
              let inspect = try? Child(["shmsink"], label: "gst-inspect-1.0", executable: dir + "/gst-inspect-1.0", captureErrors: true),
              inspect.finishWithErrors().status == 0 else { return nil }
        return GStreamerPeer(launch: dir + "/gst-launch-1.0")
    }

    /// Runs that failed (a GStreamer stall is the peer's, not a reason to stop the bench).
    private(set) var failures: [String] = []

    /// Frames/s of one run at `size`: `budget.frames`, or about `budget.seconds` worth; NaN
    /// (and a line in `failures`) when the run failed.
    func throughput(_ size: Bench.BenchSize, budget: TransportBudget) -> Double {
        do {
            if let frames = budget.frames { return try run(size, frames: frames) }
            if framesPerRun[size.label] == nil {
                let probe = try run(size, frames: 30)
                framesPerRun[size.label] = max(30, Int(probe * budget.seconds))
            }
            return try run(size, frames: framesPerRun[size.label]!)
        } catch {
            failures.append("\(size.label): \(error)")
            return .nan
        }
    }

    private func run(_ size: Bench.BenchSize, frames: Int) throws -> Double {
        let scratch = ScratchDirectory(prefix: "framesrv-bench-gst")
        let socket = scratch.path + "/shm.sock"
        let caps = "video/x-raw,format=I420,width=\(size.width),height=\(size.height),framerate=30/1"
        let sender = try Child(["-q", "videotestsrc", "num-buffers=\(frames)", "pattern=solid-color", "!", caps, "!", "shmsink",
                                "socket-path=\(socket)", "shm-size=\(size.bytes * 32)", "wait-for-connection=true", "sync=false"],
                               label: "gst sender", executable: launch, captureErrors: true)
        defer { _ = finish(sender, within: 5) }
        let deadline = monotonicNanos() + 10_000_000_000
        while !FileManager.default.fileExists(atPath: socket), sender.isRunning, monotonicNanos() < deadline { usleep(5_000) }
        let receiver = try Child(["shmsrc", "socket-path=\(socket)", "is-live=true", "num-buffers=\(frames)", "!", caps, "!",
                                  "fakesink", "sync=false", "enable-last-sample=false"], label: "gst receiver", executable: launch,
                                 captureErrors: true)
        let (status, out, err, killed) = finish(receiver, within: 120)
        guard !killed, status == 0, let seconds = Self.executionSeconds(out), seconds > 0 else {
            let said = (out + err).split(separator: "\n").filter { $0.hasPrefix("ERROR") }.joined(separator: " ")
            throw BenchError.peerFailed("shmsrc did not receive \(frames) frames (\(killed ? "stalled, killed after 120 s" : "status \(status)")) \(said)")
        }
        return Double(frames) / seconds
    }

    /// The seconds of gst-launch's "Execution ended after H:MM:SS.fraction" line.
    static func executionSeconds(_ output: String) -> Double? {
        guard let line = output.split(separator: "\n").last(where: { $0.contains("Execution ended after ") }),
              let text = line.split(separator: " ").last else { return nil }
        let parts = text.split(separator: ":").compactMap { Double($0) }
        guard parts.count == 3 else { return nil }
        return parts[0] * 3600 + parts[1] * 60 + parts[2]
    }
}
