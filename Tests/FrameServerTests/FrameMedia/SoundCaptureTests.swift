import Foundation
import Testing

/// Capture devices with sound (issue 25): libavdevice's `-f pulse` from a real PulseAudio
/// server (a null sink that module-sine plays a 440 Hz tone into, captured from its monitor)
/// and `-f alsa` through alsa-lib's `null` device, each a live source that `-t` ends.
extension AudioTests {
    /// A private PulseAudio server in `scratch` (no system bus, no cookie: anonymous access
    /// on its own socket), with sink `fs` playing a 440 Hz sine; the environment that
    /// reaches it (PULSE_SERVER).
    func pulseServer(_ scratch: Scratch) throws -> (server: Spawned, environment: [String: String]) {
        let socket = scratch.file("pulse-native")
        let home = ["HOME": scratch.path, "XDG_RUNTIME_DIR": scratch.path]
        let server = try scratch.start(["-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no",
                                        "--load=module-native-protocol-unix socket=\(socket) auth-anonymous=1",
                                        "--load=module-null-sink sink_name=fs", "--load=module-sine sink=fs frequency=440"],
                                       executable: try RequiredTool.pulseaudio.path(), environment: home)
        #expect(eventually(timeout: 20) { FileManager.default.fileExists(atPath: socket) }, "pulseaudio: \(server.stderr)")
        return (server, home.merging(["PULSE_SERVER": "unix:" + socket]) { $1 })
    }

    /// `produce -f pulse -i fs.monitor -t 1` into `sink --wav`: the producer ends by itself
    /// after a second of sound (before, -t never ended a capture), and what the WAV holds is
    /// the server's tone: 48 kHz stereo s16 (what libavdevice's pulse input asks for by
    /// default), about a second of it,
    /// crossing zero 880 times a second.
    @Test func pulseCaptureCarriesTheServersSound() throws {
        let scratch = try Scratch()
        let (server, environment) = try pulseServer(scratch)
        defer { server.kill() }
        let wav = scratch.file("mic.wav")
        let sink = try scratch.start(["sink", "--in", "mic", "--wav", wav, "--lossless", "--quiet", "--wait", "30"])
        let producer = try scratch.start(["produce", "-f", "pulse", "-i", "fs.monitor", "-t", "1", "--out", "mic", "--wait-for", "1"],
                                         environment: environment)
        #expect(producer.wait(timeout: 30) == 0, "\(producer.stderr)")
        #expect(sink.wait(timeout: 30) == 0, "\(sink.stderr)")
        #expect(producer.stdout.contains("audio frames of 48000 Hz stereo s16 (pcm_s16le"), "\(producer.stdout)")
        let samples = try wavSamples(wav)
        let seconds = Double(samples.count / 2) / 48000
        #expect(seconds > 0.5 && seconds < 1.1, "\(seconds) s captured for -t 1")
        let left = stride(from: 0, to: samples.count, by: 2).map { samples[$0] }
        let crossings = zip(left, left.dropFirst()).filter { ($0 < 0) != ($1 < 0) }.count
        let perSecond = Double(crossings) / seconds
        #expect(perSecond > 800 && perSecond < 960, "\(perSecond) zero crossings a second, expected 880 (a 440 Hz tone)")
    }

    /// `produce -f alsa -i null -t 0.3`: alsa-lib's null device (no sound card needed) is
    /// captured as a live source and the producer ends at -t: 0.3 s of samples (14,400 at
    /// 48 kHz), fewer only by frames dropped at the source. -t counts the samples from when the
    /// capture starts reading, after the wait for its consumer: a sink that comes a second
    /// later gets them too (it got one frame when -t counted from the device's opening).
    @Test(arguments: [false, true])
    func alsaCaptureEndsAtItsDuration(sinkComesLater: Bool) throws {
        let scratch = try Scratch()
        let producer = try scratch.start(["produce", "-f", "alsa", "-i", "null", "-t", "0.3", "--out", "alsa", "--wait-for", "1"])
        if sinkComesLater {
            #expect(eventually(timeout: 20) { scratch.snapshot("alsa") != nil }, "\(producer.stderr)")
            usleep(1_000_000)
        }
        let sink = try scratch.start(["sink", "--in", "alsa", "--framemd5", "-", "--lossless", "--wait", "30"])
        #expect(producer.wait(timeout: 30) == 0, "\(producer.stderr)")
        #expect(sink.wait(timeout: 30) == 0, "\(sink.stderr)")
        #expect(producer.stdout.contains("Hz stereo s16 (pcm_s16le"), "\(producer.stdout)")
        let durations = frameLines(sink.stdout).compactMap { line -> Int? in
            let c = line.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            return c.count == 6 ? Int(c[3]) : nil
        }
        let samples = durations.reduce(0, +)
        let noneDropped = producer.stdout.contains("dropped 0,")
        #expect(noneDropped ? samples == 14400 : (1...14400).contains(samples),
                "\(samples) samples in \(durations.count) frames for -t 0.3: \(producer.stdout)")
    }

    /// The samples of a 16-bit PCM WAV (its data chunk, interleaved).
    func wavSamples(_ path: String) throws -> [Int16] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        var i = 12
        while i + 8 <= bytes.count {
            let size = Int(bytes[i + 4]) | Int(bytes[i + 5]) << 8 | Int(bytes[i + 6]) << 16 | Int(bytes[i + 7]) << 24
            if bytes[i..<i + 4].elementsEqual("data".utf8) {
                let data = bytes[(i + 8)..<min(bytes.count, i + 8 + size)]
                return stride(from: data.startIndex, to: data.endIndex - 1, by: 2).map { Int16(bitPattern: UInt16(data[$0]) | UInt16(data[$0 + 1]) << 8) }
            }
            i += 8 + size + (size & 1)
        }
        throw TestFailure("\(path): no data chunk")
    }
}
