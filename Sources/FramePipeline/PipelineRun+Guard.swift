import FrameProcess
import FrameServer
import Glibc

/// What a run leaves behind, and the guard that stops it should the run die first.
extension PipelineRun {
    /// The processes of this run still there: below this process, in a stage's process
    /// group, marked with `mark`, or below one that is; every descendant after `Orphans.adopt()`.
    /// The guard is spared (it exits once released).
    var leftovers: Leftovers {
        Self.leftovers(mark: mark, groups: Set(children.map(\.process.processIdentifier)), guardian: guardian)
    }

    static func leftovers(mark: String, groups: Set<pid_t>, guardian: RunGuard) -> Leftovers {
        Leftovers(mark: mark, groups: groups, root: getpid(), everything: Orphans.adopted, spared: [guardian.process.processIdentifier])
    }

    /// The guard of the run named `token`, told the run's directory.
    static func startGuard(_ framesrv: String, _ token: String, _ directory: RuntimeDirectory) throws(PipelineError) -> RunGuard {
        let guardian: RunGuard
        do { guardian = try RunGuard(executable: framesrv, arguments: guardArguments(token)) } catch {
            throw PipelineError("cannot start run's guard: \(error)")
        }
        guardian.watch(directory: directory.path)
        return guardian
    }

    /// How long what the stages left has between SIGTERM and SIGKILL at the end of a run.
    public static let leftoverGraceSeconds = 5.0

    /// The environment variable that marks a run's stages (and so their own children): its
    /// value names the run.
    public static let markKey = "FRAMESRV_RUN"

    static func mark(_ token: String) -> String { markKey + "=" + token }

    /// framesrv's arguments for the guard of the run named `token`.
    static func guardArguments(_ token: String) -> [String] { ["run", "--guard", token] }

    /// The guard's side (`framesrv run --guard TOKEN`): waits for the run to end, and stops
    /// what it left if it ended without doing so itself (`RunGuard.serve`).
    public static func serveAsGuard(token: String) { _ = RunGuard.serve(mark: mark(token)) }

    /// How many inotify instances a user may hold (fs.inotify.max_user_instances), nil when
    /// unknown. Every consumer holds one while it runs (it waits for its stream through it),
    /// so it bounds the stages of a run that wait for their streams at once.
    public static var streamWatchLimit: Int? {
        readSmallFile("/proc/sys/fs/inotify/max_user_instances").flatMap { Int($0.filter(\.isNumber)) }
    }
}
