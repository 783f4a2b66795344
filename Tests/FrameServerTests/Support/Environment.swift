import Foundation

// What every process the suite starts runs in: the test runner's environment with the
// project's own Python first on PATH (.build/python-venv, made by scripts/python-env from
// scripts/python-requirements.txt, without the system's site-packages). So `python3` in a
// shell line, an `exec python3 ...` stage of `framesrv run`, pytest and the examples all run
// the venv's Python: a missing dependency fails here as it would on a new machine.

/// The project's Python (.build/python-venv/bin/python), made or brought up to date once per
/// test run by scripts/python-env, or why it could not be (`ClientTools.python()` throws that).
let projectPython: Result<String, TestFailure> = {
    // In the runner's own environment: childEnvironment, which every Spawned child gets, needs this first.
    let logs = TemporaryFolder("framesrv-python-env")
    let script = repositoryRoot.appendingPathComponent("scripts/python-env").path
    guard let p = try? Spawned(script, [], exactEnvironment: ProcessInfo.processInfo.environment, logDirectory: logs.path) else {
        return .failure(TestFailure("cannot run \(script)"))
    }
    let status = p.wait(timeout: 600)
    let path = p.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    guard status == 0, FileManager.default.isExecutableFile(atPath: path) else {
        return .failure(TestFailure("scripts/python-env failed (status \(status)):\n\(p.stderr)"))
    }
    return .success(path)
}()

/// The venv's bin folder, when the venv could be made.
let projectPythonBin: String? = (try? projectPython.get()).map { URL(fileURLWithPath: $0).deletingLastPathComponent().path }

/// The environment of a child process: the runner's, the venv's bin first on PATH, then `extra`.
func childEnvironment(_ extra: [String: String] = [:]) -> [String: String] {
    var env = ProcessInfo.processInfo.environment
    if let bin = projectPythonBin { env["PATH"] = bin + ":" + (env["PATH"] ?? "/usr/bin:/bin") }
    env.removeValue(forKey: "PYTHONHOME")
    return env.merging(extra) { $1 }
}

/// A program the suite runs besides framesrv, and the setup step that installs it.
struct RequiredTool: Sendable {
    let name: String
    let package: String

    static let ffmpeg = RequiredTool(name: "ffmpeg", package: "ffmpeg")
    static let ffprobe = RequiredTool(name: "ffprobe", package: "ffmpeg")
    static let xvfb = RequiredTool(name: "Xvfb", package: "xvfb")
    static let chromium = RequiredTool(name: "chromium", package: "chromium")
    static let script = RequiredTool(name: "script", package: "bsdutils")
    static let ip = RequiredTool(name: "ip", package: "iproute2")
    static let tc = RequiredTool(name: "tc", package: "iproute2")
    static let pulseaudio = RequiredTool(name: "pulseaudio", package: "pulseaudio")

    /// The program's path on PATH (or in /usr/sbin, /sbin); a test failure naming the setup
    /// step when the machine lacks it, so a missing tool fails and says why, not skips.
    func path() throws(TestFailure) -> String {
        let env = childEnvironment()
        let dirs = (env["PATH"] ?? "").split(separator: ":").map(String.init) + ["/usr/sbin", "/sbin"]
        if let found = dirs.map({ $0 + "/" + name }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) {
            return found
        }
        throw TestFailure("this test needs '\(name)' (Debian's \(package)), which `scripts/setup --test` installs (make test runs it)")
    }
}
