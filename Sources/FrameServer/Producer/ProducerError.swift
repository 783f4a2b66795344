import CFrameServer

/// Why a producer could not create its stream, reserve or lease a slot, or go on publishing.
public enum ProducerError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The stream name cannot be a file name: pick another --out name.
    case invalidStreamName(String)
    /// The runtime directory cannot be used (see the case inside).
    case directory(RuntimeDirectoryError)
    /// Another live process already produces this stream: stop it or pick another --out name.
    case streamBusy(String, producerPID: Int32)
    /// `ProducerOptions.slots` out of 1...64.
    case slotCount(Int)
    /// A frame size out of 1x1 ... 16384x16384.
    case frameSize(width: Int, height: Int)
    /// An audio frame outside PROTOCOL.md 4.6's limits (rate, channels, layout, samples).
    case audioFormat(String)
    /// A video frame reserved on an audio stream, or the other way round.
    case wrongMedia(stream: String, MediaKind)
    /// A larger format needs a new pool epoch, but reserved frames are still unpublished.
    case framesOutstanding(Int, String)
    /// A segment could not be created, or was truncated under the producer.
    case segment(SegmentError)
    /// A system call for the stream failed (its lock, its eventfd, publishing its control segment).
    case system(SystemCallError)
    /// The stream's doorbell socket could not be made or bound.
    case transport(TransportError)
    /// This producer was opened by process `opener` and is used in its forked child `child`:
    /// nothing was done (the parent's stream goes on); the child must open its own.
    case forked(stream: String, opener: Int32, child: Int32)

    public var description: String {
        switch self {
        case .invalidStreamName(let n): StreamNameError.invalid(n).description
        case .directory(let e): e.description
        case .streamBusy(let n, let pid):
            "stream '\(n)' already has a running producer (pid \(pid)); stop it or pick another --out name"
        case .slotCount(let n): "--slots must be between 1 and \(FS_MAX_SLOTS), not \(n)"
        case .frameSize(let w, let h): "frame size \(w)x\(h) is out of range (1x1 to 16384x16384)"
        case .audioFormat(let problem): "audio frame out of range: \(problem)"
        case .wrongMedia(let stream, let kind):
            "stream '\(stream)' carries \(kind); a frame of the other kind cannot be published on it"
        case .framesOutstanding(let n, let format):
            "publish or drop the \(n) frame(s) you hold before reserving a larger format (\(format))"
        case .segment(let e): e.userMessage
        case .system(let e): e.description
        case .transport(let e): e.description
        case .forked(let stream, let opener, let child): ForkCheck.message("producer", stream: stream, opener: opener, child: child)
        }
    }
}
