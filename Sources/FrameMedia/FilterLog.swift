// libavfilter's messages: what libav* logs while a graph is parsed or configured, captured for the error line.

import CFFmpeg
import Glibc
import Synchronization

/// What libav* logged at error level while a capture was active (their callback is
/// process-wide; nothing is printed).
private struct LogCapture {
    var depth = 0
    var partial = ""
    var lines: [String] = []
}

private let logCapture = Mutex(LogCapture())

private let logCaptureInstalled: Void = {
    av_log_set_callback { _, level, format, args in
        guard level <= AV_LOG_ERROR, let format, let args else { return }
        var buffer = [CChar](repeating: 0, count: 1024)
        _ = vsnprintf(&buffer, buffer.count, format, args)
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        logCapture.withLock { c in
            guard c.depth > 0 else { return }
            c.partial += text
            while let nl = c.partial.firstIndex(of: "\n") {
                let line = String(c.partial[..<nl]).trimmingSpaces
                if !line.isEmpty { c.lines.append(line) }
                c.partial = String(c.partial[c.partial.index(after: nl)...])
            }
        }
    }
}()

func installLogCapture() { _ = logCaptureInstalled }

/// Runs `body`, returning its result and the first error libavfilter logged meanwhile
/// (libavfilter's own words for what is wrong: "No such filter: 'foo'").
func withLogCapture(_ body: () -> Int32) -> (value: Int32, message: String?) {
    installLogCapture()
    logCapture.withLock { $0.depth += 1; if $0.depth == 1 { $0.lines = []; $0.partial = "" } }
    let value = body()
    let message = logCapture.withLock { c -> String? in
        c.depth -= 1
        let partial = c.partial.trimmingSpaces
        if !partial.isEmpty { c.lines.append(partial); c.partial = "" }
        return c.lines.first
    }
    return (value, value < 0 ? message : nil)
}

private extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\n" || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\n" || c == "\t" { s = s.dropLast() }
        return String(s)
    }
}
