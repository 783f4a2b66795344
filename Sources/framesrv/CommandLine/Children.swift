import Foundation
import Glibc

/// This program's own executable, for commands that run stages as child processes.
let selfExecutable: String = {
    var buf = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buf, buf.count - 1)
    return n > 0 ? String(decoding: buf[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : CommandLine.arguments[0]
}()

/// A child process whose standard output is collected.
final class Child {
    let process = Process()
    private let output = Pipe()
    let label: String

    /// Starts `framesrv ARGS` (or another program with `executable`) with `environment` added.
    init(_ arguments: [String], label: String, executable: String = selfExecutable,
         environment: [String: String] = [:], captureOutput: Bool = true) throws {
        self.label = label
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        if captureOutput { process.standardOutput = output }
        try process.run()
    }

    /// Waits for the child and returns its exit status and everything it printed.
    func finish() -> (status: Int32, output: String) {
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    func stop() { if process.isRunning { process.terminate() } }
}

/// A private runtime directory under /dev/shm, removed with everything in it on deinit.
final class ScratchDirectory {
    let path: String
    init(prefix: String) {
        var template = Array("/dev/shm/\(prefix)-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)!) }
    }
    deinit { try? FileManager.default.removeItem(atPath: path) }
}
