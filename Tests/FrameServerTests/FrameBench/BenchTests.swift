import Foundation
@testable import FrameBench
import Testing

/// `framesrv bench transport --quick` runs end to end and prints every section's rows. No
/// figure is asserted (they are the machine's): only the structure, and that every run
/// delivered every frame (a framesrv run whose consumer missed a frame fails the command;
/// iceoryx2's runs are counted in its own line).
@Suite(.serialized) struct BenchTests {
    @Test("framesrv bench transport --quick prints every section, each run delivering every frame", .timeLimit(.minutes(3)))
    func benchTransportQuick() throws {
        let python = try ClientTools.python()
        let scratch = try Scratch()
        let bench = try scratch.start(["bench", "transport", "--quick", "--python", python])
        #expect(bench.wait(timeout: 170) == 0, "bench transport: \(bench.stdout)\n\(bench.stderr)")
        let lines = bench.stdout.split(separator: "\n").map(String.init)
        for section in ["1-2. transport alone", "3. fan-out", "4. Python at 1920x1080", "5. wake latency", "6. idle"] {
            #expect(lines.contains { $0.hasPrefix(section) }, "no section '\(section)' in:\n\(bench.stdout)")
        }
        // Section 1-2: a framesrv figure (a whole number) at each size.
        for size in ["64x64", "1920x1080", "3840x2160"] {
            let row = lines.first { $0.hasPrefix("  \(size) ") }?.split(separator: " ")
            #expect(row.map { $0.count >= 2 && Int($0[1]) != nil } ?? false, "no framesrv figure at \(size) in:\n\(bench.stdout)")
        }
        #expect(lines.contains { $0.contains("framesrv 4K/1080p") && $0.contains("4K/64x64") })
        // Issue 27's Python rows, each beside iceoryx2's: four Python stages, a consumer reading
        // frame.seq and one taking planes and publish_ns, a producer.
        for row in ["framesrv, 4 x 'sink --null --lossless'", "framesrv, 4 x 'python -m framesrv consume --touch'",
                    "framesrv: Swift producer, 'python -m framesrv consume' (frame.seq)", "framesrv: Swift producer, 'consume --touch'",
                    "framesrv: Python producer (reserve -> publish)", "64x64", "1920x1080", "producer with no consumer",
                    "consumer with no frames"] {
            #expect(lines.contains { $0.hasPrefix("  " + row) }, "no '\(row)' row in:\n\(bench.stdout)")
        }
        // Each peer is measured or said absent; iceoryx2 never lost a frame (its start-up handshake).
        #expect(lines.contains { $0.contains("iceoryx2") && ($0.contains("not installed") || $0.contains("iceoryx2 so far")) })
        #expect(!lines.contains { $0.contains("LOST frames") }, "iceoryx2 lost frames:\n\(bench.stdout)")
        #expect(lines.contains { $0.hasPrefix("  GStreamer") || $0.hasPrefix("  GStreamer: not installed") })
    }

    @Test("framesrv bench record --quick prints every figure and ratio, each run recording and replaying every frame", .timeLimit(.minutes(3)))
    func benchRecordQuick() throws {
        let scratch = try Scratch()
        let bench = try scratch.start(["bench", "record", "--quick"])
        #expect(bench.wait(timeout: 170) == 0, "bench record: \(bench.stdout)\n\(bench.stderr)")
        let lines = bench.stdout.split(separator: "\n").map(String.init)
        func figure(_ prefix: String, _ unit: String) -> Bool {
            lines.contains { $0.hasPrefix(prefix) && $0.hasSuffix(unit) && $0.contains("30 frames in ") }
        }
        for section in ["1. recording throughput", "2. replay --rate max", "3. seek latency"] {
            #expect(lines.contains { $0.hasPrefix(section) }, "no section '\(section)' in:\n\(bench.stdout)")
        }
        for row in ["  framesrv record --codec ffv1:", "  ffmpeg -c:v ffv1 ", "  framesrv record --codec raw:", "  ffmpeg -c:v rawvideo:",
                    "  framesrv replay ffv1.nut", "  framesrv replay raw.nut", "  ffmpeg -i ffv1.nut", "  ffmpeg -i raw.nut"] {
            #expect(figure(row, " frames/s"), "no figure '\(row)' in:\n\(bench.stdout)")
        }
        #expect(lines.contains { $0.hasPrefix("  ratio framesrv/ffmpeg frames/s: ffv1 ") && $0.contains(", raw ") })
        #expect(lines.contains { $0.hasPrefix("  ratio framesrv replay/ffmpeg decode frames/s: ffv1 ") })
        for row in ["  replay ffv1.nut, paused", "  replay ffv1.nut, playing", "  produce -i H.264"] {
            #expect(lines.contains { $0.hasPrefix(row) && $0.contains(": p50 ") && $0.hasSuffix(" ms") }, "no '\(row)' in:\n\(bench.stdout)")
        }
    }

    @Test("framesrv bench audio --quick prints its figures next to ffmpeg's and a pipe's", .timeLimit(.minutes(3)))
    func benchAudioQuick() throws {
        let scratch = try Scratch()
        let bench = try scratch.start(["bench", "audio", "--quick"])
        #expect(bench.wait(timeout: 170) == 0, "bench audio: \(bench.stdout)\n\(bench.stderr)")
        let lines = bench.stdout.split(separator: "\n").map(String.init)
        // One minute of 1024-sample frames at 48 kHz: 2813 frames (and AAC's priming frame) reach the sink.
        #expect(lines.contains { $0.hasPrefix("  framesrv produce -i FILE + 1 lossless null sink process: ") && $0.contains(" audio frames in ") })
        #expect(lines.contains { $0.hasPrefix("  ffmpeg -i FILE -map 0:a:0 -f null -: ") })
        #expect(lines.contains { $0.hasPrefix("  ratio framesrv/ffmpeg (speed) ") })
        #expect(lines.contains { $0.hasPrefix("  publish -> acquire at 46.9 frames/s") && $0.contains("p50 ") && $0.contains("p99 ") })
        #expect(lines.contains { $0.hasPrefix("  a pipe, same bytes and pace") && $0.contains("ratio framesrv/pipe p50 ") },
                "the pipe peer (cc is installed by scripts/setup --test): \(bench.stdout)")
    }

    /// Without a CUDA device (nvidia-smi listing none), or without torch in the python given (the
    /// project's venv has none), bench gpu says why in one line and exits 0; on a machine with both
    /// it prints its two sections.
    @Test("framesrv bench gpu --quick without a CUDA device or torch prints one line saying why, and exits 0", .timeLimit(.minutes(3)))
    func benchGpuQuick() throws {
        let python = try ClientTools.python()
        let scratch = try Scratch()
        let bench = try scratch.start(["bench", "gpu", "--quick", "--python", python])
        #expect(bench.wait(timeout: 170) == 0, "bench gpu: \(bench.stdout)\n\(bench.stderr)")
        let lines = bench.stdout.split(separator: "\n").map(String.init)
        if lines.first?.hasPrefix("framesrv bench gpu: skipped: ") == true {
            #expect(lines.count == 1 && bench.stderr.isEmpty, "more than the skip line: \(bench.stdout)\n\(bench.stderr)")
        } else {
            for section in ["1. 3840x2160 nv12", "2. publish -> ready on the consumer's stream",
                            "  framesrv CUDA stream, Python + torch / torch.multiprocessing", "  60 fps, asleep, Python: p50 ",
                            "  200 fps, polling, Python: p50 "] {
                #expect(lines.contains { $0.hasPrefix(section) }, "no '\(section)' in:\n\(bench.stdout)")
            }
            // The C rows, or the one line saying why there are none (no libframesrv beside framesrv).
            let cMeasured = lines.contains { $0.hasPrefix("  framesrv CUDA stream, C / torch.multiprocessing") }
                && lines.contains { $0.hasPrefix("  60 fps, asleep, C: p50 ") && $0.contains("; with a 50 us ready poll: p50 ") }
            #expect(cMeasured || lines.contains { $0.hasPrefix("  framesrv CUDA stream, C: not measured: ") }, "\(bench.stdout)")
        }
    }

    /// bench gpu's section 3 reads the decode loop's time from ffmpeg's -benchmark lines, as this
    /// ffmpeg writes them (rtime, then a maxrss line).
    @Test func ffmpegBenchmarkLineIsRead() throws {
        let (status, _, err) = try Spawned.run(["ffmpeg", "-hide_banner", "-nostdin", "-v", "info", "-nostats", "-benchmark", "-f", "lavfi",
                                                "-i", "testsrc=size=320x240:rate=25", "-t", "2", "-f", "null", "-"])
        #expect(status == 0, "ffmpeg: \(err)")
        let seconds = try #require(Bench.benchmarkRealSeconds(err), "no rtime in: \(err)")
        #expect(seconds > 0 && seconds < 60)
        #expect(Bench.benchmarkRealSeconds("bench: maxrss=50540kB\n") == nil)
    }

    /// The Python side of bench gpu (a Swift string, written out at run time) compiles: the GPU
    /// machine that runs it is not this one.
    @Test func benchGpuScriptCompiles() throws {
        let folder = TemporaryFolder("framesrv-bench-gpu-script")
        try Data(Bench.gpuScript.utf8).write(to: URL(fileURLWithPath: folder.file("bench_gpu.py")))
        let (status, _, err) = try Spawned.run([try ClientTools.python(), "-m", "py_compile", folder.file("bench_gpu.py")])
        #expect(status == 0, "py_compile: \(err)")
    }

    /// framesrv's C transport of bench gpu (a Swift string, compiled on the GPU machine against
    /// the bundle's libframesrv) compiles against this tree's header.
    @Test func benchGpuCTransportCompiles() throws {
        let folder = TemporaryFolder("framesrv-bench-gpu-c")
        try Data(Bench.gpuCTransport.utf8).write(to: URL(fileURLWithPath: folder.file("t.c")))
        let (status, _, err) = try Spawned.run(["cc", "-fsyntax-only", "-Wall", "-Werror", "-I",
                                                repositoryRoot.path + "/clients/c/include", folder.file("t.c")])
        #expect(status == 0, "cc: \(err)")
    }

    /// The bare futex floor of bench transport ends when frames come faster than its receiver
    /// runs (a frame overtaken by the next is not timed): it used to wait forever for a frame
    /// it had skipped, and bench transport with it. 100,000 frames/s overtakes on any machine.
    @Test func futexFloorEndsWhenFramesOvertakeEachOther() throws {
        let scratch = ScratchDirectory(prefix: "framesrv-test-futex")
        guard let binary = try CPeers.compile("futex_floor", source: CPeers.futexSource, in: scratch) else {
            Issue.record("cc could not build the futex floor")
            return
        }
        for extra in [[], ["shm"]] {
            let r = try CPeers.run(binary, ["100000", "5000", "50"] + extra, bench: "test", within: 30)
            #expect(r.p50 > 0 && r.p99 >= r.p50, "\(extra): \(r)")
        }
    }

    @Test func benchTransportBadInputGetsOneLine() throws {
        let scratch = try Scratch()
        for args in [["bench", "transport", "--frames", "1000", "--seconds", "1"], ["bench", "transport", "--c-tools", "/tmp"],
                     ["bench", "record", "--frames", "100", "--seconds", "1"], ["bench", "record", "-i", "x.mp4"],
                     ["bench", "gpu", "--frames", "100"], ["bench", "gpu", "--c-tools", "/tmp"], ["bench", "decode", "--python", "x"]] {
            let (status, _, err) = try scratch.run(args, timeout: 20)
            #expect(status == 2 && err.split(separator: "\n").count == 1, "\(args): \(err)")
        }
    }
}
