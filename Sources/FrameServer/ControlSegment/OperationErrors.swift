import CFrameServer

/// Why a consumer could not attach to a stream it found.
public enum AttachError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The pool cannot give one more live consumer its hold limit without stalling the
    /// producer (`ControlSegment.admitsLiveConsumer`).
    case poolTooSmallForLive(stream: String, slots: Int, liveConsumers: Int, holdLimit: Int)

    public var description: String {
        switch self {
        case .poolTooSmallForLive(let stream, let slots, let live, let limit):
            "stream '\(stream)' has \(slots) slots and \(live) live consumer(s) holding up to \(limit) frames each; "
                + "one more would stall the producer: start it with more --slots or attach --lossless"
        }
    }
}

/// Why a producer could not be created or could not reserve a slot.
public enum ProduceError: Error, Equatable, Sendable, CustomStringConvertible {
    /// `ProducerOptions.slots` out of 1...64.
    case slotCount(Int)
    /// A frame size out of 1x1 ... 16384x16384.
    case frameSize(width: Int, height: Int)
    /// A larger format needs a new pool epoch, but reserved frames are still unpublished.
    case framesOutstanding(Int, FrameFormat)

    public var description: String {
        switch self {
        case .slotCount(let n): "--slots must be between 1 and \(FS_MAX_SLOTS), not \(n)"
        case .frameSize(let w, let h): "frame size \(w)x\(h) is out of range (1x1 to 16384x16384)"
        case .framesOutstanding(let n, let format):
            "publish or drop the \(n) frame(s) you hold before reserving a larger format (\(format))"
        }
    }
}
