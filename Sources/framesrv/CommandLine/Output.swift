import FrameServer
import Glibc

/// Prints one error line to standard error and exits.
/// The one place that prints `framesrv: error:`: main.swift, for what a command threw.
func fail(_ message: String, status: ExitStatus) -> Never {
    warn("error: " + message)
    exit(status.rawValue)
}

/// One line to standard error, prefixed with the program name.
func warn(_ message: String) {
    // write(2) on fd 2: one unbuffered line, and no shared FILE* to reason about.
    var line = "framesrv: \(message)\n"
    line.withUTF8 { _ = try? writeAll(2, UnsafeRawBufferPointer($0)) }
}

/// Whether standard error is a terminal (progress lines are shown only there).
var stderrIsTerminal: Bool { isatty(2) != 0 }

extension String {
    func padding(_ width: Int) -> String {
        count >= width ? self + " " : self + String(repeating: " ", count: width - count)
    }
    func leftPadding(_ width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

/// SIGINT and SIGTERM become `StopSignal.requested` (long-running commands poll it
/// between frames and stop cleanly: the library's policy, see `StopSignal`); SIGPIPE is
/// ignored, so a write to a pipe nobody reads is an EPIPE error line, not a silent death.
func installStopHandlers() {
    StopSignal.install()
    signal(SIGPIPE, SIG_IGN)
}

/// One table row: each cell padded to its column's width, the last cell as is.
func row(_ widths: [Int], _ cells: [String]) -> String {
    var line = ""
    for (i, cell) in cells.enumerated() {
        line += i < widths.count ? cell.padding(widths[i]) : cell
    }
    return line
}
