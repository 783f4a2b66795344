import CFrameServer

/// Why a consumer could not attach to a stream or read its next frame.
public enum ConsumerError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The stream name cannot be a file name: check the --in name.
    case invalidStreamName(String)
    /// The runtime directory cannot be used (see the case inside).
    case directory(RuntimeDirectoryError)
    /// No producer appeared for the stream within the wait time: start one, or check FRAMESRV_DIR.
    case streamNotFound(String, directory: String, waitedSeconds: Double)
    /// The stream ended before this consumer attached (its frames went to no consumer):
    /// start consumers first, or wait for the next producer.
    case streamEnded(String, frames: UInt64)
    /// All consumer entries of the stream are taken: stop one first.
    case tooManyConsumers(String, max: Int)
    /// The pool cannot give one more live consumer its hold limit without stalling the
    /// producer (`ControlSegment.admitsLiveConsumer`): more --slots, or attach lossless.
    case poolTooSmallForLive(stream: String, slots: Int, liveConsumers: Int, holdLimit: Int)
    /// A live consumer tried to hold more frames than the stream allows at once: release one first.
    case holdLimit(max: Int)
    /// The stream's frames are in device memory (PROTOCOL.md 4.5), which this host-memory
    /// consumer never maps as bytes: read it with a CUDA consumer.
    case deviceMemory(stream: String, StreamMemory)
    /// The stream carries another kind of frames (PROTOCOL.md 4.6) than this consumer reads.
    case wrongMedia(stream: String, found: MediaKind)
    /// The consumer's entry in the control segment was freed or closed by another process
    /// while it waited (damage, a bug): the producer serves it no more.
    case entryLost(stream: String, index: Int)
    /// The producer is gone and the stream cannot continue.
    case producerGone(String)
    /// The control segment or a pool failed validation or was truncated while mapped
    /// (another protocol version, a foreign file, a bad field).
    case segment(SegmentError)
    /// A frame header in a pool slot failed validation: the frame was released and
    /// skipped (`Consumer.badFrames` counts it); the next `next()` goes on after it.
    case badFrame(path: String, slot: UInt32, FrameHeaderError)
    /// Watching the runtime directory for the stream failed.
    case system(SystemCallError)
    /// The doorbell socket (`Consumer.descriptor`) could not be made or connected.
    case transport(TransportError)
    /// This consumer was opened by process `opener` and is used in its forked child `child`,
    /// whose copy names the parent's entry: nothing was done; the child must open its own.
    case forked(stream: String, opener: Int32, child: Int32)

    /// The device ("GPU-..." as nvidia-smi names it) of a stream in device memory (a CUDA
    /// stream), which a host consumer cannot map; nil for any other error.
    public var cudaDevice: String? { if case .deviceMemory(_, let memory) = self { memory.device } else { nil } }

    public var description: String {
        switch self {
        case .invalidStreamName(let n): StreamNameError.invalid(n).description
        case .directory(let e): e.description
        case .streamNotFound(let n, let dir, let s):
            "no stream named '\(n)' appeared in \(dir) within \(s) s; start a producer with --out \(n) (or check FRAMESRV_DIR)"
        case .streamEnded(let n, let frames):
            "stream '\(n)' ended before this consumer attached (\(frames) frames published to no consumer);"
                + " start consumers first (the producer waits for one unless --no-wait), or --wait S for its next producer"
        case .tooManyConsumers(let n, let max):
            "stream '\(n)' already has \(max) consumers, the most one stream supports; stop one first"
        case .poolTooSmallForLive(let stream, let slots, let live, let limit):
            "stream '\(stream)' has \(slots) slots and \(live) live consumer(s) holding up to \(limit) frames each; "
                + "one more would stall the producer: start it with more --slots or attach --lossless"
        case .holdLimit(let max):
            "a live consumer may hold at most \(max) frames at once; release a frame before taking the next"
        case .deviceMemory(let stream, let memory):
            "stream '\(stream)' holds its frames in \(memory), which this consumer (host memory) cannot map; "
                + "read it with a CUDA consumer (libframesrv with FRAMESRV_MEMORY_CUDA), or a host copy of it: "
                + "framesrv-cuda download --in \(stream) --out \(stream)-host (libframesrv's tool)"
        case .wrongMedia(let stream, let found):
            found == .audio
                ? "stream '\(stream)' carries audio, which this consumer (video frames) cannot read; read it with a sink (framesrv sink --in \(stream) --framemd5 -)"
                : "stream '\(stream)' carries video, not audio; give this consumer an audio stream (produce's --audio-out NAME)"
        case .entryLost(let stream, let index):
            "stream '\(stream)': this consumer's entry \(index) in the control segment was freed or closed by another process, "
                + "so its producer serves it no more; attach again (framesrv clean removes a damaged stream's files)"
        case .producerGone(let n): "the producer of stream '\(n)' exited"
        case .segment(let e): e.userMessage
        case .badFrame(let path, let slot, let e): "bad frame header in \(path) slot \(slot): \(e); frame skipped"
        case .system(let e): e.description
        case .transport(let e): e.description
        case .forked(let stream, let opener, let child): ForkCheck.message("consumer", stream: stream, opener: opener, child: child)
        }
    }
}
