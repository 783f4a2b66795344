import FrameServer
import Glibc

/// An ffmpeg-style status line for long jobs (sink, filter):
///
///     frame=  123 fps= 30 size=     512kB time=00:00:04.10 bitrate=1023.4kbits/s speed=1.0x
///
/// Shown only when standard error is a terminal (and the command is not quiet), rewritten
/// in place with `\r` about twice a second, and finished with a newline by `finish()`.
/// Otherwise every call is a no-op, so commands call it unconditionally.
struct Progress {
    let enabled: Bool
    /// Refresh interval in nanoseconds.
    var interval: UInt64 = 500_000_000
    private let start: UInt64
    private var lastShown: UInt64 = 0
    private var shownWidth = 0
    private var shown = false

    /// `enabled`: show anything at all (default: standard error is a terminal).
    init(enabled: Bool = stderrIsTerminal) {
        self.enabled = enabled
        start = monotonicNanos()
    }

    /// Reports the job's state; redraws the line when `interval` has passed since the last time.
    /// `frames`: frames done; `mediaSeconds`: the media time they cover; `bytes`: output size, when there is one.
    mutating func update(frames: Int, mediaSeconds: Double, bytes: Int64? = nil) {
        guard enabled else { return }
        let now = monotonicNanos()
        guard now - lastShown >= interval else { return }
        lastShown = now
        draw(Self.line(frames: frames, mediaSeconds: mediaSeconds, bytes: bytes, elapsedSeconds: Double(now - start) / 1e9))
    }

    /// Draws the final state and ends the line (only if a line was shown or `frames` > 0).
    mutating func finish(frames: Int, mediaSeconds: Double, bytes: Int64? = nil) {
        guard enabled, shown || frames > 0 else { return }
        let elapsed = Double(monotonicNanos() - start) / 1e9
        draw(Self.line(frames: frames, mediaSeconds: mediaSeconds, bytes: bytes, elapsedSeconds: elapsed))
        var newline = "\n"
        newline.withUTF8 { _ = try? writeAll(2, UnsafeRawBufferPointer($0)) }
        shown = false
        shownWidth = 0
    }

    private mutating func draw(_ line: String) {
        // Pad over what a longer previous line left.
        var text = "\r" + line
        if line.count < shownWidth { text += String(repeating: " ", count: shownWidth - line.count) }
        shownWidth = line.count
        shown = true
        text.withUTF8 { _ = try? writeAll(2, UnsafeRawBufferPointer($0)) }
    }

    /// The status text (ffmpeg's fields and widths).
    static func line(frames: Int, mediaSeconds: Double, bytes: Int64?, elapsedSeconds: Double) -> String {
        let fps = elapsedSeconds > 0 ? Double(frames) / elapsedSeconds : 0
        var s = "frame=" + String(frames).leftPadding(5)
        s += " fps=" + formatDouble(fps, fps < 9.95 ? 1 : 0).leftPadding(3)
        if let bytes { s += " size=" + (String(bytes / 1024) + "kB").leftPadding(10) }
        s += " time=" + timecode(mediaSeconds)
        if let bytes {
            if mediaSeconds > 0 {
                s += " bitrate=" + formatDouble(Double(bytes) * 8 / mediaSeconds / 1000, 1).leftPadding(6) + "kbits/s"
            } else {
                s += " bitrate=N/A"
            }
        }
        if elapsedSeconds > 0, mediaSeconds > 0 {
            let speed = mediaSeconds / elapsedSeconds
            s += " speed=" + formatDouble(speed, speed < 10 ? 2 : speed < 100 ? 1 : 0) + "x"
        } else {
            s += " speed=N/A"
        }
        return s
    }

    /// `HH:MM:SS.cc`.
    static func timecode(_ seconds: Double) -> String {
        let centis = Int((max(0, seconds) * 100).rounded(.down))
        func two(_ v: Int) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(two(centis / 360_000)):\(two(centis / 6000 % 60)):\(two(centis / 100 % 60)).\(two(centis % 100))"
    }
}
