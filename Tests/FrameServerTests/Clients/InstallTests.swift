import Foundation
import Testing

/// `make install` as a packager runs it (into a DESTDIR), the installed binary and
/// libframesrv used from there, no `.lock` left by a normal exit, and the README's tour run
/// top to bottom (scripts/tour.sh). The binary installed is this build's (FRAMESRV_BIN), so
/// no release build is needed.
@Suite("make install and the README tour", .serialized)
struct InstallTests {
    /// `make install DESTDIR=... PREFIX=/usr` into `folder`; returns DESTDIR/usr.
    func install(into folder: TemporaryFolder) throws -> String {
        let made = try ClientTools.run(["make", "-s", "install", "DESTDIR=\(folder.path)", "PREFIX=/usr",
                                        "FRAMESRV_BIN=\(framesrvPath)", "PYTHON=\(try ClientTools.python())"], timeout: 400)
        try #require(made.status == 0, "make install exited \(made.status):\n\(made.stdout.suffix(3000))\n\(made.stderr.suffix(3000))")
        return folder.path + "/usr"
    }

    @Test("make install DESTDIR= PREFIX=/usr: binary, man page, libframesrv, Python package; each works from there",
          .timeLimit(.minutes(7)))
    func installIntoDestdir() throws {
        let folder = TemporaryFolder("framesrv-install")
        let usr = try install(into: folder)
        for file in ["bin/framesrv", "share/man/man1/framesrv.1", "include/framesrv.h", "lib/libframesrv.a",
                     "lib/libframesrv.so.2", "lib/pkgconfig/framesrv.pc"] {
            #expect(FileManager.default.fileExists(atPath: usr + "/" + file), "make install did not install \(file)")
        }
        // The pkg-config file names the real prefix, not the staging directory.
        let pc = (try? String(contentsOfFile: usr + "/lib/pkgconfig/framesrv.pc", encoding: .utf8)) ?? ""
        #expect(pc.contains("prefix=/usr") && !pc.contains(folder.path), "framesrv.pc:\n\(pc)")
        let man = (try? String(contentsOfFile: usr + "/share/man/man1/framesrv.1", encoding: .utf8)) ?? ""
        for command in ["produce", "sink", "filter", "top"] {
            #expect(man.contains(".SS framesrv \(command)"), "the man page has no section for \(command)")
        }

        // The installed binary and a C consumer built against the installed libframesrv (shared).
        let scratch = try Scratch()
        let consumer = folder.path + "/consume"
        let cc = try ClientTools.run(["cc", repositoryRoot.appendingPathComponent("clients/c/tools/framesrv-consume.c").path,
                                      "-o", consumer, "-I", usr + "/include", "-L", usr + "/lib", "-lframesrv", "-lzmq"], timeout: 120)
        try #require(cc.status == 0, "cc against the installed libframesrv: \(cc.stderr)")
        let ldd = try ClientTools.run(["ldd", consumer], timeout: 30, environment: ["LD_LIBRARY_PATH": usr + "/lib"])
        #expect(ldd.stdout.contains(usr + "/lib/libframesrv.so.2"), "the consumer does not load the installed library:\n\(ldd.stdout)")
        let producer = try scratch.start(["produce", "--pattern", "--out", "inst", "--size", "160x120", "--frames", "40",
                                          "--rate", "max", "--wait-for", "1"], executable: usr + "/bin/framesrv")
        let c = try scratch.start(["--in", "inst", "--verify-pattern"], executable: consumer,
                                  environment: ["LD_LIBRARY_PATH": usr + "/lib"])
        #expect(c.wait() == 0, "installed libframesrv consumer: \(c.stderr)")
        #expect(producer.wait() == 0, "installed framesrv: \(producer.stderr)")
        #expect(c.stdout.contains("received 40 frames, first 1, last 40, corrupt 0"), "consumer: \(c.stdout)")

        // The Python package, imported from the staging directory from elsewhere.
        let site = try #require(try FileManager.default.subpathsOfDirectory(atPath: usr + "/lib")
            .first { $0.hasSuffix("-packages/framesrv/__init__.py") }, "no Python package under \(usr)/lib")
        let sitePath = usr + "/lib/" + site.components(separatedBy: "/framesrv/").first!
        let py = try ClientTools.run([try ClientTools.python(), "-c", "import framesrv; print(framesrv.__file__)"], timeout: 60,
                                     environment: ["PYTHONPATH": sitePath], directory: folder.path)
        #expect(py.status == 0 && py.stdout.hasPrefix(sitePath), "import framesrv from \(sitePath): \(py.stdout)\(py.stderr)")
        // A staged install leaves PYTHON's own environment as it was (pip uninstalled its framesrv).
        let own = try ClientTools.run([try ClientTools.python(), "-c", "import framesrv; print(framesrv.__file__)"], timeout: 60,
                                      directory: folder.path)
        #expect(own.status == 0 && own.stdout.contains("/.build/python-venv/"), "the venv lost its framesrv: \(own.stdout)\(own.stderr)")
    }

    /// A checkout copied along with its .build (SwiftPM's caches and the venv hold the path
    /// they were made in): make install removes the stale .build with one line saying so,
    /// installs under PREFIX, and prints the exports a shell, python and pkg-config need there.
    @Test("make install PREFIX= in a copied checkout: a .build from elsewhere is removed, the exports are printed",
          .timeLimit(.minutes(5)))
    func installFromACopiedCheckout() throws {
        let folder = TemporaryFolder("framesrv-copy")
        let copy = folder.path + "/checkout", prefix = folder.path + "/prefix"
        let cp = try ClientTools.run(["sh", "-c", "mkdir -p '\(copy)/Sources/CFrameServer' '\(copy)/.build' && cp -a Makefile scripts clients '\(copy)/'"
                                      + " && cp -a Sources/CFrameServer/include '\(copy)/Sources/CFrameServer/'"
                                      + " && echo '\"/elsewhere/framesrv/.build/x86_64-unknown-linux-gnu/debug/\"' > '\(copy)/.build/debug.yaml'"])
        try #require(cp.status == 0, "\(cp.stderr)")
        let python = try ClientTools.python()
        let made = try ClientTools.run(["make", "-s", "install", "PREFIX=\(prefix)", "FRAMESRV_BIN=\(framesrvPath)", "PYTHON=\(python)"],
                                       timeout: 280, environment: ["PKG_CONFIG_PATH": ""], directory: copy)
        try #require(made.status == 0, "make install exited \(made.status):\n\(made.stdout.suffix(3000))\n\(made.stderr.suffix(3000))")
        #expect(made.stderr.contains("build-dir: .build was made in /elsewhere/framesrv, not here"), "\(made.stderr)")
        #expect((try? String(contentsOfFile: copy + "/.build/.checkout", encoding: .utf8)) != nil)
        for export in ["export PATH=\(prefix)/bin:", "export PKG_CONFIG_PATH=\(prefix)/lib/pkgconfig", "export PYTHONPATH=\(prefix)/lib/"] {
            #expect(made.stdout.contains(export), "make install did not say '\(export)...':\n\(made.stdout)")
        }
        // The PYTHONPATH it names is the one `import framesrv` needs.
        let line = try #require(made.stdout.split(separator: "\n").first { $0.contains("export PYTHONPATH=") })
        let value = try #require(line.split(separator: "=", maxSplits: 1).dropFirst().first, "no value in '\(line)'")
        let site = String(value.prefix { $0 != "$" })
        try #require(!site.isEmpty, "an empty PYTHONPATH in '\(line)'")
        let py = try ClientTools.run([python, "-c", "import framesrv; print(framesrv.__file__)"], timeout: 60,
                                     environment: ["PYTHONPATH": site], directory: folder.path)
        #expect(py.status == 0 && py.stdout.hasPrefix(site), "import framesrv with PYTHONPATH=\(site): \(py.stdout)\(py.stderr)")
    }

    @Test("a producer's normal exit leaves nothing in the runtime directory, not even NAME.lock (Swift and C)")
    func normalExitLeavesNoLock() throws {
        let scratch = try Scratch()
        // Each stream has a consumer: one published to nobody leaves its NAME.ended note on
        // purpose (PROTOCOL.md 3.2; DefaultsTests), which is not what this test is about.
        let sink = try scratch.start(["sink", "--in", "s", "--null", "--quiet"])
        let swiftProducer = try scratch.start(["produce", "--pattern", "--out", "s", "--size", "64x48", "--frames", "10",
                                               "--rate", "max", "--wait-for", "1"])
        #expect(swiftProducer.wait() == 0, "\(swiftProducer.stderr)")
        #expect(sink.wait() == 0, "\(sink.stderr)")
        let cProducer = try scratch.start(["--out", "c", "--size", "64x48", "--frames", "10", "--rate", "max"],
                                          executable: try ClientTools.cTool("framesrv-produce"))
        #expect(cProducer.wait() == 0, "\(cProducer.stderr)")
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.path).filter { !$0.hasPrefix(".out-") && !$0.hasPrefix(".err-") }
        #expect(left.isEmpty, "left in the runtime directory after normal exits: \(left)")
    }

    @Test("the README's tour runs top to bottom as a script (scripts/tour.sh)", .timeLimit(.minutes(8)))
    func tourRuns() throws {
        let tour = try ClientTools.run([repositoryRoot.appendingPathComponent("scripts/tour.sh").path], timeout: 460,
                                       environment: ["FRAMESRV_BIN": framesrvPath])
        #expect(tour.status == 0 && tour.stdout.contains("tour: passed"),
                "scripts/tour.sh exited \(tour.status):\n\(tour.stdout.suffix(4000))\n\(tour.stderr.suffix(4000))")
    }
}
