// libav*'s messages: what libavfilter logs while a graph is parsed or configured, captured for the
// error line, and what a demuxer logs while it reads (the damaged input it skipped).

import CFFmpeg
import Glibc
import Synchronization

/// What libav* logged at error level while a capture was active (their callback is
/// process-wide; nothing is printed).
private struct LogCapture {
    var depth = 0
    var partial = ""
    var lines: [String] = []
    /// The errors each watched context logged (`withErrors(loggedBy:)`), by its address.
    var bySource: [UInt: [String]] = [:]
}

private let logCapture = Mutex(LogCapture())

private let logCaptureInstalled: Void = {
    av_log_set_callback { source, level, format, args in
        guard level <= AV_LOG_ERROR, let format, let args else { return }
        var buffer = [CChar](repeating: 0, count: 1024)
        _ = vsnprintf(&buffer, buffer.count, format, args)
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        logCapture.withLock { c in
            if c.bySource[UInt(bitPattern: source)] != nil, !text.trimmingSpaces.isEmpty {
                c.bySource[UInt(bitPattern: source)]!.append(text.trimmingSpaces)
            }
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

/// Runs `body`, returning its result and the errors `source` (an FFmpeg context, such as a
/// demuxer's AVFormatContext) logged meanwhile, from any thread, one string per message.
func withErrors<T>(loggedBy source: UnsafeMutableRawPointer, _ body: () -> T) -> (value: T, errors: [String]) {
    installLogCapture()
    let key = UInt(bitPattern: source)
    logCapture.withLock { $0.bySource[key] = [] }
    let value = body()
    return (value, logCapture.withLock { $0.bySource.removeValue(forKey: key) ?? [] })
}

private extension String {
    var trimmingSpaces: String {
        var s = Substring(self)
        while let c = s.first, c == " " || c == "\n" || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\n" || c == "\t" { s = s.dropLast() }
        return String(s)
    }
}
