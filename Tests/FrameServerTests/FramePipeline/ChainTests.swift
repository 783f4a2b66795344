import Foundation
import Testing

// The README's first command and the chain benchmark: whole chains of framesrv processes.
@Suite(.serialized) struct ChainTests {
    /// `framesrv demo` runs produce -> blur -> rgb -> record as four processes and leaves a
    /// recording that ffprobe reads with every frame, at the source's size and rate.
    @Test func demoRecordsTheWholeChain() throws {
        let scratch = try Scratch()
        let output = scratch.file("demo.mp4")
        let r = try scratch.run(["demo", "--frames", "30", "-o", output], timeout: 120)
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        #expect(r.stdout.contains("the recording is \(output)"), "\(r.stdout)")
        for stage in ["decode", "blur", "rgb", "record"] {
            #expect(r.stdout.contains("demo: \(stage): "), "no summary of stage \(stage): \(r.stdout)")
        }
        let (status, out, err) = try shell(
            "ffprobe -v error -select_streams v:0 -count_frames -show_entries stream=nb_read_frames,width,height,r_frame_rate -of csv=p=0 '\(output)'", scratch)
        #expect(status == 0, "\(err)")
        #expect(String(decoding: out, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) == "1280,720,30/1,30")
        // Nothing of the demo's streams is left behind but their (empty) lock files.
        let left = try FileManager.default.contentsOfDirectory(atPath: scratch.path)
            .filter { $0.hasPrefix("demo") && !$0.hasSuffix(".mp4") && !$0.hasSuffix(".lock") }
        #expect(left == [])
        #expect(try scratch.run(["demo", "-i", scratch.file("missing.mp4")]).status == 2)
    }

    /// `bench chain -i SMALL` times the four-process chain and one ffmpeg doing the same,
    /// and checks that both produced the same frames.
    @Test func benchChainSmoke() throws {
        let scratch = try Scratch()
        let path = try generateClip(MediaInput(file: "small.mp4", rate: "25", frames: 20,
                                                       ffmpegArgs: ["-c:v", "libx264", "-pix_fmt", "yuv420p"]), scratch)
        let r = try scratch.run(["bench", "chain", "-i", path], timeout: 120)
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        #expect(r.stdout.contains("chain of processes: 20 frames"), "\(r.stdout)")
        #expect(r.stdout.contains("single ffmpeg:      20 frames"), "\(r.stdout)")
        #expect(r.stdout.contains("ratio chain/ffmpeg wall time"), "\(r.stdout)")
        #expect(r.stdout.contains("framemd5 of the chain identical to ffmpeg's"), "\(r.stdout)")
    }
}
