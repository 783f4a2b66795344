import Foundation
import FrameControl
import FrameMedia
import FrameServer
import Glibc
import Testing

/// Issue 13, run-time control of a producer that reads a file: `framesrv ctl NAME pause |
/// resume | seek T | rate X | step N | status` over the stream's control socket, with
/// ffmpeg as the oracle for what a seek lands on.
@Suite struct PlaybackControlTests {
    /// 4 s of H.264 at 30 fps (120 frames, a keyframe every second, B-frames).
    static func clip(_ scratch: Scratch) throws -> String {
        try generateClip(MediaInput(file: "clip.mp4", rate: "30", frames: 120,
                                    ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-g", "30", "-bf", "2"]), scratch)
    }

    /// Starts `produce -i CLIP --out STREAM ARGS` and waits for its control socket.
    static func producer(_ clip: String, _ stream: String, _ args: [String], _ scratch: Scratch) throws -> Spawned {
        let p = try scratch.start(["produce", "-i", clip, "--out", stream] + args)
        guard eventually(timeout: 20, { access(scratch.directory.controlSocketPath(stream), F_OK) == 0 }) else {
            throw TestFailure("no control socket for \(stream): \(p.stderr)")
        }
        return p
    }

    static func ctl(_ args: [String], _ scratch: Scratch) throws -> (status: Int32, stdout: String, stderr: String) {
        try scratch.run(["ctl"] + args, timeout: 20)
    }

    static func status(_ stream: String, _ scratch: Scratch) throws -> PlaybackStatus {
        let r = try ctl([stream, "status", "--json"], scratch)
        guard r.status == 0, let s = PlaybackStatus(json: r.stdout) else { throw TestFailure("status: \(r.stdout) \(r.stderr)") }
        return s
    }

    /// The frame lines of a framemd5 listing (no comments).
    static func frameLines(_ md5: String) -> [Substring] {
        md5.split(separator: "\n").filter { !$0.hasPrefix("#") }
    }

    /// Pause stops time: while paused nothing is published; after resume the lossless
    /// consumer gets every frame of the file (framemd5 equals ffmpeg's) and nothing is dropped.
    @Test func pausePublishesNothingAndLosesNothing() throws {
        let scratch = try Scratch()
        let clip = try Self.clip(scratch)
        let producer = try Self.producer(clip, "s", ["-re", "--wait-for", "1"], scratch)
        let sink = try scratch.start(["sink", "--in", "s", "--framemd5", "-"])
        #expect(eventually { (scratch.snapshot("s")?.published ?? 0) >= 10 })
        #expect(try Self.ctl(["s", "pause"], scratch).stdout == "ok paused\n")
        let released = try Self.status("s", scratch).frames
        usleep(400_000)   // an observation window, not a synchronisation: nothing may happen in it
        let later = try Self.status("s", scratch)
        #expect(later.paused && later.frames == released)
        #expect(scratch.snapshot("s")?.published == released, "every frame released was published, none since")
        #expect(try Self.ctl(["s", "resume"], scratch).stdout == "ok playing\n")
        #expect(sink.wait(timeout: 60) == 0, "sink: \(sink.stderr)")
        #expect(producer.wait(timeout: 60) == 0, "producer: \(producer.stderr)")
        #expect(sink.stdout == (try ffmpegFramemd5(clip, scratch)))
        #expect(producer.stdout.contains("published 120 frames") && producer.stdout.contains("dropped 0,"), "\(producer.stdout)")
    }

    /// A looping input (`--loop -1`) reports its position within the file and the loop it
    /// plays, in status, ls and ls --json; `seek T` goes to T of the file and `seek +T`
    /// counts from the position in the file, whatever the loops played.
    @Test func loopingInputReportsItsPositionInTheFile() throws {
        let scratch = try Scratch()
        let clip = try Self.clip(scratch)
        let producer = try Self.producer(clip, "lp", ["--loop", "-1", "--no-wait"], scratch)
        defer { producer.kill() }
        #expect(eventually(timeout: 30) { ((try? Self.status("lp", scratch))?.loops ?? 0) >= 2 })
        #expect(try Self.ctl(["lp", "pause"], scratch).status == 0)
        let paused = try Self.status("lp", scratch)
        #expect(paused.loops >= 2 && paused.position >= 0 && paused.position < 4.0, "\(paused)")
        let ls = try scratch.run(["ls"]).stdout
        #expect(ls.contains("/4.0 paused") && ls.contains("(loop \(paused.loops + 1))"), "\(ls)")
        let json = try scratch.run(["ls", "--json"]).stdout
        #expect(json.contains("\"loops\":\(paused.loops)"), "\(json)")
        #expect(try Self.ctl(["lp", "seek", "1"], scratch).status == 0)
        #expect(try Self.ctl(["lp", "step", "1"], scratch).status == 0)
        #expect(eventually { ((try? Self.status("lp", scratch))?.frames ?? 0) > paused.frames })
        let sought = try Self.status("lp", scratch)
        #expect(sought.position >= 1.0 && sought.position < 1.1 && sought.loops == paused.loops, "\(sought)")
        let relative = try Self.ctl(["lp", "seek", "+1"], scratch)
        #expect(relative.status == 0 && relative.stdout.contains("seek 2.0"), "\(relative.stdout) \(relative.stderr)")
    }

    /// A file of sound only, looping: a seek lands within the file, and the next play's
    /// position starts from the file's start again (not from where the seek went), in the
    /// same loop count the seek left.
    @Test func loopingSoundReportsItsPositionAfterASeek() throws {
        let scratch = try Scratch()
        let sound = scratch.file("tone.wav")
        let (g, _, err) = try shell("ffmpeg -v error -f lavfi -i sine=frequency=440:d=1.5 -c:a pcm_s16le '\(sound)'", scratch)
        try #require(g == 0, "\(err)")
        let producer = try Self.producer(sound, "tone", ["--loop", "-1", "-re", "--no-wait"], scratch)
        defer { producer.kill() }
        #expect(eventually(timeout: 30) { ((try? Self.status("tone", scratch))?.loops ?? 0) >= 1 })
        #expect(try Self.ctl(["tone", "seek", "1.2"], scratch).status == 0)
        let sought = try Self.status("tone", scratch)
        #expect(sought.position >= 1.2 && sought.position < 1.5, "\(sought)")
        // The play after the seek's: its position is within the file again.
        #expect(eventually(timeout: 30) { ((try? Self.status("tone", scratch))?.loops ?? 0) > sought.loops })
        var positions: [Double] = []
        for _ in 0..<5 {
            positions.append(try Self.status("tone", scratch).position)
            usleep(100_000)
        }
        #expect(positions.allSatisfy { $0 >= 0 && $0 <= 1.5 }, "positions after the loop: \(positions)")
    }

    /// `step 5` publishes exactly 5 frames and stays paused; the rest follows on resume.
    @Test func stepPublishesExactlyThatManyFrames() throws {
        let scratch = try Scratch()
        let clip = try Self.clip(scratch)
        let producer = try Self.producer(clip, "s", ["--paused"], scratch)
        let sink = try scratch.start(["sink", "--in", "s", "--framemd5", "-"])
        #expect(try Self.ctl(["s", "step", "5"], scratch).stdout == "ok step 5 (paused)\n")
        #expect(eventually { scratch.snapshot("s")?.published == 5 })
        usleep(300_000)   // observation window: a sixth frame would show here
        #expect(scratch.snapshot("s")?.published == 5)
        let s = try Self.status("s", scratch)
        #expect(s.paused && s.frames == 5)
        #expect(abs(s.position - 4.0 / 30) < 1e-6, "position is the last frame's time")
        // ls and top show it too, asked from the control socket.
        let ls = try scratch.run(["ls", "--json"])
        let listed = try JSONSerialization.jsonObject(with: Data(ls.stdout.utf8)) as? [[String: Any]]
        let playback = listed?.first { $0["name"] as? String == "s" }?["playback"] as? [String: Any]
        #expect(playback?["paused"] as? Bool == true && playback?["frames"] as? Int == 5 && playback?["rate"] is NSNull, "\(ls.stdout)")
        let top = try scratch.run(["top", "-b", "-n", "1"])
        #expect(top.stdout.split(separator: "\n").contains { $0.hasPrefix("s ") && $0.contains("0.1/4.0 paused max") }, "\(top.stdout)")
        #expect(try Self.ctl(["s", "step"], scratch).status == 0)
        #expect(eventually { scratch.snapshot("s")?.published == 6 })
        #expect(try Self.ctl(["s", "toggle"], scratch).stdout == "ok playing\n")
        #expect(sink.wait(timeout: 60) == 0, "sink: \(sink.stderr)")
        #expect(producer.wait(timeout: 60) == 0, "producer: \(producer.stderr)")
        #expect(sink.stdout == (try ffmpegFramemd5(clip, scratch)))
    }

    /// `rate 2` is taken while the file plays: status reports it, and the lossless consumer
    /// still gets every frame, in order, none skipped at the change. (That it halves the time
    /// between frames: Timing/LatencyTests.)
    @Test func rateTwoKeepsEveryFrameInOrder() throws {
        let scratch = try Scratch()
        let clip = try Self.clip(scratch)
        let producer = try Self.producer(clip, "s", ["--paused", "-re", "--wait-for", "1"], scratch)
        let sink = try scratch.start(["sink", "--in", "s", "--framemd5", "-"])
        #expect(try Self.ctl(["s", "resume"], scratch).status == 0)
        #expect(eventually { (scratch.snapshot("s")?.published ?? 0) >= 20 })
        #expect(try Self.ctl(["s", "rate", "2"], scratch).stdout == "ok rate 2.00x\n")
        #expect(try Self.status("s", scratch).rate == 2)
        #expect(sink.wait(timeout: 60) == 0, "sink: \(sink.stderr)")
        #expect(producer.wait(timeout: 60) == 0, "producer: \(producer.stderr)")
        #expect(sink.stdout == (try ffmpegFramemd5(clip, scratch)))
    }

    /// Seek into the middle of an H.264 file lands on the frame ffmpeg -ss gives: after 10
    /// frames, `seek 2.1`, and the frames that follow are those of `ffmpeg -ss 2.1 -i FILE`
    /// (framemd5: content and rebased timestamps); the first carries the discontinuity flag.
    /// (One framemd5 per part: ffmpeg's VFR sync would drop frames whose pts go back.)
    @Test func seekLandsOnTheFrameFFmpegGives() throws {
        let scratch = try Scratch()
        let clip = try Self.clip(scratch)
        let producer = try Self.producer(clip, "s", ["--paused"], scratch)
        let consumer = try Consumer(stream: "s", options: ConsumerOptions(mode: .lossless), directory: scratch.directory)
        try consumer.attach()
        let before = try FrameMD5Writer(path: scratch.file("before.md5"), frameRate: Rational(30, 1))
        let after = try FrameMD5Writer(path: scratch.file("after.md5"), frameRate: Rational(30, 1))
        #expect(try Self.ctl(["s", "step", "10"], scratch).status == 0)
        for _ in 0..<10 {
            let frame = try nextFrame(consumer)
            #expect(!frame.header.flags.contains(.discontinuity))
            try before.write(frame)
            frame.release()
        }
        #expect(try Self.ctl(["s", "seek", "2.1"], scratch).stdout == "ok seek 2.100\n")
        #expect(try Self.ctl(["s", "resume"], scratch).status == 0)
        var flags: [Bool] = []
        while let frame = try consumer.next() {
            flags.append(frame.header.flags.contains(.discontinuity))
            try after.write(frame)
            frame.release()
        }
        try before.flush()
        try after.flush()
        #expect(producer.wait(timeout: 60) == 0, "producer: \(producer.stderr)")
        #expect(flags.first == true && flags.dropFirst().allSatisfy { !$0 }, "the first frame after the seek only")
        let whole = try ffmpegFramemd5(clip, scratch)
        let got = try String(contentsOfFile: scratch.file("before.md5"), encoding: .utf8)
        #expect(Self.frameLines(got) == Array(Self.frameLines(whole).prefix(10)))
        #expect(try String(contentsOfFile: scratch.file("after.md5"), encoding: .utf8)
                == (try ffmpegFramemd5(clip, before: "-ss 2.1", scratch)))
    }

    /// Bad controls get one clear line each and a non-zero status, and change nothing: the
    /// producer keeps running and answers. The socket is 0600; a dead producer's is a
    /// leftover that `framesrv clean` removes.
    @Test func badControlsAreOneLineEachAndTheProducerKeepsRunning() throws {
        let scratch = try Scratch()
        let clip = try Self.clip(scratch)
        let producer = try Self.producer(clip, "s", ["--paused", "--no-wait"], scratch)
        let pattern = try scratch.start(["produce", "--pattern", "--out", "pat", "--rate", "30"])
        #expect(eventually { scratch.snapshot("pat") != nil })
        let cases: [([String], Int32, String)] = [
            (["s", "rate", "0"], 2, "rate takes a rate from 0.01 to 100"),
            (["s", "frobnicate"], 2, "unknown control 'frobnicate'"),
            (["s", "seek", "99"], 1, "past the end"),
            (["s", "step", "0"], 2, "step takes a frame count"),
            (["s", "seek", "9223372036854"], 2, "out of range (a time is at most 365 days"),
            (["pat", "pause"], 1, "'pat' has no control socket"),
            (["nosuch", "pause"], 1, "no stream 'nosuch'"),
        ]
        for (args, status, message) in cases {
            let r = try Self.ctl(args, scratch)
            #expect(r.status == status, "\(args): \(r.stderr)")
            #expect(r.stderr.split(separator: "\n").count == 1 && r.stderr.contains(message), "\(args): \(r.stderr)")
        }
        #expect(try Self.ctl(["s", "seek", "-1"], scratch).stdout == "ok seek 0.000\n", "back 1 s, from 0")
        let s = try Self.status("s", scratch)
        #expect(s.paused && s.frames == 0 && s.duration == 4 && s.rate == nil)
        #expect(try Self.ctl(["s", "status"], scratch).stdout == "s: 0.000/4.000 s paused max, 0 frames\n")
        // A producer that does not answer (stopped): one line after 2 s, and it answers once it runs again.
        producer.signal(SIGSTOP)
        let silent = try Self.ctl(["s", "status"], scratch)
        producer.signal(SIGCONT)
        #expect(silent.status == 1 && silent.stderr.split(separator: "\n").count == 1 && silent.stderr.contains("did not answer within 2"),
                "\(silent.stderr)")
        #expect(try Self.status("s", scratch).paused)
        #expect(producer.isRunning && pattern.isRunning)
        var st = stat()
        #expect(stat(scratch.directory.controlSocketPath("s"), &st) == 0 && st.st_mode & 0o777 == 0o600)
        producer.kill()
        #expect(access(scratch.directory.controlSocketPath("s"), F_OK) == 0, "SIGKILL leaves the socket file")
        let clean = try scratch.run(["clean"])
        #expect(clean.stdout.contains("s.control"), "\(clean.stdout)")
        #expect(access(scratch.directory.controlSocketPath("s"), F_OK) != 0)
        pattern.signal(SIGINT)
        #expect(pattern.wait(timeout: 30) == 0)
    }

    /// The control API other commands reuse (record's snapshot, replay): a server serves
    /// only its verb set, refuses the others in one line, and the clock steps exactly.
    @Test func controlServerServesItsVerbsOnly() throws {
        let scratch = try Scratch()
        let snapshots = Locked(0)
        let server = try ControlServer(stream: "rec", directory: scratch.directory, verbs: [.snapshot]) { request in
            snapshots.withLock { $0 += 1 }
            return .ok("snapshot written")
        }
        defer { server.close() }
        #expect(try ControlClient.send(.snapshot, to: "rec", directory: scratch.directory) == .ok("snapshot written"))
        #expect(try ControlClient.send(.pause, to: "rec", directory: scratch.directory) == .error("'rec' does not take 'pause' (it takes: snapshot)"))
        #expect(server.answer("seek") == .error("seek needs a time T (seconds or [HH:]MM:SS[.xxx]; +T / -T from the current position)"))
        #expect(server.answer("frobnicate 3").isError)
        #expect(snapshots.withLock { $0 } == 1)
        #expect(try ControlRequest.parse("seek -5") == .seek(.relative(-5)))
        #expect(try ControlRequest.parse("seek 01:02.5") == .seek(.absolute(62.5)))
        #expect(try ControlRequest.parse("rate max") == .rate(nil))
        #expect(throws: ControlRequestError.badArgument(.rate, "101")) { try ControlRequest.parse("rate 101") }

        let clock = PlaybackClock(rate: 1, paused: true)
        clock.step(2)
        #expect(clock.wait(toRelease: 0, shouldStop: { false }) == .now)
        #expect(clock.wait(toRelease: 10, shouldStop: { false }) == .now, "a step does not wait for the frame's time")
        var asked = 0
        #expect(clock.wait(toRelease: 20, shouldStop: { asked += 1; return asked > 2 }) == .stopped, "paused: nothing more")
        #expect(clock.state.released == 2 && clock.state.position == 10 && clock.state.paused)
        clock.requestSeek(3)
        #expect(clock.wait(toRelease: 20, shouldStop: { false }) == .seek(3))
        clock.didSeek(to: 3)
        #expect(clock.state.position == 3 && clock.state.pendingSeek == nil)
    }

    /// A filter downstream of a seek flushes its graph and starts a new one: libavfilter's
    /// fps filter, which drops frames whose time goes backwards, passes every frame after
    /// the seek, and the discontinuity reaches the filter's consumer.
    @Test func aFilterStartsAnewAfterASeek() throws {
        let scratch = try Scratch()
        let clip = try Self.clip(scratch)
        let producer = try Self.producer(clip, "s", ["--paused"], scratch)
        let filter = try scratch.start(["filter", "--in", "s", "--out", "f", "--vf", "fps=30", "--wait-for", "1"])
        let sink = try scratch.start(["sink", "--in", "f", "--null"])
        #expect(try Self.ctl(["s", "step", "10"], scratch).status == 0)
        #expect(eventually { scratch.snapshot("s")?.published == 10 })
        #expect(try Self.ctl(["s", "seek", "2.1"], scratch).status == 0)
        #expect(try Self.ctl(["s", "resume"], scratch).status == 0)
        #expect(producer.wait(timeout: 60) == 0, "producer: \(producer.stderr)")
        #expect(filter.wait(timeout: 60) == 0, "filter: \(filter.stderr)")
        #expect(sink.wait(timeout: 60) == 0, "sink: \(sink.stderr)")
        let seeked = Self.frameLines(try ffmpegFramemd5(clip, before: "-ss 2.1", scratch)).count
        #expect(sink.stdout.contains("received \(10 + seeked) frames") && sink.stdout.contains("(1 discontinuity)"), "\(sink.stdout)")
    }
}
