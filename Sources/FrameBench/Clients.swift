import FoundationEssentials
import FrameMedia
import FrameProcess
import FrameServer
import Glibc

/// `framesrv bench clients`: frames/s of a Swift, a C and a Python consumer process of one
/// Swift producer, a Python producer with and without a numpy fill, and the proof that the
/// Python consumer's numpy arrays are the shared pool itself (zero copy), in one run.
extension Bench {
    /// Where the C tools and the Python with the framesrv package are.
    struct ClientPrograms {
        var python: String
        var cTools: String
    }

    static let clientWidth = 1920, clientHeight = 1080

    /// The Python side of the benchmark, run by the venv's python:
    ///   consume NAME: iterates a lossless Consumer, takes every frame's planes (numpy views)
    ///     and releases it; prints the first frame's zero-copy proof and `py: received N frames`.
    ///   produce NAME SECONDS fill|nofill: reserve -> (numpy fill of every plane) -> publish for
    ///     SECONDS once one lossless consumer is attached; prints `py: published N frames in S s`.
    static let clientScript = """
        import sys, time
        import numpy as np
        import framesrv

        def pool_mapping(address):
            with open("/proc/self/maps") as maps:
                for line in maps:
                    fields = line.split()
                    lo, hi = (int(x, 16) for x in fields[0].split("-"))
                    if lo <= address < hi:
                        return lo, hi, fields[5] if len(fields) > 5 else "(anonymous)"
            return None

        def consume(name):
            n = 0
            with framesrv.Consumer(name, mode="lossless") as consumer:
                for frame in consumer:
                    planes = frame.planes
                    if n == 0:
                        address = planes[0].__array_interface__["data"][0]
                        lo, hi, path = pool_mapping(address) or (0, 0, "no mapping")
                        inside = "pool" in path and lo <= address and address + planes[0].nbytes <= hi
                        print(f"zero-copy: plane 0 data 0x{address:x} ({planes[0].nbytes} bytes) in mapping "
                              f"0x{lo:x}-0x{hi:x} {path}: {'inside the pool' if inside else 'NOT in the pool'}", flush=True)
                    n += 1
                    del planes
                    frame.release()
            print(f"py: received {n} frames")

        def produce(name, seconds, fill):
            producer = framesrv.Producer(name, 1920, 1080, "yuv420p", rate=None, slots=8)
            producer.wait_for_consumers(1, timeout=30)
            n, start = 0, time.monotonic()
            while time.monotonic() - start < seconds:
                with producer.reserve() as frame:
                    if fill:
                        for plane in frame.planes:
                            plane.fill(n & 255)
                n += 1
            elapsed = time.monotonic() - start
            producer.close()
            print(f"py: published {n} frames in {elapsed:.3f} s")

        if sys.argv[1] == "consume":
            consume(sys.argv[2])
        else:
            produce(sys.argv[2], float(sys.argv[3]), sys.argv[4] == "fill")
        """

    /// `clientScript` as a file in `scratch`: its path.
    static func writeClientScript(in scratch: ScratchDirectory) throws -> String {
        let script = scratch.path + "/bench_clients.py"
        try Data(clientScript.utf8).write(to: URL(fileURLWithPath: script))
        return script
    }

    func clients(seconds: Double, python: String?, cTools: String?) throws {
        let programs = try locateClientPrograms(python: python, cTools: cTools)
        let scratch = ScratchDirectory(prefix: "framesrv-bench-clients")
        defer { withExtendedLifetime(scratch) {} }   // its files are used to the end of the scope
        let script = try Self.writeClientScript(in: scratch)
        print("framesrv bench clients: \(Self.clientWidth)x\(Self.clientHeight) yuv420p (3,110,400 bytes a frame), one lossless consumer "
              + "process at a time, about \(formatDouble(seconds, 1)) s each, \(ProcessInfo.processInfo.activeProcessorCount) cores")
        print("  python: \(programs.python)   C tools: \(programs.cTools)")
        print("consumers of one Swift producer (in this process, --rate max, each slot painted once):")
        let consumers: [(String, [String], String)] = [
            ("Swift (framesrv sink --null)", ["sink", "--in", "bench", "--null", "--lossless", "--quiet", "--wait", "60"], selfExecutable),
            ("C (framesrv-consume)", ["--in", "bench", "--wait", "60"], programs.cTools + "/framesrv-consume"),
            ("Python (Consumer, frame.planes)", [script, "consume", "bench"], programs.python),
        ]
        var rows: [(String, Double)] = []
        var zeroCopy = ""
        for (label, args, executable) in consumers {
            let (fps, output) = try consumerRun(args, executable: executable, label: label, seconds: seconds)
            rows.append((label, fps))
            if let line = output.split(separator: "\n").first(where: { $0.hasPrefix("zero-copy:") }) { zeroCopy = String(line) }
        }
        let swiftFPS = rows[0].1
        for (label, fps) in rows {
            print("  \(label.padded(to: 34)) \(formatDouble(fps, 0).leftPadding(8)) frames/s   "
                  + "ratio to Swift \(formatDouble(fps / max(swiftFPS, 1e-9), 2))")
        }
        print("Python producer (Producer.reserve -> publish) into a lossless Swift null sink:")
        for (label, fill) in [("reserve + publish only", false), ("+ numpy fill of every plane", true)] {
            let fps = try pythonProducerRun(programs.python, script: script, fill: fill, seconds: seconds)
            print("  \(label.padded(to: 34)) \(formatDouble(fps, 0).leftPadding(8)) frames/s   "
                  + "ratio to the Swift consumer \(formatDouble(fps / max(swiftFPS, 1e-9), 2))")
        }
        print(zeroCopy.isEmpty ? "zero-copy: the Python consumer printed no proof" : zeroCopy)
    }

    /// The venv python (--python, else scripts/python-env next to this executable's repository)
    /// and the C tools' directory (--c-tools, else clients/c/build).
    func locateClientPrograms(python: String?, cTools: String?) throws -> ClientPrograms {
        let tools = cTools ?? repositoryRoot + "/clients/c/build"
        guard FileManager.default.isExecutableFile(atPath: tools + "/framesrv-consume") else {
            throw BenchError.missingProgram(tools + "/framesrv-consume", remedy: "run 'make -C clients/c' or give --c-tools DIR")
        }
        return ClientPrograms(python: try venvPython(python), cTools: tools)
    }

    /// A Swift producer in this process publishing for `seconds` at 1080p into one lossless
    /// consumer process: frames/s from the first frame to the consumer's exit, once it has
    /// reported receiving every frame published.
    func consumerRun(_ args: [String], executable: String, label: String, seconds: Double) throws -> (Double, String) {
        let scratch = ScratchDirectory(prefix: "framesrv-bench")
        var options = ProducerOptions()
        options.slots = 8
        let producer = try Producer(stream: "bench", options: options, directory: try RuntimeDirectory(path: scratch.path))
        defer { producer.close() }
        let consumer = try Child(args + (executable == selfExecutable ? ["--stats-json"] : []), label: label,
                                 executable: executable, environment: ["FRAMESRV_DIR": scratch.path], captureErrors: true)
        guard producer.waitForLosslessConsumers(1, timeoutSeconds: 30) else {
            consumer.kill()
            let (_, out, err) = consumer.finishWithErrors()
            throw BenchError.notAttached(bench: "clients", who: "the \(label) consumer", seconds: 30, said: out + err)
        }
        var plan = PatternPlan(pixelFormat: .yuv420p, width: Self.clientWidth, height: Self.clientHeight, rate: nil, frames: nil)
        plan.paintOnce = true
        let start = monotonicNanos()
        let deadline = start + UInt64(seconds * 1e9)
        _ = try PatternPublisher.run(plan, into: producer) { monotonicNanos() >= deadline }
        producer.finish()
        let (status, out, err) = consumer.finishWithErrors()
        let elapsed = Double(monotonicNanos() - start) / 1e9
        let published = Int(producer.publishedCount)
        guard status == 0, receivedCount(out) == published else {
            throw BenchError.incompleteRun(bench: "clients", what: "the \(label) consumer (status \(status)) did not receive the "
                                             + "\(published) frames published", said: out + err)
        }
        return (Double(published) / elapsed, out)
    }

    /// The frames a consumer says it received: `c: received N`, `py: received N` or the sink's JSON.
    func receivedCount(_ output: String) -> Int? {
        for line in output.split(separator: "\n").reversed() {
            if line.hasPrefix("c: received ") || line.hasPrefix("py: received ") {
                return line.split(separator: " ").dropFirst(2).first.flatMap { Int($0) }
            }
            if line.hasPrefix("{"), let json = StatsLine(line) { return json.received }
        }
        return nil
    }

    /// The Python producer for `seconds` into a lossless Swift null sink: frames/s as the
    /// script timed it (from its first reserve, after the sink was admitted).
    func pythonProducerRun(_ python: String, script: String, fill: Bool, seconds: Double) throws -> Double {
        let scratch = ScratchDirectory(prefix: "framesrv-bench")
        let env = ["FRAMESRV_DIR": scratch.path]
        let producer = try Child([script, "produce", "bench", String(seconds), fill ? "fill" : "nofill"], label: "python producer",
                                 executable: python, environment: env, captureErrors: true)
        let sink = try Child(["sink", "--in", "bench", "--null", "--lossless", "--stats-json", "--quiet", "--wait", "60"],
                             label: "sink", environment: env, captureErrors: true)
        let (status, out, err) = producer.finishWithErrors()
        let (sinkStatus, sinkOut, sinkErr) = sink.finishWithErrors()
        let fields = out.split(separator: "\n").last { $0.hasPrefix("py: published ") }?.split(separator: " ") ?? []
        guard status == 0, sinkStatus == 0, fields.count >= 6, let frames = Double(fields[2]), let elapsed = Double(fields[5]),
              elapsed > 0, receivedCount(sinkOut) == Int(frames) else {
            throw BenchError.stageFailed(bench: "clients", stage: "the Python producer (status \(status)) or its sink",
                                          status: sinkStatus, said: out + err + sinkOut + sinkErr)
        }
        return frames / elapsed
    }
}

/// The repository this executable was built in: the nearest directory above it with
/// scripts/python-env ("/" when there is none).
let repositoryRoot: String = {
    var dir = URL(fileURLWithPath: selfExecutable).deletingLastPathComponent()
    while dir.path != "/", !FileManager.default.isExecutableFile(atPath: dir.path + "/scripts/python-env") {
        dir = dir.deletingLastPathComponent()
    }
    return dir.path
}()

/// `python` if given, else the venv's python that scripts/python-env prints (made up to date).
func venvPython(_ python: String?) throws -> String {
    if let python { return python }
    let env = try Child([], label: "scripts/python-env", executable: repositoryRoot + "/scripts/python-env", captureErrors: true)
    let (status, out, err) = env.finishWithErrors()
    let path = out.trimmed
    guard status == 0, FileManager.default.isExecutableFile(atPath: path) else {
        throw BenchError.noPython(status: status, said: err)
    }
    return path
}
