// libFuzzer target: a run-time control request (`framesrv ctl`'s text, one ZeroMQ message on
// NAME.control) as a producer that plays a file takes it: ControlRequest.parse, then the
// playback clock's handling of what parsed, with a known and an unknown duration, seekable
// or not. Oracle: no trap (an arithmetic overflow, a NaN turned into an integer), every reply
// one line, and a clock whose position and rate stay finite.
import FrameControl
@testable import FrameMedia

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequest(_ data: UnsafePointer<UInt8>, _ count: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: count), as: UTF8.self)
    let request: ControlRequest
    do throws(ControlRequestError) { request = try ControlRequest.parse(text) } catch {
        checkOneLine(error.description)
        return 0
    }
    for (duration, canSeek) in [(Double?(12.5), true), (nil, true), (Double?(3), false)] {
        let clock = PlaybackClock(rate: 1)
        let status = { PlaybackStatus(stream: "f", position: clock.state.position, duration: duration, rate: clock.state.rate,
                                      paused: clock.state.paused, frames: clock.state.released) }
        checkOneLine(clock.handle(request, duration: duration, canSeek: canSeek, status: status).text)
        let s = clock.state
        guard s.position.isFinite, s.rate.map({ $0.isFinite && $0 > 0 }) ?? true else {
            fatalError("'\(text)' left the clock at position \(s.position), rate \(String(describing: s.rate))")
        }
    }
    return 0
}

func checkOneLine(_ reply: String) {
    guard !reply.isEmpty, !reply.contains("\n") else { fatalError("a reply of \(reply.count) bytes that is not one line: \(reply)") }
}
