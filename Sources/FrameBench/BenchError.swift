import FoundationEssentials

/// Why a benchmark stopped. Each case says what went wrong in which benchmark and what to
/// do about it; a peer's failure that does not stop the benchmark is `peerFailed`.
public enum BenchError: Error, CustomStringConvertible, Sendable {
    /// A stage of a run (a framesrv command or the Python producer) exited with `status`.
    case stageFailed(bench: String, stage: String, status: Int32, said: String)
    /// ffmpeg, the peer or the clip generator, failed while `doing`.
    case ffmpegFailed(bench: String, doing: String, status: Int32, said: String)
    /// A program the benchmark runs cannot be found or started.
    case missingProgram(String, remedy: String)
    /// scripts/python-env did not give a python with the framesrv package.
    case noPython(status: Int32, said: String)
    /// The file given with -i cannot be read.
    case unreadableInput(bench: String, path: String)
    /// A run ended without delivering every frame (or byte) it should have.
    case incompleteRun(bench: String, what: String, said: String)
    /// Consumers or a stream did not appear within `seconds`.
    case notAttached(bench: String, who: String, seconds: Int, said: String)
    /// The chain's framemd5 differs from ffmpeg's doing the same work.
    case framesDiffer(bench: String)
    /// A seek of the seek-latency section did not get its frame.
    case seekFailed(String)
    /// A seek-latency run failed (`reason`), with what its producer said.
    case seekRunFailed(reason: String, producer: String, status: Int32, said: String)
    /// A peer's run failed; the benchmark notes it and goes on.
    case peerFailed(String)

    public var description: String {
        switch self {
        case .stageFailed(let bench, let stage, let status, let said):
            return "bench \(bench): \(stage) failed (status \(status))\(colon(said)); run it alone with the same options to see why"
        case .ffmpegFailed(let bench, let doing, let status, let said):
            return "bench \(bench): ffmpeg failed \(doing) (status \(status))\(colon(said)); check that ffmpeg on PATH reads the input"
        case .missingProgram(let program, let remedy):
            return "bench: cannot run \(program): \(remedy)"
        case .noPython(let status, let said):
            return "bench: scripts/python-env failed (status \(status))\(colon(said)); run it by hand, or give --python PATH"
        case .unreadableInput(let bench, let path):
            return "bench \(bench): cannot read '\(path)'; give a readable file with -i, or leave -i out for a generated clip"
        case .incompleteRun(let bench, let what, let said):
            return "bench \(bench): \(what)\(colon(said)); a loaded machine can starve a stage: run it again on a quieter one"
        case .notAttached(let bench, let who, let seconds, let said):
            return "bench \(bench): \(who) did not attach within \(seconds) s\(colon(said)); check FRAMESRV_DIR and 'framesrv ls'"
        case .framesDiffer(let bench):
            return "bench \(bench): the chain's frames differ from ffmpeg's; compare the framemd5 files with 'framesrv sink --framemd5'"
        case .seekFailed(let what):
            return "bench record: \(what); try the seek by hand with 'framesrv ctl NAME seek T'"
        case .seekRunFailed(let reason, let producer, let status, let said):
            return "\(reason) (\(producer): status \(status)\(said.isEmpty ? "" : " " + said))"
        case .peerFailed(let what):
            return what
        }
    }

    private func colon(_ said: String) -> String {
        let text = said.trimmed
        return text.isEmpty ? "" : ": " + text
    }
}
