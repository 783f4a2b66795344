import FrameControl
import FrameMedia
import FrameServer
import Dispatch
import Glibc

/// On a terminal, a replay's keys and progress line: space pauses or resumes, right/left
/// arrow seeks 5 s forward/back, + and - double and halve the rate, '.' steps one frame; the
/// line `position/duration s state rate, N frames` is redrawn on stderr twice a second.
/// Keys are read in non-canonical mode without echo; `stop()` restores the terminal.
///
/// The corresponding C functions are `tcgetattr`, `tcsetattr` and `poll`.
final class PlaybackKeys: @unchecked Sendable {
    // @unchecked Sendable: `running` is guarded by `lock`; the clock is thread-safe.
    private let clock: PlaybackClock
    private let status: @Sendable () -> PlaybackStatus
    private let duration: Double?
    private var saved = termios()
    private let keys: Bool
    private let lock = ThreadLock()
    private var running = true
    private let done = DispatchGroup()

    /// Starts when standard error is a terminal (keys too when standard input is one); nil otherwise.
    init?(clock: PlaybackClock, duration: Double?, status: @escaping @Sendable () -> PlaybackStatus) {
        guard stderrIsTerminal else { return nil }
        self.clock = clock
        self.duration = duration
        self.status = status
        keys = isatty(0) != 0 && tcgetattr(0, &saved) == 0
        if keys {
            var raw = saved
            raw.c_lflag &= ~tcflag_t(ICANON | ECHO)
            tcsetattr(0, TCSANOW, &raw)
        }
        done.enter()
        pthread_detach(spawnThread { [self] in
            loop()
            done.leave()
        })
    }

    private var isRunning: Bool {
        lock.lock()
        defer { lock.unlock() }
        return running
    }

    /// Ends the line and restores the terminal.
    func stop() {
        lock.lock()
        running = false
        lock.unlock()
        done.wait()
        if keys { tcsetattr(0, TCSANOW, &saved) }
        write("\n")
    }

    private func loop() {
        var last: UInt64 = 0
        var pending: [UInt8] = []
        while isRunning {
            var item = pollfd(fd: 0, events: Int16(POLLIN), revents: 0)
            if keys, poll(&item, 1, 100) > 0 {
                var byte: UInt8 = 0
                if read(0, &byte, 1) == 1 { pending.append(byte); pending = handle(pending) }
            } else if !keys {
                usleep(100_000)
            }
            let now = monotonicNanos()
            if now - last >= 500_000_000 { draw(); last = now }
        }
        draw()
    }

    /// Acts on a complete key (an arrow is ESC [ C or ESC [ D); returns what is still incomplete.
    private func handle(_ bytes: [UInt8]) -> [UInt8] {
        if bytes.first == 0x1B {
            guard bytes.count >= 3 else { return bytes.count == 2 && bytes[1] != UInt8(ascii: "[") ? [] : bytes }
            switch bytes[2] {
            case UInt8(ascii: "C"): control(.seek(.relative(5)))
            case UInt8(ascii: "D"): control(.seek(.relative(-5)))
            default: break
            }
            return []
        }
        switch bytes[0] {
        case UInt8(ascii: " "): _ = clock.toggle()
        case UInt8(ascii: "."): clock.step(1)
        case UInt8(ascii: "+"): setRate(2)
        case UInt8(ascii: "-"): setRate(0.5)
        default: break
        }
        draw()
        return []
    }

    private func setRate(_ factor: Double) {
        guard let rate = clock.state.rate else { return }
        clock.setRate(min(PlaybackClock.rates.upperBound, max(PlaybackClock.rates.lowerBound, rate * factor)))
    }

    private func control(_ request: ControlRequest) {
        if case .error(let message) = clock.handle(request, duration: duration, canSeek: true, status: status) {
            write("\r")
            warn(message)
        }
    }

    private func draw() {
        let s = status()
        write("\r\(s.line), \(s.frames) frames   ")
    }

    private func write(_ text: String) {
        var text = text
        text.withUTF8 { _ = try? writeAll(2, UnsafeRawBufferPointer($0)) }
    }
}
