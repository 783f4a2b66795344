/// A command that ran and failed in a way only the command can tell: main prints it as
/// the one error line.
enum CommandError: Error, CustomStringConvertible {
    /// produce --stats-json: the file cannot be written; check the path.
    case statisticsNotWritten(path: String)
    /// demo: one stage failed while the others ran (they were stopped), with its last error line.
    case demoStageFailed(stage: String, why: String)

    var description: String {
        switch self {
        case .statisticsNotWritten(let path): "cannot write the statistics to '\(path)'"
        case .demoStageFailed(let stage, let why): "the \(stage) stage failed: \(why)"
        }
    }
}
