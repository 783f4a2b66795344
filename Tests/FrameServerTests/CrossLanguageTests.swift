import Foundation
import FrameServer
import Glibc
import Testing

/// The protocol across languages: a Swift producer (`framesrv produce`) with the Python
/// client (clients/python) and the C client (clients/c) as consumers, in real processes.
///
/// These tests need python3 with pyzmq (and pytest for the client's unit tests) and a C
/// compiler with libzmq's headers. A missing tool is a failure, not a skip: CI installs them.
@Suite("Cross-language consumers", .serialized)
struct CrossLanguageTests {
    static let pythonClient = repositoryRoot.appendingPathComponent("clients/python/framesrv_client.py").path
    static let pythonTests = repositoryRoot.appendingPathComponent("clients/python/test_client.py").path
    static let cSource = repositoryRoot.appendingPathComponent("clients/c/framesrv_consume.c").path
    static let headerDirectory = repositoryRoot.appendingPathComponent("Sources/CFrameServer/include").path

    // MARK: Tools

    /// The absolute path of `name` on PATH, if any.
    static func executable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for dir in path.split(separator: ":") where !dir.isEmpty {
            let candidate = "\(dir)/\(name)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return nil
    }

    /// python3, checked to import `module`; fails the test with `hint` if it cannot.
    static func python(importing module: String, hint: String) throws -> String {
        let python = try #require(executable("python3"), "python3 is not on PATH; the cross-language tests need it (\(hint))")
        let scratch = try Scratch()
        let check = try scratch.start(["-c", "import \(module)"], executable: python)
        let status = check.wait(timeout: 60)
        try #require(status == 0, "python3 cannot import \(module): \(hint)\n\(check.stderr)")
        return python
    }

    /// Builds clients/c/framesrv_consume into `scratch` with the Makefile's flags. The
    /// Makefile writes its output next to the source, so the compiler is called directly.
    static func buildCClient(in scratch: Scratch) throws -> String {
        // `cc`, as the Makefile and the Python client (which builds its atomics helper with it) use.
        let cc = try #require(executable("cc"),
                              "no C compiler: `cc` is not on PATH; install gcc (and libzmq3-dev) to build clients/c and the Python client's atomics helper")
        let output = scratch.file("framesrv_consume")
        let build = try scratch.start(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O2", "-g", "-I", headerDirectory,
                                       cSource, "-o", output, "-lzmq"], executable: cc)
        let status = build.wait(timeout: 120)
        try #require(status == 0, "building clients/c/framesrv_consume.c with \(cc) failed (status \(status)):\n\(build.stderr)")
        return output
    }

    /// A client's summary line: `<prefix>: received N frames, first F, last L, corrupt C`.
    struct ClientSummary: Equatable, CustomStringConvertible {
        var received: UInt64, first: UInt64, last: UInt64, corrupt: UInt64

        static func parse(_ output: String, prefix: String) -> ClientSummary? {
            for line in output.split(separator: "\n").reversed() where line.hasPrefix("\(prefix): received ") {
                let numbers = line.split(whereSeparator: { !$0.isNumber }).compactMap { UInt64($0) }
                guard numbers.count == 4 else { continue }
                return ClientSummary(received: numbers[0], first: numbers[1], last: numbers[2], corrupt: numbers[3])
            }
            return nil
        }

        var description: String { "received \(received), first \(first), last \(last), corrupt \(corrupt)" }
    }

    /// A client's --seq-log: one sequence number per line.
    static func readNumbers(_ path: String) -> [UInt64] {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").split(separator: "\n").compactMap { UInt64($0) }
    }

    // MARK: Tests

    /// Python and C, both lossless, side by side on one Swift producer: each gets all 300
    /// frames, in order, with the pattern intact.
    @Test("Swift producer, Python and C lossless consumers at once", .timeLimit(.minutes(2)))
    func pythonAndCLossless() throws {
        let python = try Self.python(importing: "zmq", hint: "pip install pyzmq")
        let scratch = try Scratch()
        let cClient = try Self.buildCClient(in: scratch)
        let frames = 300

        let producer = try scratch.start(["produce", "--pattern", "--out", "xl", "--size", "320x240", "--rate", "max",
                                          "--frames", "\(frames)", "--wait-for", "2"])
        let pyLog = scratch.file("python.log"), cLog = scratch.file("c.log")
        let py = try scratch.start([Self.pythonClient, "--in", "xl", "--verify-pattern", "--seq-log", pyLog, "--wait", "30"],
                                   executable: python)
        let c = try scratch.start(["--in", "xl", "--verify-pattern", "--seq-log", cLog, "--wait", "30"], executable: cClient)

        #expect(producer.wait(timeout: 90) == 0, "producer: \(producer.stderr)")
        #expect(py.wait(timeout: 60) == 0, "python client: \(py.stderr)")
        #expect(c.wait(timeout: 60) == 0, "C client: \(c.stderr)")

        let expected = ClientSummary(received: UInt64(frames), first: 1, last: UInt64(frames), corrupt: 0)
        #expect(ClientSummary.parse(py.stdout, prefix: "python") == expected, "python client printed: \(py.stdout)")
        #expect(ClientSummary.parse(c.stdout, prefix: "c") == expected, "C client printed: \(c.stdout)")
        #expect(Self.readNumbers(pyLog) == Array(1...UInt64(frames)), "python: every frame once, in order")
        #expect(Self.readNumbers(cLog) == Array(1...UInt64(frames)), "C: every frame once, in order")
        #expect(!FileManager.default.fileExists(atPath: scratch.file("xl.ctl")))
    }

    /// The Python client in live mode next to a lossless Swift sink: the sink gets every
    /// frame, the Python client only intact frames in increasing order.
    @Test("Python live consumer alongside a lossless Swift sink", .timeLimit(.minutes(2)))
    func pythonLiveWithSwiftLossless() throws {
        let python = try Self.python(importing: "zmq", hint: "pip install pyzmq")
        let scratch = try Scratch()
        let frames = 300

        // The producer holds frame 1 back until the (one) lossless sink is admitted; the live
        // Python client is admitted before that, so it watches the whole stream.
        let producer = try scratch.start(["produce", "--pattern", "--out", "xv", "--size", "320x240", "--rate", "250",
                                          "--frames", "\(frames)", "--wait-for", "1"])
        let pyLog = scratch.file("python-live.log"), sinkLog = scratch.file("sink.log")
        let py = try scratch.start([Self.pythonClient, "--in", "xv", "--live", "--verify-pattern", "--seq-log", pyLog,
                                    "--wait", "30"], executable: python)
        let attached = eventually(timeout: 30) {
            scratch.snapshot("xv")?.consumers.contains { $0.pid == py.pid && $0.mode == "live" && $0.state == "active" } ?? false
        }
        try #require(attached, "the python live client never attached: \(py.stderr)")
        #expect(scratch.snapshot("xv")?.published == 0)
        let sink = try scratch.start(["sink", "--in", "xv", "--null", "--lossless", "--verify", "--seq-log", sinkLog,
                                      "--stats-json", "--no-reattach"])

        #expect(producer.wait(timeout: 90) == 0, "producer: \(producer.stderr)")
        #expect(sink.wait(timeout: 60) == 0, "sink: \(sink.stderr)")
        #expect(py.wait(timeout: 60) == 0, "python client: \(py.stderr)")

        let stats = try #require(SinkStats.parse(sink.stdout), "sink printed no statistics: \(sink.stdout)")
        #expect(stats.received == frames && stats.first == 1 && stats.last == UInt64(frames) && stats.corrupt == 0,
                "sink: \(sink.stdout)")
        let (runs, corrupt) = readSeqLog(sinkLog)
        #expect(corrupt.isEmpty && runs.count == 1 && runs.first == Array(1...UInt64(frames)))

        let summary = try #require(ClientSummary.parse(py.stdout, prefix: "python"), "python client printed: \(py.stdout)")
        #expect(summary.corrupt == 0, "python live: \(summary)")
        #expect(summary.received > 0, "python live: \(summary)")
        let seqs = Self.readNumbers(pyLog)
        #expect(UInt64(seqs.count) == summary.received)
        #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 }, "python live: sequence numbers must strictly increase")
        #expect(seqs.allSatisfy { (1...UInt64(frames)).contains($0) }, "python live: sequence numbers out of range")
        #expect(seqs.first == summary.first && seqs.last == summary.last)
    }

    /// The Python client's own unit tests (layout against CFrameServer.h, announcement vectors).
    @Test("clients/python unit tests (pytest)", .timeLimit(.minutes(2)))
    func pythonUnitTests() throws {
        let python = try Self.python(importing: "pytest", hint: "pip install pytest")
        let scratch = try Scratch()
        // -p no:cacheprovider: no .pytest_cache written into the repository.
        let pytest = try scratch.start(["-m", "pytest", Self.pythonTests, "-q", "-p", "no:cacheprovider"], executable: python)
        let status = pytest.wait(timeout: 110)
        #expect(status == 0, "pytest clients/python/test_client.py exited \(status):\n\(pytest.stdout)\n\(pytest.stderr)")
        print("pytest: " + (pytest.stdout.split(separator: "\n").last.map(String.init) ?? ""))
    }
}
