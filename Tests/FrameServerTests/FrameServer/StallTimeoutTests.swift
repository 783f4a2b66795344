import CFrameServer
import Foundation
@testable import FrameServer
import Glibc
import Testing

/// Issue 9 finding 11: one consumer can no longer stall the producer. A lossless consumer
/// that takes no frame for `stallTimeout` while the producer waits is demoted to live; a
/// live consumer the pool cannot serve without stalling the producer is refused at attach.
@Suite struct StallTimeoutTests {
    @Test func stalledLosslessConsumerIsDemotedToLive() throws {
        let scratch = try Scratch()
        var options = ProducerOptions()
        options.slots = 4
        options.stallTimeout = 0.2
        let producer = try Producer(stream: "stall", options: options, directory: scratch.directory)
        let consumer = try Consumer(stream: "stall", directory: scratch.directory)
        try consumer.attach()
        #expect(producer.waitForLosslessConsumers(1, timeoutSeconds: 10))
        // The consumer takes nothing: four frames fill the pool with its reservations, and
        // the fifth waits until the stall timeout demotes it.
        let format = FrameFormat(.gray8, width: 16, height: 16)
        for _ in 0..<10 { try publishPattern(producer, format) }
        #expect(producer.demotedCount == 1)
        #expect(producer.losslessConsumerCount == 0)
        let entry = scratch.snapshot("stall")?.consumers.first
        #expect(entry?.mode == "live", "\(String(describing: entry))")
        // It goes on as a live consumer: the newest frame, the rest counted as missed.
        let seq = try nextFrame(consumer).sequence
        #expect(seq == 10)
        #expect(consumer.demotedToLive)
        #expect(consumer.missed > 0)
        producer.close()
    }

    @Test func liveConsumerIsRefusedWhenThePoolCannotServeIt() throws {
        let scratch = try Scratch()
        var options = ProducerOptions()
        options.slots = 4   // live_max_held 2: one live consumer leaves 2 slots, two leave none
        let producer = try Producer(stream: "small", options: options, directory: scratch.directory)
        let first = try Consumer(stream: "small", options: ConsumerOptions(mode: .live), directory: scratch.directory)
        try first.attach()
        let second = try Consumer(stream: "small", options: ConsumerOptions(mode: .live), directory: scratch.directory)
        #expect(throws: ConsumerError.poolTooSmallForLive(stream: "small", slots: 4, liveConsumers: 1, holdLimit: 2)) {
            try second.attach()
        }
        let message = ConsumerError.poolTooSmallForLive(stream: "small", slots: 4, liveConsumers: 1, holdLimit: 2).description
        #expect(message.contains("--slots") && !message.contains("\n"))
        // A lossless consumer is still welcome, and the refused one left no entry behind.
        let lossless = try Consumer(stream: "small", directory: scratch.directory)
        try lossless.attach()
        #expect(producer.waitForLosslessConsumers(1, timeoutSeconds: 10))
        #expect(scratch.snapshot("small")?.consumers.count == 2)
        producer.close()
    }

    @Test func nominalRateIsReadFromTheConsumer() throws {
        let scratch = try Scratch()
        var options = ProducerOptions()
        options.nominalRate = Rational(framesPerSecond: 29.97)
        let producer = try Producer(stream: "rate", options: options, directory: scratch.directory)
        let consumer = try Consumer(stream: "rate", directory: scratch.directory)
        #expect(consumer.nominalRate == nil, "nil before attaching")
        try consumer.attach()
        #expect(consumer.nominalRate == Rational(2997, 100))
        #expect(consumer.nominalTimeBase == Rational(100, 2997))
        producer.close()
    }
}
