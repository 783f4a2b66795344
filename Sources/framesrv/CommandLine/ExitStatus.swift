/// Every status framesrv exits with. Commands return one (or throw: `CommandError` says
/// its own); main.swift exits with its `rawValue`.
enum ExitStatus: Equatable {
    /// 0: the command did what it was asked.
    case success
    /// 1: it failed; the one `framesrv: error:` line says why.
    case failed
    /// 2: the command line was wrong (an unknown command or option, a bad value); nothing was done.
    case usage
    /// 3: `sink --verify` found frames that are not the test pattern (`corrupt N` in its summary).
    case corruptFrames
    /// 69: `produce -i` met more decoding errors than ffmpeg's -max_error_rate allows, as ffmpeg exits then.
    case inputFailed
    /// 130: stopped by SIGINT or SIGTERM before anything was done (128 + SIGINT, as a shell says).
    case interrupted
    /// `framesrv run`: the status of the stage that failed (128 + N for a stage killed by signal N), passed on.
    case stageFailed(Int32)

    /// A status another process exited with, as one of ours: its own case when it has one.
    init(passingOn status: Int32) {
        let known: [ExitStatus] = [.success, .failed, .usage, .corruptFrames, .inputFailed, .interrupted]
        self = known.first { $0.rawValue == status } ?? .stageFailed(status)
    }

    /// The number the process exits with.
    var rawValue: Int32 {
        switch self {
        case .success: 0
        case .failed: 1
        case .usage: 2
        case .corruptFrames: 3
        case .inputFailed: 69
        case .interrupted: 130
        case .stageFailed(let status): status
        }
    }
}
