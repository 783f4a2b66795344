import Foundation
import Glibc
import Testing

/// The multi-process file fuzzer: a stream's `.ctl` and pool files are damaged (every
/// field of fs_control, fs_slot_ctl, fs_consumer and fs_frame set to 0, -1, max, min and
/// off by one; random bytes; truncations; a FIFO in place of the .ctl) under a running,
/// a stopped (then resumed) and a dead producer, and framesrv's commands run against each
/// (see FuzzCommand.all), and a `framesrv web` on the same directory is asked for every route
/// of the damaged stream (FuzzWeb). No process may end by a signal or hang, none may write more
/// than one line on stderr, the web server must answer every request, and a healthy stream in
/// the same runtime directory must still be listed and still deliver verified frames.
///
/// FRAMESRV_FILE_FUZZ_MUTATIONS (default one pass of the catalogue, 694; an audio field or issue-25 case is made on a stream of -f lavfi -i sine), _SEED, _WORKERS and _ONLY (a failure's
/// mutation number, to run it alone) are described in FileFuzzConfiguration.
@Suite(.serialized) struct FileFuzzTests {
    @Test func damagedStreamFilesNeverCrashAnyProcess() throws {
        let config = FileFuzzConfiguration.fromEnvironment()
        let indices = config.indices
        print("file fuzz: seed \(config.seed), \(indices.count) mutations of \(FileMutation.catalogue.count), "
              + "\(config.workers) workers (FRAMESRV_FILE_FUZZ_SEED=\(config.seed) reproduces)")
        let failures = Locked<[FuzzFailure]>([])
        let next = Locked(0)
        let start = Date()
        // Threads, not concurrentPerform (which runs no more at once than there are cores):
        // a worker spends most of its time waiting for its processes.
        let done = DispatchGroup()
        for _ in 0..<min(config.workers, indices.count) {
            done.enter()
            Thread {
                defer { done.leave() }
                do {
                    let worker = try FuzzWorker(config: config, failures: failures)
                    while let i = next.withLock({ n -> Int? in
                        defer { n += 1 }
                        if n > 0, n % 250 == 0 { print("file fuzz: \(n) of \(indices.count) mutations started") }
                        return n < indices.count ? indices[n] : nil
                    }) {
                        worker.run(i)
                    }
                    worker.close()
                } catch {
                    failures.withLock {
                        $0.append(FuzzFailure(seed: config.seed, index: -1, state: .running, mutation: "none", applied: "",
                                              command: "(fuzzer setup)", problem: "\(error)", stderr: ""))
                    }
                }
            }.start()
        }
        done.wait()
        let found = failures.withLock { $0 }
        let seconds = Int(Date().timeIntervalSince(start))
        let summary = fileFuzzSummary(found)
        print("file fuzz: \(indices.count) mutations in \(seconds) s, \(found.count) failures in "
              + "\(Set(found.map(\.signature)).count) signatures\n\(summary)")
        if let path = ProcessInfo.processInfo.environment["FRAMESRV_FILE_FUZZ_REPORT"] {
            let all = found.sorted { $0.index < $1.index }.map {
                "#\($0.index) [\($0.state)] \($0.command) | \($0.problem) | \($0.mutation) | \(crashSite($0.stderr) ?? "")"
            }
            try? (summary + "\n\nevery failure:\n" + all.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        }
        #expect(found.count == 0, "\(found.count) failures (seed \(config.seed)):\n\(summary)")
    }
}
