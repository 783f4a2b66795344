import FoundationEssentials
import FramePipeline
import FrameProcess
import FrameServer
import Glibc

/// `framesrv run`: a pipeline of stages, each its own process, wired and supervised.
enum RunCommand: Command {
    static let name = "run"
    static let summary = "run a pipeline described as gst-launch does: \"produce -i in.mp4 ! filter ... ! sink ...\""
    static var help: String { """
    usage: framesrv run [--quiet] "PIPELINE"
           framesrv run [--quiet] -f FILE

    Starts every stage of PIPELINE as its own process, creates the streams between them,
    and supervises them. The description is gst-launch-1.0's: '!' links a stage to the
    next, name=NAME names the stream a stage publishes, and NAME. starts another chain
    reading that stream (fan-out). An exec stage joins named streams with {in:NAME}. A
    chain also starts at produce or exec right after a complete produce, filter or sink.
    Words are split and quoted as a shell does; in a FILE, newlines are blanks and '#'
    starts a comment.

      produce ARGS        framesrv produce (run adds --out and --wait-for). audio=NAME publishes
                          the input's sound as stream NAME (branch from it with NAME.); without
                          it a file's sound is left out (-an; produce names what it leaves)
      filter ARGS         framesrv filter (run adds --in, --out and --wait-for); --af for sound
      sink ARGS           framesrv sink (run adds --in); --record FILE --audio NAME records the
                          stream NAME beside the pictures (a lossless consumer of it too)
      queue [size=N]      a buffer of N frames (default 30, 1..64) for the branch after it:
                          framesrv filter --vf null --slots N, which reads its input losslessly
                          and copies each frame into a stream of N slots of its own (one copy)
      tee name=NAME       no process: names the stream through it, to branch from with NAME.
                          (A stream its producer named, produce ... name=cam, keeps its name;
                          NAME. then reads it too.)
      exec [--live] PROGRAM ARGS
                          any program (found on PATH); in ARGS, {in} is the stream it reads,
                          {out} the stream it creates, {wait-for} its lossless consumers,
                          and {in:NAME} the stream named NAME, which it reads too (a join).
                          It counts as a lossless consumer of what it reads (its producers
                          wait for it) unless --live says it reads live

      framesrv run "produce -i in.mp4 ! filter --preset blur=4 ! filter --preset rgb ! sink --record out.mp4"
      framesrv run "produce -i in.mp4 ! tee name=t  t. ! sink --null  t. ! filter --preset gray ! sink --record g.mp4"
      framesrv run "produce -i in.mp4 ! exec python3 my_filter.py --in {in} --out {out} ! sink --null"
      framesrv run "produce -i in.mp4 audio=snd ! filter --vf gblur ! sink --record out.mkv --audio snd"
      framesrv run "produce -i a.mp4 name=a  produce -i b.mp4 name=b  exec python3 average.py
                    {in:a} {in:b} --out {out} --wait-for {wait-for} ! sink --record avg.mp4"

    Unnamed streams are called runPID-1, runPID-2, ...; named ones keep their name. Each
    producer waits for all of its lossless consumers (stages without --live; an exec stage
    counts once for each stream it reads), and stages start sinks first, so every lossless
    consumer gets every frame from the first (an exec stage that publishes should wait for
    {wait-for} consumers too). While the stages run, run shows their streams as 'framesrv
    top' does; when standard output is not a terminal, one line every 2 s instead
    ('12:01:05 cam 250 frames 25.0 fps | ...'); not with --quiet. A live source (-re) that
    drops frames for want of a free slot says so, and which consumer held the slots: put a
    queue before a slow branch. Every line a stage writes on standard error comes out on
    run's as it comes, after the stage's name ('edges | text': its name=, its script or
    program, or its kind).

    When every stage has exited 0, run exits 0. When a stage fails, run stops the others
    (SIGINT, then SIGKILL 5 s later), removes what is left of its streams and exits with
    that stage's status (128+N for a stage killed by signal N, as a shell does: 'killed by
    SIGSEGV', 139) and its error: its line, or its last lines (a Python traceback whole). A lossless stage that exits before reading a
    frame fails the run too (its producer would wait for it forever). A stage whose
    consumers have all exited (a sink with --frames N) is stopped as Ctrl-C would stop it.

    Ctrl-C (SIGINT or SIGTERM to run) stops the sources only: the chain drains into the
    sinks, so recordings are complete (stages still running 30 s later are stopped). A
    second Ctrl-C kills every stage at once (SIGKILL to each stage's process group),
    removes the streams, and run exits 130.

    Each stage runs in a process group of its own, with descriptors 0, 1 and 2 only and
    every signal at its default; a stage ends when its process exits, whatever its own
    children keep open. run is the reaper of every orphan below it (PR_SET_CHILD_SUBREAPER),
    so what a stage starts stays below run, even a child that calls setsid, and when run
    ends every such process still there gets SIGTERM, and SIGKILL 5 s later (at once after
    a second Ctrl-C). Should run itself die first (SIGKILL), a guard it starts (framesrv
    run --guard, in a group of its own) does the same, for the stages too, and removes
    their streams.

    A stage that reads a stream (sink, filter, queue; an exec stage through framesrv's
    clients, one for each stream it reads) holds an inotify instance while it runs, and a
    user may hold fs.inotify.max_user_instances of them at once (\(watchLimit) here, for all of
    the user's processes): a run with more such stages waiting at once fails at the first
    that gets none, in one line (raise it: sysctl fs.inotify.max_user_instances=N). A
    stream takes 63 lossless consumers at most (its producer's --wait-for).

      -f FILE      read the description from FILE
      --quiet      no live view
    """ }

    /// The per-user inotify limit as the kernel says it now, or what it is by default.
    static var watchLimit: String { PipelineRun.streamWatchLimit.map(String.init) ?? "128 by default" }

    static func run(_ o: RunOptions) throws -> ExitStatus {
        if let token = o.guardToken {
            PipelineRun.serveAsGuard(token: token)
            return .success
        }
        let pipeline = try parse(o.description)
        let dir = try RuntimeDirectory()
        Interrupts.install()
        signal(SIGPIPE, SIG_IGN)
        // Every child of run is a stage (or its guard): orphans below them stay below run, to be stopped at its end.
        Orphans.adopt()
        let run = try PipelineRun(pipeline, directory: dir)
        run.notice = { warn($0) }
        let going = { run.poll(interrupts: Interrupts.count) }
        if o.quiet {
            while going() { usleep(100_000) }
        } else {
            LiveView(directory: dir, streams: pipeline.streamOrder.map { pipeline.streams[$0].name }).run(while: going)
        }
        let outcome = run.finish()
        if let error = outcome.error { throw CommandError.pipelineFailed(line: error, status: outcome.status) }
        return ExitStatus(passingOn: outcome.status)
    }

    static func parse(_ description: RunOptions.Description) throws(UsageError) -> Pipeline {
        let base = "run\(getpid())"
        do {
            switch description {
            case .text(let text): return try Pipeline(parsing: text, base: base)
            case .words(let words): return try Pipeline(words: words, base: base)
            }
        } catch { throw UsageError(error.description) }
    }
}
