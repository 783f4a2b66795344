import Foundation
import Testing

/// The C and Python clients as their users get them: libframesrv's own C tests under ASan +
/// UBSan, the Python package's pytest suite, `pip install` into a fresh venv (numpy from
/// PyPI) and `import framesrv` from elsewhere, the built wheel installed and consuming a
/// Swift stream, and examples/c built with pkg-config against an installed libframesrv.
@Suite("C and Python clients as installed", .serialized)
struct ClientPackagingTests {
    static let venvTimeout = 600.0

    /// `make -C clients/c check`: the C tests (clients/c/tests) with ASan + UBSan, each
    /// given the Swift framesrv in $FRAMESRV.
    @Test("libframesrv's C tests under ASan and UBSan (make -C clients/c check)", .timeLimit(.minutes(8)))
    func cChecks() throws {
        let check = try ClientTools.run(["make", "-C", "clients/c", "check"], timeout: 470, environment: ["FRAMESRV": framesrvPath])
        #expect(check.status == 0, "make -C clients/c check exited \(check.status):\n\(check.stdout.suffix(6000))\n\(check.stderr.suffix(4000))")
        print("make check: " + (check.stdout.split(separator: "\n").last { $0.hasPrefix("check: all") }.map(String.init) ?? "no summary"))
    }

    /// The Python package's own tests (clients/python/tests) with the venv's python and this
    /// build's framesrv (FRAMESRV_BIN).
    @Test("clients/python tests (pytest)", .timeLimit(.minutes(5)))
    func pythonTests() throws {
        let python = try ClientTools.python()
        let tests = repositoryRoot.appendingPathComponent("clients/python/tests").path
        // -p no:cacheprovider: no .pytest_cache written into the repository.
        let pytest = try ClientTools.run([python, "-m", "pytest", tests, "-q", "-p", "no:cacheprovider"], timeout: 280,
                                         environment: ["FRAMESRV_BIN": framesrvPath])
        #expect(pytest.status == 0, "pytest clients/python/tests exited \(pytest.status):\n\(pytest.stdout.suffix(8000))\n\(pytest.stderr.suffix(3000))")
        print("pytest: " + (pytest.stdout.split(separator: "\n").last.map(String.init) ?? ""))
    }

    /// A fresh venv (no system site packages) in `folder`; returns its python.
    func freshVenv(_ folder: TemporaryFolder, _ name: String) throws -> String {
        let venv = folder.path + "/" + name
        let made = try ClientTools.run(["python3", "-m", "venv", venv], timeout: 120)
        try #require(made.status == 0, "python3 -m venv failed: \(made.stderr)")
        return venv + "/bin/python"
    }

    /// `python -c CODE` run from `folder` (not the repository), so only the installed package can be found.
    func runPython(_ python: String, _ code: String, in folder: TemporaryFolder) throws -> (status: Int32, stdout: String, stderr: String) {
        try ClientTools.run([python, "-c", code], timeout: 60, directory: folder.path)
    }

    /// `pip install ./clients/python` into a fresh venv: pip builds the extension (in an
    /// isolated build environment) and installs numpy from PyPI; `import framesrv` then works
    /// from another directory and loads the installed copy, whose extension needs nothing of the repo.
    @Test("pip install into a fresh venv, then import from elsewhere", .timeLimit(.minutes(10)))
    func pipInstallFreshVenv() throws {
        let folder = TemporaryFolder("framesrv-venv")
        let python = try freshVenv(folder, "venv")
        let install = try ClientTools.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                           repositoryRoot.appendingPathComponent("clients/python").path], timeout: Self.venvTimeout)
        try #require(install.status == 0, "pip install ./clients/python failed:\n\(install.stdout)\n\(install.stderr)")
        let imported = try runPython(python, "import framesrv, numpy; print(framesrv.__file__); print(framesrv._framesrv.__file__)", in: folder)
        #expect(imported.status == 0, "import framesrv: \(imported.stderr)")
        let files = imported.stdout.split(separator: "\n").map(String.init)
        #expect(files.count == 2 && files.allSatisfy { $0.hasPrefix(folder.path + "/venv/") },
                "framesrv must load from the venv, not the repository: \(files)")
        // The extension links no libframesrv.so (it compiles the library in) and no path into the repository.
        if let ext = files.last {
            let ldd = try ClientTools.run(["ldd", ext], timeout: 30)
            #expect(!ldd.stdout.contains("libframesrv") && !ldd.stdout.contains(repositoryRoot.path), "ldd \(ext):\n\(ldd.stdout)")
        }
    }

    /// `pip wheel ./clients/python`, the wheel installed into another fresh venv, and a tiny
    /// consume of a Swift producer's stream with it (every frame verified).
    @Test("the built wheel installs into a fresh venv and consumes a Swift stream", .timeLimit(.minutes(10)))
    func wheelInstallsAndConsumes() throws {
        let folder = TemporaryFolder("framesrv-wheel")
        let builder = try ClientTools.python()
        let wheels = folder.path + "/wheels"
        let built = try ClientTools.run([builder, "-m", "pip", "wheel", "--quiet", "--no-deps", "--disable-pip-version-check",
                                         "-w", wheels, repositoryRoot.appendingPathComponent("clients/python").path], timeout: Self.venvTimeout)
        try #require(built.status == 0, "pip wheel failed:\n\(built.stdout)\n\(built.stderr)")
        let wheel = try #require(try FileManager.default.contentsOfDirectory(atPath: wheels).first { $0.hasSuffix(".whl") },
                                 "pip wheel wrote no .whl into \(wheels)")
        #expect(wheel.hasPrefix("framesrv-"))
        let python = try freshVenv(folder, "venv")
        let install = try ClientTools.run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", wheels + "/" + wheel],
                                          timeout: Self.venvTimeout)
        try #require(install.status == 0, "pip install \(wheel) failed:\n\(install.stdout)\n\(install.stderr)")

        let scratch = try Scratch()
        let producer = try startPatternProducer(.swift, stream: "w", size: "320x240", frames: 30, scratch)
        let consume = try scratch.start(["-m", "framesrv", "consume", "--in", "w", "--verify-pattern", "--wait", "30"],
                                        executable: python, directory: folder.path)
        #expect(producer.wait(timeout: 60) == 0, "producer: \(producer.stderr)")
        #expect(consume.wait(timeout: 60) == 0, "consume: \(consume.stdout)\n\(consume.stderr)")
        let summary = parseClientSummary(consume.stdout, prefix: "py")
        #expect(summary.map { $0 == (30, 1, 30, 0) } ?? false, "the wheel's consumer: \(consume.stdout)")
    }

    /// `make -C clients/c install PREFIX=<tmp>`, examples/c built with `pkg-config --cflags
    /// --libs framesrv` from that prefix (its Makefile), and run: the example producer into the
    /// example consumer, which prints every frame.
    @Test("examples/c built with pkg-config against an installed libframesrv, producer -> consumer", .timeLimit(.minutes(3)))
    func cExamples() throws {
        let prefix = TemporaryFolder("framesrv-prefix")
        let install = try ClientTools.run(["make", "-s", "-C", "clients/c", "install", "PREFIX=\(prefix.path)"], timeout: 170)
        try #require(install.status == 0, "make install failed:\n\(install.stdout)\n\(install.stderr)")
        let pc = ["PKG_CONFIG_PATH": prefix.path + "/lib/pkgconfig"]
        let flags = try ClientTools.run(["pkg-config", "--cflags", "--libs", "framesrv"], timeout: 30, environment: pc)
        #expect(flags.status == 0 && flags.stdout.contains(prefix.path), "pkg-config: \(flags.stdout)\(flags.stderr)")
        // A copy of examples/c (its Makefile builds next to the sources), so the repository stays clean.
        let out = prefix.path + "/examples"
        try FileManager.default.copyItem(atPath: repositoryRoot.appendingPathComponent("examples/c").path, toPath: out)
        let build = try ClientTools.run(["make", "-C", out], timeout: 120, environment: pc)
        try #require(build.status == 0, "make -C examples/c failed:\n\(build.stdout)\n\(build.stderr)")

        // The consumer first (it waits for the stream), then the 300-frame, 30 fps producer. The
        // programs find the installed libframesrv.so by their rpath: no LD_LIBRARY_PATH.
        let scratch = try Scratch()
        let consumer = try scratch.start(["ex"], executable: out + "/consumer")
        let producer = try scratch.start(["ex"], executable: out + "/producer")
        #expect(producer.wait(timeout: 60) == 0, "example producer: \(producer.stdout)\n\(producer.stderr)")
        #expect(consumer.wait(timeout: 30) == 0, "example consumer: \(consumer.stdout)\n\(consumer.stderr)")
        let seqs = consumer.stdout.split(separator: "\n").filter { $0.hasPrefix("frame ") }
            .compactMap { $0.split(separator: " ").dropFirst().first.flatMap { UInt64($0) } }
        #expect(!seqs.isEmpty && seqs.last == 300, "the example consumer: \(consumer.stdout.suffix(500))")
        #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 + 1 == $1 }, "lossless: every frame after the first, in order")
        #expect(consumer.stdout.contains("consumer: received \(seqs.count) frames"))
    }

    /// `framesrv bench clients --quick` runs end to end: a figure for each consumer and each
    /// Python producer run, and the zero-copy proof says inside the pool. (No figure is
    /// asserted: the numbers are the machine's.)
    @Test("framesrv bench clients --quick prints every figure and the zero-copy proof", .timeLimit(.minutes(3)))
    func benchClients() throws {
        _ = try ClientTools.cBuildDirectory()
        let python = try ClientTools.python()
        let scratch = try Scratch()
        let bench = try scratch.start(["bench", "clients", "--quick", "--python", python])
        #expect(bench.wait(timeout: 170) == 0, "bench clients: \(bench.stdout)\n\(bench.stderr)")
        let lines = bench.stdout.split(separator: "\n")
        for row in ["Swift (framesrv sink --null)", "C (framesrv-consume)", "Python (Consumer, frame.planes)",
                    "reserve + publish only", "+ numpy fill of every plane"] {
            #expect(lines.contains { $0.contains(row) && $0.contains("frames/s") }, "no '\(row)' figure in:\n\(bench.stdout)")
        }
        let proof = lines.first { $0.hasPrefix("zero-copy:") }
        #expect(proof?.hasSuffix("inside the pool") ?? false, "zero-copy proof: \(proof ?? "none")")
        print(bench.stdout)
    }
}
