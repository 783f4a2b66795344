/// A command that ran and failed in a way only the command can tell (its input's producer
/// failed, a stage failed): main prints it as the one error line and exits with `status`.
enum CommandError: Error, CustomStringConvertible {
    /// sink: stopped while the stream's producer was gone without ending it (the stream did not end).
    case producerExited(stream: String, pid: Int32)
    /// sink: the producer ended the stream after its input failed; what arrived was kept.
    case sinkInputFailed(stream: String, received: Int)
    /// filter: the producer of its input ended the stream after its input failed; its output ends failed too.
    case filterInputFailed(input: String, output: String)
    /// produce -i: more decoding errors than ffmpeg's -max_error_rate (2/3) allows.
    case tooManyDecodeErrors(input: String, decoded: Int, failures: Int)
    /// produce --stats-json: the file cannot be written; check the path.
    case statisticsNotWritten(path: String)
    /// demo: one stage failed while the others ran (they were stopped), with its last error line.
    case demoStageFailed(stage: String, why: String)
    /// demo: a stage exited non-zero at the end; its errors were printed above.
    case demoStagesFailed
    /// ctl: the stream's control socket refused the request, saying why.
    case controlRefused(stream: String, message: String)
    /// run: a stage failed; the line names it and says why, the status is the stage's own.
    case pipelineFailed(line: String, status: Int32)

    var description: String {
        switch self {
        case .producerExited(let stream, let pid): "the producer of '\(stream)' (pid \(pid)) exited without ending the stream"
        case .sinkInputFailed(let stream, let received):
            "the producer of '\(stream)' ended the stream after its input failed; \(received) frames received"
        case .filterInputFailed(let input, let output):
            "the producer of '\(input)' ended the stream after its input failed; '\(output)' ends failed too"
        case .tooManyDecodeErrors(let input, let decoded, let failures):
            "'\(input)': \(decoded) frames decoded, \(failures) decoding errors:"
                + " more than ffmpeg's -max_error_rate (2/3) allows; exit status 69, as ffmpeg's"
        case .statisticsNotWritten(let path): "cannot write the statistics to '\(path)'"
        case .demoStageFailed(let stage, let why): "the \(stage) stage failed: \(why)"
        case .demoStagesFailed: "a stage failed (see above)"
        case .controlRefused(let stream, let message): "\(stream): \(message)"
        case .pipelineFailed(let line, _): line
        }
    }

    /// The status framesrv exits with.
    var status: ExitStatus {
        switch self {
        case .tooManyDecodeErrors: .inputFailed
        case .pipelineFailed(_, let status): ExitStatus(passingOn: status)
        default: .failed
        }
    }
}
