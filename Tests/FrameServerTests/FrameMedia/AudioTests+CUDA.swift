import Foundation
import Testing

/// A movie's sound beside its pictures on a CUDA stream (`produce -i --memory cuda`, and
/// `--hwaccel cuda`, which shares the path): the sound is a host audio stream NAME-audio, as
/// on the host path. Runs through libframesrv's stand-in driver (clients/c/tests/fakecuda);
/// scripts/test-gpu's stages run the NVDEC path on a device.
extension AudioTests {
    /// Both streams exist before anything is decoded and --wait-for 2 counts a consumer of
    /// either: the sound equals ffmpeg's framemd5, and the pictures, downloaded, too.
    @Test func cudaStreamCarriesItsSoundBeside() throws {
        let scratch = try Scratch()
        let cuda = ["FRAMESRV_LIBCUDA": try ClientTools.fakeCUDA()]
        let path = try clip("movie.mp4", "-c:a aac", scratch, video: true)
        let producer = try scratch.start(["produce", "-i", path, "--memory", "cuda", "--out", "film", "--wait-for", "2"],
                                         environment: cuda)
        let download = try scratch.start(["download", "--in", "film", "--out", "film-back", "--wait-for", "1", "--wait", "30"],
                                         executable: try ClientTools.cTool("framesrv-cuda"), environment: cuda)
        let video = try scratch.start(["sink", "--in", "film-back", "--framemd5", "-", "--wait", "30"])
        let audio = try scratch.start(["sink", "--in", "film-audio", "--framemd5", "-", "--wait", "30"])
        #expect(audio.wait(timeout: 60) == 0, "\(audio.stderr)")
        #expect(video.wait(timeout: 60) == 0, "\(video.stderr)")
        #expect(download.wait(timeout: 60) == 0, "\(download.stderr)")
        #expect(producer.wait(timeout: 60) == 0, "\(producer.stderr)")
        #expect(audio.stdout == (try ffmpegAudioMD5(path, scratch)))
        #expect(frameLines(video.stdout) == frameLines(try ffmpegFramemd5(path, scratch)))
        #expect(producer.stdout.contains("film-audio: published") && producer.stdout.contains("uploaded from host memory"),
                "\(producer.stdout)")
        #expect(!producer.stderr.contains("not carried"), "\(producer.stderr)")

        // -an: the pictures alone, the stream opened at the first frame as before.
        let alone = try scratch.start(["produce", "-i", path, "--memory", "cuda", "--out", "mute", "-an", "--wait-for", "1"],
                                      environment: cuda)
        let back = try scratch.start(["download", "--in", "mute", "--out", "mute-back", "--wait-for", "1", "--wait", "30"],
                                     executable: try ClientTools.cTool("framesrv-cuda"), environment: cuda)
        let pictures = try scratch.run(["sink", "--in", "mute-back", "--framemd5", "-", "--wait", "30"])
        #expect(alone.wait(timeout: 60) == 0 && back.wait(timeout: 60) == 0, "\(alone.stderr) \(back.stderr)")
        #expect(frameLines(pictures.stdout) == frameLines(try ffmpegFramemd5(path, scratch)))
        #expect(!alone.stdout.contains("audio"), "\(alone.stdout)")
    }
}
