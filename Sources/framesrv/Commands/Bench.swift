import Foundation
import FrameMedia
import FrameServer

/// `framesrv bench`: benchmarks that print figures next to a peer measured in the same run.
enum BenchCommand: Command {
    static let name = "bench"
    static let summary = "measure: 'bench transport' (latency, fan-out, versus a pipe), 'bench decode' and 'bench chain' (versus ffmpeg), 'bench clients' (Swift, C, Python)"
    static let help = """
    usage: framesrv bench transport [--frames N] [--quick]
           framesrv bench decode [-i FILE] [--threads T]
           framesrv bench chain [-i FILE] [--threads T]
           framesrv bench clients [--seconds S] [--quick] [--python PATH] [--c-tools DIR]

    transport: announce-to-acquire latency p50/p99 through the capture clock in the frame
    header, for 64x64 and 3840x2160 yuv420p frames (one lossless consumer process, paced
    at 200 fps and at 5000 fps); fan-out throughput with 1, 4 and 8 lossless consumer processes (64x64,
    --rate max); and the same frames pushed through a pipe to one reader process, the peer
    that copies. Every consumer is a separate process.
      --frames N   frames per fan-out run (default 20000; latency runs use N/20)
      --quick      a short run (2000 frames) for smoke tests

    decode: frames per second of 'framesrv produce -i FILE' (a child process, --wait-for 1)
    into the pool with one lossless null sink process attached, decoding straight into the
    slots (zero copy) and with --copy (one copy per frame), next to 'ffmpeg -threads T -i FILE
    -f null -' on the same file, each timed from start to exit (best of 3 interleaved runs),
    and the ratios. Each framesrv line says how many frames took which path. Without -i, a 10-second 1080p H.264 clip (testsrc2, libx264 -preset veryfast)
    is generated in a scratch directory first.
      -i FILE      the file to decode
      --threads T  decoder threads for both (default 0: FFmpeg decides)

    chain: the four-process chain 'produce -i FILE' -> 'filter --vf gblur=sigma=4' ->
    'filter --vf format=rgb24' -> 'sink --framemd5 FILE' (each a process; the stages run on
    different cores at once) next to 'ffmpeg -threads T -filter_threads T -i FILE -vf
    gblur=sigma=4,format=rgb24 -f framemd5' doing the same work in one process: wall time
    from start to exit (best of 2 runs), the ratio, and whether both framemd5 files are
    identical. Without -i, a 4-second 1080p H.264 clip is generated first.
      -i FILE      the input
      --threads T  threads per stage: each decoder and filter graph, and ffmpeg's (default 1)

    clients: frames/s at 1920x1080 yuv420p of a Swift ('sink --null'), a C (libframesrv's
    framesrv-consume) and a Python (framesrv.Consumer, every frame's planes as numpy views)
    lossless consumer process of the same Swift producer (--rate max, each slot painted once),
    one after the other in the same run, with the ratios to the Swift consumer; a Python
    producer's frames/s (reserve -> publish into a Swift null sink) without and with a numpy
    fill of every plane; and the proof of zero copy: the address of the Python consumer's numpy
    array, inside the pool's mapping (from /proc/self/maps).
      --seconds S    each measurement's length (default 3; --quick: 1)
      --python PATH  a python with the framesrv package (default: what scripts/python-env prints)
      --c-tools DIR  the directory of framesrv-consume (default: clients/c/build)
    """

    static func run(_ o: BenchOptions) throws -> Int32 {
        switch o.benchmark {
        case .decode: try decode(input: o.input, threads: o.threads)
        case .chain: try chain(input: o.input, threads: o.threads)
        case .transport(let frames): try transport(frames: frames)
        case .clients(let seconds): try clients(seconds: seconds, python: o.python, cTools: o.cTools)
        }
        return 0
    }

    struct RunResult { var fps: Double; var p50: Double; var p99: Double; var corrupt: Int }

    /// One producer in this process, `consumers` sink processes; returns throughput and the
    /// first consumer's latency percentiles.
    static func run(size: (Int, Int), frames: Int, consumers: Int, rate: Double?) throws -> RunResult {
        let scratch = ScratchDirectory(prefix: "framesrv-bench")
        let dir = try RuntimeDirectory(path: scratch.path)
        let env = ["FRAMESRV_DIR": scratch.path]
        var options = ProducerOptions()
        options.slots = 8
        options.nominalRate = rate.flatMap { Rational(framesPerSecond: $0) }
        let producer = try Producer(stream: "bench", options: options, directory: dir)
        let sinks = try (0..<consumers).map { i in
            try Child(["sink", "--in", "bench", "--null", "--lossless", "--stats-json", "--quiet", "--name", "bench-\(i)"],
                      label: "sink \(i)", environment: env)
        }
        guard producer.waitForLosslessConsumers(consumers, timeoutSeconds: 30) else {
            throw FrameServerError.invalidArgument("bench: consumers did not attach within 30 s")
        }
        var plan = PatternPlan(pixelFormat: .yuv420p, width: size.0, height: size.1, rate: options.nominalRate, frames: frames)
        // Paint each slot once: the benchmark measures the transport, not the painter.
        plan.paintOnce = true
        let start = monotonicNanos()
        try PatternPublisher.run(plan, into: producer) { false }
        producer.finish()
        var result = RunResult(fps: 0, p50: 0, p99: 0, corrupt: 0)
        for (i, sink) in sinks.enumerated() {
            let (status, out) = sink.finish()
            guard status == 0, let line = out.split(separator: "\n").last,
                  let json = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else {
                throw FrameServerError.invalidArgument("bench: consumer \(i) failed (status \(status)): \(out)")
            }
            if (json["received"] as? Int) != frames {
                throw FrameServerError.invalidArgument("bench: consumer \(i) received \(json["received"] ?? 0) of \(frames) frames")
            }
            if i == 0 {
                result.p50 = json["latency_p50_us"] as? Double ?? 0
                result.p99 = json["latency_p99_us"] as? Double ?? 0
            }
        }
        let seconds = Double(monotonicNanos() - start) / 1e9
        result.fps = Double(frames) / seconds
        producer.close()
        return result
    }

    /// The peer: `frames` frames of `bytes` each written through a pipe to a reader process.
    static func pipePeer(bytes: Int, frames: Int) throws -> Double {
        let reader = Process()
        reader.executableURL = URL(fileURLWithPath: "/bin/sh")
        reader.arguments = ["-c", "cat > /dev/null"]
        let pipe = Pipe()
        reader.standardInput = pipe
        try reader.run()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes, alignment: 64)
        defer { buffer.deallocate() }
        memset(buffer.baseAddress!, 0x80, bytes)
        let fd = pipe.fileHandleForWriting.fileDescriptor
        let start = monotonicNanos()
        for _ in 0..<frames {
            do { try writeAll(fd, UnsafeRawBufferPointer(buffer)) } catch {
                throw FrameServerError.system("write to pipe", path: nil, error)
            }
        }
        try pipe.fileHandleForWriting.close()
        reader.waitUntilExit()
        return Double(frames) / (Double(monotonicNanos() - start) / 1e9)
    }

    static func transport(frames: Int) throws {
        print("framesrv bench transport: \(ProcessInfo.processInfo.activeProcessorCount) cores, every consumer a separate process")
        let latencyFrames = max(100, frames / 20)
        // Two paces: at 200 fps the consumer sleeps between frames, so the figure includes the
        // kernel waking an idle process; at 5000 fps it is the warm pipeline.
        for rate in [200.0, 5000.0] {
            print("latency, publish -> acquire by a lossless consumer process (\(latencyFrames) frames at \(formatDouble(rate, 0)) fps, yuv420p):")
            let small = try run(size: (64, 64), frames: latencyFrames, consumers: 1, rate: rate)
            print("  64x64       p50 \(formatDouble(small.p50)) us   p99 \(formatDouble(small.p99)) us")
            let big = try run(size: (3840, 2160), frames: latencyFrames, consumers: 1, rate: rate)
            print("  3840x2160   p50 \(formatDouble(big.p50)) us   p99 \(formatDouble(big.p99)) us   "
                  + "(4K/64x64 p50 ratio \(formatDouble(big.p50 / max(small.p50, 0.001), 2)): zero copy, latency does not grow with size)")
        }

        print("fan-out throughput (64x64 yuv420p, --rate max, \(frames) frames, every consumer gets every frame):")
        var fanout: [Int: Double] = [:]
        for n in [1, 4, 8] {
            let r = try run(size: (64, 64), frames: frames, consumers: n, rate: nil)
            fanout[n] = r.fps
            print("  \(n) consumer\(n == 1 ? " " : "s") \(formatDouble(r.fps, 0).leftPadding(9)) frames/s")
        }

        print("peer: the same frames through a pipe to one reader process (a copy per frame):")
        let smallBytes = FrameFormat(.yuv420p, width: 64, height: 64).slotBytes - FrameFormat.headerSize
        let pipeSmall = try pipePeer(bytes: smallBytes, frames: frames)
        print("  64x64       framesrv \(formatDouble(fanout[1] ?? 0, 0)) fps, pipe \(formatDouble(pipeSmall, 0)) fps, "
              + "ratio \(formatDouble((fanout[1] ?? 0) / pipeSmall, 2))")
        let bigFrames = max(100, min(500, frames / 4))
        let bigFramesrv = try run(size: (3840, 2160), frames: bigFrames, consumers: 1, rate: nil)
        let bigBytes = 3840 * 2160 * 3 / 2
        let pipeBig = try pipePeer(bytes: bigBytes, frames: bigFrames)
        print("  3840x2160   framesrv \(formatDouble(bigFramesrv.fps, 0)) fps, pipe \(formatDouble(pipeBig, 0)) fps, "
              + "ratio \(formatDouble(bigFramesrv.fps / pipeBig, 2)) (\(bigFrames) frames)")
    }
}
