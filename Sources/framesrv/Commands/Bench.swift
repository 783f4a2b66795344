import FoundationEssentials
import FrameBench

/// `framesrv bench`: benchmarks that print figures next to a peer measured in the same run.
enum BenchCommand: Command {
    static let name = "bench"
    static let summary = "measure: 'bench transport' (throughput, fan-out, wake latency, idle; versus a pipe, iceoryx2, GStreamer), 'bench decode' and 'bench chain' (versus ffmpeg), 'bench clients' (Swift, C, Python), 'bench record' (record, replay, seek; versus ffmpeg), 'bench bridge' (versus ffmpeg tcp://), 'bench audio' (versus ffmpeg and a pipe), 'bench gpu' (CUDA frames; versus torch.multiprocessing)"
    static let help = """
    usage: framesrv bench transport [--seconds S | --frames N] [--quick] [--section N,M] [--python PATH]
           framesrv bench decode [-i FILE] [--threads T]
           framesrv bench chain [-i FILE] [--threads T]
           framesrv bench clients [--seconds S] [--quick] [--python PATH] [--c-tools DIR]
           framesrv bench record [--seconds S | --frames N] [--quick]
           framesrv bench bridge [--frames N] [--quick]
           framesrv bench audio [-i FILE] [--seconds S] [--quick]
           framesrv bench gpu [-i FILE] [--seconds S] [--quick] [--section N,M] [--python PATH]

    transport: every figure next to its peer, measured in the same run, the systems
    alternated, the median of 3 rounds. Every consumer is a separate process; framesrv's
    producer is this process, it paints each slot once and creates the pool before the clock
    starts; frames/s run from the first timed publish to the last (lossless backpressure
    keeps the producer at most a pool ahead of its slowest consumer).
      1. transport alone: one lossless 'sink --null' at 64x64, 1920x1080 and 3840x2160, and
         the 4K/1080p and 4K/64x64 ratios;
      2. peers at the same sizes: a pipe to 'cat > /dev/null'; iceoryx2 (a Python publisher
         and Python subscriber, Sources/FrameBench/peers/iceoryx2_pair.py, when the venv's python imports
         iceoryx2: 'scripts/setup --bench'); GStreamer shmsink -> shmsrc at 1080p and 4K
         when gst-launch-1.0 is installed; framesrv/peer ratios;
      3. fan-out: 4 lossless consumers at 1080p, frames/s each ('sink --null', then Python
         stages: 'python -m framesrv consume --touch'), and iceoryx2 with 4 subscribers;
      4. Python at 1080p: a consumer ('python -m framesrv consume', reading frame.seq; then
         --touch: every frame's planes as numpy views and its publish_ns), a producer
         (reserve -> publish into 'sink --null'), and iceoryx2's Python publisher and subscriber;
      5. wake latency publish -> acquire at 200 fps (the consumer sleeps between frames), p50/p99
         (the median of 7 rounds), 64x64 and 1080p, 'sink --poll-us 0', '--poll-us 1000' and
         '--poll-us 1000000' (spinning throughout), and iceoryx2's Listener and busy-poll, beside
         the bare futex wake between two processes (the floor of any wake);
      6. idle: wake-ups per second of a producer with no consumer and of a consumer with no frames
         (voluntary context switches of all their threads over 2 s), next to the limit 2/s.
      --seconds S    each measurement's length (default 2; --quick: 0.25)
      --frames N     each throughput measurement's frames instead (latency runs: N/20, at least 100)
      --quick        one round of short runs, for smoke tests
      --section N,M  only these sections (1 and 2 run together): --section 5 for the wake
      --python PATH  a python with the framesrv package (and iceoryx2) (default: scripts/python-env's)

    audio: a file's sound decoded into slots ('framesrv produce -i FILE' and one lossless null
    sink process) next to 'ffmpeg -i FILE -map 0:a:0 -f null -', each start to exit, best of 3
    interleaved runs, and the ratio (goal: at least 0.95); then publish -> acquire latency of the
    file played at its own pace (-re) for S seconds (default 10; --quick 3), p50/p99, next to a
    pipe carrying the same bytes at the same pace between two processes of a small C program
    (compiled with cc in a scratch directory; said absent without one). Without -i, 10 minutes
    (--quick: 1) of AAC, 48 kHz stereo, 1024-sample frames (46.9 a second), is generated first.

    gpu: CUDA frames (issue 24), on a machine with an NVIDIA GPU, torch and the framesrv package;
    the processes are Python ones run by --python, and framesrv's C rows a program compiled with
    cc against the bundle's libframesrv (include/ and lib/ beside bin/framesrv; said absent
    without them). Without a CUDA device (nvidia-smi lists no GPU, or torch sees none) it prints
    one line saying so and exits 0.
      1. 3840x2160 nv12 between two processes, transport alone: frames/s, CPU per frame (user+sys
         of both processes) and copies per frame (counted), with the ratios to framesrv's first row:
         a framesrv CUDA stream in C (reserve_on and publish_on, nothing written; a lossless
         consumer's next_on and release_on, each on its own stream) and in Python (the same on
         torch streams; Consumer(device='cuda') taking both planes with torch.from_dlpack);
         torch.multiprocessing (8 CUDA tensors through a Queue, each reused after the consumer's
         done token); a host stream whose consumer uploads each plane with .cuda(); and one
         device-to-device copy a frame in one process, the floor of any design that copies.
         Goal: framesrv at least 10x torch.multiprocessing (each framesrv row's ratio printed).
      2. publish -> ready on the consumer's stream at 60 and 200 fps, both processes in C and both
         in Python: the frame's publish_ns to the consumer's stream synchronized after next on it,
         p50/p99, and the part before next returned (the wake). Goal: p50 at most 50 us.
      3. NVDEC (with an ffmpeg on PATH that lists the cuda hwaccel): 'framesrv produce -i FILE
         --hwaccel cuda' with 1 and with 4 lossless Python CUDA consumers, against 1 and 4
         processes of 'ffmpeg -hwaccel cuda -hwaccel_output_format cuda -i FILE -f null -':
         frames delivered per second, start to last exit, best of 3 interleaved. Without -i, a
         60-second 1080p25 H.264 clip (testsrc2, libx264) is generated first. Goal: 0.95x ffmpeg.
      --seconds S    each measurement's length (default 2; --quick: 0.5)
      --section N,M  only these sections (1 to 3)
      --python PATH  a python with torch and the framesrv package (default: python3; PYTHONPATH is
                     passed on: after 'scripts/test-gpu --python', PYTHONPATH=clients/c/build-gpu/python)

    decode: frames per second of 'framesrv produce -i FILE' (a child process, --wait-for 1)
    into the pool with one lossless null sink process attached, decoding straight into the
    slots (zero copy) and with --copy (one copy per frame), next to 'ffmpeg -threads T -i FILE
    -f null -' on the same file, each timed from start to exit (best of 3 interleaved runs),
    and the ratios. Each framesrv line says how many frames took which path. Without -i, a 10-second 1080p H.264 clip (testsrc2, libx264 -preset veryfast)
    is generated in a scratch directory first.
      -i FILE      the file to decode
      --threads T  decoder threads for both (default 0: FFmpeg decides)

    chain: the four-process chain 'produce -i FILE' -> 'filter --vf gblur=sigma=4' ->
    'filter --vf format=rgb24' -> 'sink --framemd5 FILE' (each a process; the stages run on
    different cores at once) next to 'ffmpeg -threads T -filter_threads T -i FILE -vf
    gblur=sigma=4,format=rgb24 -f framemd5' doing the same work in one process: wall time
    from start to exit (best of 2 runs), the ratio, and whether both framemd5 files are
    identical. Without -i, a 4-second 1080p H.264 clip is generated first.
      -i FILE      the input
      --threads T  threads per stage: each decoder and filter graph, and ffmpeg's (default 1)

    clients: frames/s at 1920x1080 yuv420p of a Swift ('sink --null'), a C (libframesrv's
    framesrv-consume) and a Python (framesrv.Consumer, every frame's planes as numpy views)
    lossless consumer process of the same Swift producer (--rate max, each slot painted once),
    one after the other in the same run, with the ratios to the Swift consumer; a Python
    producer's frames/s (reserve -> publish into a Swift null sink) without and with a numpy
    fill of every plane; and the proof of zero copy: the address of the Python consumer's numpy
    array, inside the pool's mapping (from /proc/self/maps).
      --seconds S    each measurement's length (default 3; --quick: 1)
      --python PATH  a python with the framesrv package (default: what scripts/python-env prints)
      --c-tools DIR  the directory of framesrv-consume (default: clients/c/build)

    record: N frames of the test pattern at 1920x1080 yuv420p, in the same run:
      1. recording: 'produce --pattern --rate max --frames N' into 'record --in bench -o FILE.nut'
         with --codec ffv1 and --codec raw (2 processes), frames/s from start to the recorder's
         exit and bytes per frame; next to 'ffmpeg -f rawvideo -pix_fmt yuv420p -s 1920x1080
         -i FILE -c:v ffv1 -level 3 -g 1 -slices 16 -slicecrc 1 -threads 0 -f nut' (record's
         FFV1 settings) and '-c:v rawvideo', reading the same frames from a file in /dev/shm
         (dumped once by 'sink --raw'), so ffmpeg neither paints frames nor reads a pipe; the
         ratios framesrv/ffmpeg. Best of 3 interleaved runs.
      2. replay: 'replay FILE --rate max' of both recordings into one lossless 'sink --null'
         process, start to exit, next to 'ffmpeg -i FILE -f null -'. Best of 3.
      3. seek latency: from a seek request sent on the stream's control socket (what 'framesrv
         ctl NAME seek T' sends) to the first frame after the seek (flagged discontinuity, at T)
         received by a lossless consumer in this process: p50 and max of 7 seeks, on a paused
         replay (seek T, then step 1), a replay playing at rate 1, and 'produce -i' of a
         generated H.264 1080p25 clip with a keyframe every 2 s playing at -re.
      --seconds S    record S seconds of 30 fps pattern: N = 30 x S frames (default 10; --quick: 1)
      --frames N     the frames to record instead
      --quick        one round, 1 s of pattern and a 4 s clip, for smoke tests

    bridge: N frames (default 600; --quick: 100, one round) of the test pattern at 1920x1080
    yuv420p over TCP loopback, in the same run:
      1. throughput: produce -> bridge send -> bridge recv -> sink --null (lossless, raw), with
         --insecure and with CURVE keys, next to ffmpeg writing the same frames raw to
         tcp://127.0.0.1:P?listen and a second ffmpeg reading them into -f null: frames/s, GB/s
         and the ratios (bridge/ffmpeg, CURVE/insecure)
      2. added latency at 30 fps: A's publish to B's publish (one host, one clock), p50 and p99
    """

    static func run(_ o: BenchOptions) throws -> ExitStatus {
        try Bench.run(o.benchmark, settings: o.settings) { print($0) }
        return .success
    }
}
