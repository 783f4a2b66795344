import FrameProcess
import FrameServer

/// Which streams have published a frame, as run last looked: a lossless consumer that
/// exits 0 before its stream published anything leaves the producer waiting for it forever
/// (its --wait-for counts it), so run fails instead of hanging.
struct StreamReads {
    let pipeline: Pipeline
    let dir: RuntimeDirectory
    private var published: Set<Int> = []
    /// Streams with an exited lossless consumer whose producer has not created them yet.
    private var pending: Set<Int> = []

    init(_ pipeline: Pipeline, _ dir: RuntimeDirectory) { self.pipeline = pipeline; self.dir = dir }

    /// The first lossless stage that exited 0 (not stopped by run) before its running
    /// producer published a frame, with the line that says so.
    mutating func unread(_ children: [Child], stopped: Set<Int>) -> (stage: Int, line: String?)? {
        pending = []
        for (i, stage) in pipeline.stages.enumerated() {
            guard stage.lossless, !stopped.contains(i), children[i].exitStatus == 0 else { continue }
            for s in stage.inputs where !published.contains(s) {
                if let line = unread(s, children) { return (i, line) }
            }
        }
        return nil
    }

    /// The line for stream `s` if its producer runs and the stream exists but published
    /// nothing; nil otherwise (noting a stream published, or not created yet).
    private mutating func unread(_ s: Int, _ children: [Child]) -> String? {
        let stream = pipeline.streams[s]
        guard children[stream.producer].isRunning else { return nil }
        guard let snapshot = try? StreamSnapshot.read(stream.name, in: dir) else { pending.insert(s); return nil }
        if snapshot.published > 0 || snapshot.streamState != .running { published.insert(s); return nil }
        let n = stream.waitFor
        return "it exited before reading a frame of stream '\(stream.name)', whose producer (stage "
            + "\(stream.producer + 1)) would wait for its \(n) lossless consumer\(n == 1 ? "" : "s") forever"
    }

    /// Whether stream `s` is not created yet while a consumer that exited waits for it to be judged.
    func awaited(_ s: Int) -> Bool { pending.contains(s) }
}
