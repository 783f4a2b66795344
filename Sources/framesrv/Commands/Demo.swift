import Foundation
import FrameServer

/// `framesrv demo`: the quickest look at what framesrv does.
enum DemoCommand: Command {
    static let name = "demo"
    static let summary = "run a producer and two consumer processes and show what they received"
    static let help = """
    usage: framesrv demo [--frames N] [--size WxH] [--rate FPS]

    Starts three processes on one stream: a test-pattern producer, a lossless consumer
    (gets every frame, in order; the producer waits for it) and a deliberately slow live
    consumer (never slows the producer; takes the newest frame and counts what it missed).
    Both consumers verify every byte of every frame. Midway it shows 'framesrv inspect'.
      --frames N      frames to publish (default 300)
      --size WxH      frame size (default 1280x720)
      --rate FPS      frames per second (default 60)
    """

    static func run(_ args: inout Arguments) throws -> Int32 {
        let frames = try args.int("--frames", range: 1...10_000_000) ?? 300
        let size = try args.value("--size") ?? "1280x720"
        _ = try parseSize(size, option: "--size")
        let rate = try args.double("--rate", range: 1...10_000) ?? 60
        try args.finish()

        let dir = try RuntimeDirectory()
        let stream = "demo-\(getpid())"
        print("demo: stream '\(stream)' in \(dir.path): \(frames) frames of \(size) yuv420p at \(formatDouble(rate, 0)) fps")
        let lossless = try Child(["sink", "--in", stream, "--null", "--lossless", "--verify", "--name", "lossless-sink"],
                                 label: "lossless consumer")
        let live = try Child(["sink", "--in", stream, "--null", "--live", "--verify", "--hold-us", "40000", "--name", "slow-live-sink"],
                             label: "live consumer (holds each frame 40 ms)")
        let producer = try Child(["produce", "--pattern", "--out", stream, "--frames", "\(frames)", "--size", size,
                                  "--rate", "\(rate)", "--wait-for", "1"], label: "producer")
        Thread.sleep(forTimeInterval: min(Double(frames) / rate / 2, 5))
        if let s = try? StreamSnapshot.read(stream, in: dir) {
            print("demo: midway, 'framesrv inspect \(stream)' says:")
            print("  published \(s.published), free slots \(s.freeSlots)/\(s.slots), format \(s.format ?? "-")")
            for c in s.consumers {
                print("  consumer #\(c.index) \(c.name) (\(c.mode)): delivered \(c.delivered), missed \(c.missed), lag \(c.lag), holding \(c.held)")
            }
        }
        var status: Int32 = 0
        for child in [producer, lossless, live] {
            let (code, out) = child.finish()
            print("demo: \(child.label): \(out.trimmingCharacters(in: .whitespacesAndNewlines))")
            if code != 0 { status = 1 }
        }
        print(status == 0 ? "demo: every frame each consumer received was intact; the live consumer skipped frames instead of slowing the producer."
                          : "demo: a process failed (see above)")
        return status
    }
}
