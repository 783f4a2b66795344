import Foundation
import FrameServer
import Glibc

// One real frame for FrameMedia's writers, in process: a producer and a lossless consumer
// in a private runtime directory, one test-pattern frame published and received.

struct SetupFailure: Error, CustomStringConvertible {
    let description: String
    init(_ d: String) { description = d }
}

/// Publishes pattern frame 1 of `format` with `description` and hands the received frame
/// to `body`; everything is closed and removed afterwards.
func withPatternFrame(_ format: FrameFormat, _ description: FrameDescription,
                      _ body: (borrowing Frame) throws -> Void) throws {
    let folder = TemporaryFolder("framesrv-media-test")
    let directory = try RuntimeDirectory(path: folder.path)
    var options = ProducerOptions()
    options.slots = 2
    let producer = try Producer(stream: "unit", options: options, directory: directory)
    defer { producer.close() }
    let consumer = try Consumer(stream: "unit", directory: directory)
    try consumer.attach()
    guard producer.waitForLosslessConsumers(1, timeoutSeconds: 10) else { throw SetupFailure("the consumer was not admitted") }
    guard var frame = try producer.reserve(format) else { throw SetupFailure("no slot for \(format)") }
    TestPattern.fill(frame, sequence: producer.nextSequence)
    frame.description = description
    frame.publish()
    guard let received = try consumer.next() else { throw SetupFailure("the stream ended before its frame") }
    do {
        try body(received)
    } catch {
        received.release()
        throw error
    }
    received.release()
}

/// Pattern frame 1's planes, tightly packed (row bytes only, plane after plane).
func packedPattern(_ format: FrameFormat) -> [UInt8] {
    var bytes: [UInt8] = []
    for p in format.pixelFormat.planes.indices {
        for y in 0..<format.rows(plane: p) {
            bytes += (0..<format.rowBytes(plane: p)).map { TestPattern.value(plane: p, x: $0, y: y, sequence: 1) }
        }
    }
    return bytes
}

/// Runs a command line with /bin/sh; returns its standard output, or throws with its standard error.
func run(_ command: String) throws -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/bin/sh")
    p.arguments = ["-c", command]
    let out = Pipe(), err = Pipe()
    p.standardOutput = out
    p.standardError = err
    try p.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    let errors = err.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else { throw SetupFailure("'\(command)' failed: \(String(decoding: errors, as: UTF8.self))") }
    return String(decoding: data, as: UTF8.self)
}
