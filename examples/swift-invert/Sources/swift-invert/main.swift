// swift-invert: a filter stage of your own, in Swift. It reads stream A (lossless: every
// frame, in order) and publishes a negative of each frame as stream B: every byte of every
// plane becomes 255 - x (luma and chroma alike, alpha too), the frame's timestamps, time
// base, duration, colour and flags pass through, and so does A's nominal rate. B ends when
// A ends, and on SIGINT/SIGTERM (its consumers still get every frame published first).
// 8-bit formats only (gray, nv12, yuv420p, yuv422p, yuv444p, rgb24, bgr24, rgba, bgra,
// gbrp): a frame of another format (10/16-bit) ends the stage with one error line, exit 1.
//
// Run it from the repository's root:
//   swift build && swift build -c release --package-path examples/swift-invert
//   .build/debug/framesrv produce --pattern --out A --frames 300 &
//   examples/swift-invert/.build/release/swift-invert --in A --out B &
//   .build/debug/framesrv sink --in B --y4m - | ffplay -
// --wait-for N publishes nothing until N lossless consumers read B (as framesrv's own stages).

import FrameServer
import Glibc

/// The formats whose samples are all bytes, so that 255 - x is their negative.
let eightBit: Set<PixelFormat> = [.gray8, .nv12, .yuv420p, .yuv422p, .yuv444p, .rgb24, .bgr24, .rgba, .bgra, .gbrp]

struct Options {
    var input = "", output = "", waitFor = 0
}

/// A frame this stage cannot invert (it ends B as failed).
struct NotEightBit: Error, CustomStringConvertible {
    let pixelFormat: String
    var description: String { "\(pixelFormat) is not an 8-bit format: nothing to invert" }
}

/// One line to standard error, then exit.
func fail(_ message: String, status: Int32) -> Never {
    var line = "swift-invert: \(message)\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    exit(status)
}

func parse(_ arguments: [String]) -> Options {
    let usage = "usage: swift-invert --in A --out B [--wait-for N]"
    if arguments.contains(where: { $0 == "--help" || $0 == "-h" }) { print(usage); exit(0) }
    var o = Options()
    var rest = arguments[...]
    while let flag = rest.popFirst() {
        guard let value = rest.popFirst() else { fail("\(flag) needs a value\n\(usage)", status: 2) }
        switch flag {
        case "--in": o.input = value
        case "--out": o.output = value
        case "--wait-for":
            guard let n = Int(value), n >= 0 else { fail("--wait-for takes a count, not '\(value)'", status: 2) }
            o.waitFor = n
        default: fail("unknown option \(flag)\n\(usage)", status: 2)
        }
    }
    if o.input.isEmpty || o.output.isEmpty { fail(usage, status: 2) }
    return o
}

// README: filter begin
/// B's frame = 255 - A's frame, byte by byte, row by row (each side has its own stride).
func invert(_ frame: borrowing Frame, into out: borrowing WritableFrame, _ format: FrameFormat) {
    for p in format.pixelFormat.planes.indices {
        for y in 0..<format.rows(plane: p) {
            let src = frame.row(y, plane: p), dst = out.row(y, plane: p)
            for x in 0..<src.count { dst[x] = ~src[x] }   // 255 - x
        }
    }
}

/// Reads A until it ends (or a stop signal), publishing each frame's negative as B.
func run(_ o: Options) throws {
    StopSignal.install()                          // SIGINT/SIGTERM: end B cleanly
    let input = try Consumer(stream: o.input)     // lossless
    input.shouldStop = StopSignal.shouldStop
    try input.attach()                            // waits for A: its rate is known from here
    var options = ProducerOptions()
    options.nominalRate = input.nominalRate     // exact: B has A's rate
    let output = try Producer(stream: o.output, options: options)
    output.shouldStop = StopSignal.shouldStop
    defer { output.close() }                      // ends B: its consumers get every frame first
    if o.waitFor > 0, !output.waitForLosslessConsumers(o.waitFor) { return }   // false: stopped
    while let frame = try input.next() {
        guard let format = frame.format, eightBit.contains(format.pixelFormat) else {
            output.finish(failed: true)
            throw NotEightBit(pixelFormat: frame.header.pixelFormatName)
        }
        guard var out = try output.reserve(format) else { break }   // nil: a stop signal
        invert(frame, into: out, format)
        out.description = frame.description       // pts, time base, duration, colour, flags
        out.publish()
    }                                             // A's frame is released here
    output.finish(failed: input.sourceFailed)
}
// README: filter end

do { try run(parse(Array(CommandLine.arguments.dropFirst()))) } catch {
    fail("error: \(error)", status: 1)
}
