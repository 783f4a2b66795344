/// The Python side of `framesrv bench gpu` (Gpu.swift), written into a scratch directory and
/// run by --python: every process of every row is one of its roles. It is a string here, not
/// a file beside the sources, so that a relocated framesrv (scripts/bundle) carries it.
extension Bench {
    static let gpuScript = #"""
        """framesrv bench gpu's Python side. Each process prints one JSON line per run (role, frames
        timed, seconds, cpu_s: user+sys of the whole process over its timed window, copies: the bytes
        it copied or had torch allocate per frame, in frames); `probe` prints one line of text.

          probe                           ok: ... | skip: WHY | error: WHY
          fs-produce NAME SECONDS         framesrv CUDA producer: reserve on a torch stream, publish on it
          fs-consume NAME                 framesrv CUDA consumer: torch.from_dlpack of both planes
          host-produce NAME SECONDS       framesrv host producer: reserve, publish
          host-consume NAME               framesrv host consumer: torch.from_numpy(plane).cuda() per plane
          mp SECONDS drop|keep            torch.multiprocessing: this process produces, a spawned one consumes
          d2d SECONDS                     one device-to-device copy of a frame per frame, synchronized
          lat-produce NAME FPS SECONDS    framesrv CUDA producer publishing at FPS
          lat-consume NAME POLL_US        next on its stream (busy-polling up to POLL_US per frame, 0: asleep),
                                          the stream synchronized: ready - publish_ns
          count-consume NAME READY        lossless CUDA consumer of any stream (from_dlpack, release on
                                          its stream), READY made once torch is up; counts frames
        """
        import collections
        import json
        import resource
        import sys
        import time

        W, H = 3840, 2160
        FRAME_BYTES = W * H * 3 // 2   # NV12: Y (H x W), then UV (H/2 x W/2 x 2)
        SLOTS = 8
        WARMUP = 16                    # frames before each timed window (imports, first mappings)


        def cpu_seconds():
            r = resource.getrusage(resource.RUSAGE_SELF)   # every thread of this process
            return r.ru_utime + r.ru_stime


        def allocated(torch):
            """Bytes torch's CUDA allocator has handed out in this process so far (a copy allocates)."""
            return torch.cuda.memory_stats().get("allocated_bytes.all.allocated", 0)


        class Window:
            """A timed window: from start() to the last tick(), and this process's CPU seconds in it."""

            def __init__(self):
                self.frames = 0
                self.t0 = self.last = self.c0 = None

            def start(self):
                self.t0 = self.last = time.monotonic()
                self.c0 = cpu_seconds()

            def tick(self):
                self.frames += 1
                self.last = time.monotonic()

            def report(self, role, copies=0.0, **extra):
                if self.t0 is None or self.frames == 0:
                    sys.exit(f"{role}: no frame in the timed window (fewer than {WARMUP + 1} frames)")
                line = {"role": role, "frames": self.frames, "seconds": self.last - self.t0, "cpu_s": cpu_seconds() - self.c0,
                        "copies": copies, **extra}
                print(json.dumps(line), flush=True)


        def probe():
            try:
                import torch
            except ImportError as e:
                return print(f"skip: {sys.executable} has no torch to use the frames with ({e}; pip install torch)")
            if not torch.cuda.is_available():
                return print(f"skip: torch {torch.__version__} sees no CUDA device (torch.cuda.is_available() is False)")
            try:
                import framesrv
            except ImportError as e:
                return print(f"error: {sys.executable} cannot import framesrv ({e})")
            print(f"ok: {torch.cuda.get_device_name(0)}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
                  f"framesrv {framesrv.__version__} from {framesrv.__file__}")


        def fs_produce(name, seconds):
            """Reserve on a torch stream, publish on it, nothing written (the transport alone): the
            slot's previous readers are waited for on the stream, the ready fence follows its work."""
            import torch
            import framesrv
            stream = torch.cuda.Stream()
            s = stream.cuda_stream
            with framesrv.Producer(name, W, H, "nv12", device="cuda:0", rate=None, slots=SLOTS) as p:
                if not p.wait_for_consumers(1, timeout=120):
                    sys.exit("fs-produce: no consumer attached within 120 s")
                for _ in range(WARMUP):
                    p.publish(p.reserve(stream=s), stream=s)
                window, before, end = Window(), allocated(torch), time.monotonic() + seconds
                window.start()
                while window.last < end:
                    frame = p.reserve(stream=s)
                    p.publish(frame, stream=s)
                    window.tick()
                window.report("producer", (allocated(torch) - before) / FRAME_BYTES / window.frames)


        def fs_consume(name):
            """Lossless CUDA consumer: each frame's ready wait queued on a torch stream (next on it),
            both planes as tensors with no copy, the release queued on the stream (no CPU wait)."""
            import torch
            import framesrv
            stream = torch.cuda.Stream()
            window, n, copied, before = Window(), 0, None, 0
            with framesrv.Consumer(name, device="cuda", mode="lossless", stream=stream, timeout=120) as c:
                for frame in c:
                    with torch.cuda.stream(stream):
                        y = torch.from_dlpack(frame.planes[0])
                        uv = torch.from_dlpack(frame.planes[1])
                    if copied is None:   # zero copy: each tensor is the frame's own memory
                        copied = sum(t.nbytes for i, t in enumerate((y, uv)) if t.data_ptr() != frame.device_plane(i)["ptr"])
                    del y, uv
                    frame.release(stream=stream)
                    n += 1
                    if n == WARMUP:
                        window.start()
                        before = allocated(torch)
                    elif n > WARMUP:
                        window.tick()
            copied = copied or 0   # (None: no frame came, which report says)
            window.report("consumer", copied / FRAME_BYTES + (allocated(torch) - before) / FRAME_BYTES / max(window.frames, 1),
                          first_frame_copied_bytes=copied)


        def host_produce(name, seconds):
            """A host stream's producer: reserve, publish, nothing written."""
            import framesrv
            with framesrv.Producer(name, W, H, "nv12", rate=None, slots=SLOTS) as p:
                if not p.wait_for_consumers(1, timeout=120):
                    sys.exit("host-produce: no consumer attached within 120 s")
                for _ in range(WARMUP):
                    p.publish(p.reserve())
                window, end = Window(), time.monotonic() + seconds
                window.start()
                while window.last < end:
                    p.publish(p.reserve())
                    window.tick()
                window.report("producer")


        def host_consume(name):
            """A host stream's consumer putting each frame on the GPU: torch.from_numpy(plane).cuda()
            per plane (from pageable memory; torch waits for the copy before .cuda() returns), counted."""
            import warnings
            import torch
            import framesrv
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")   # read-only views
            torch.zeros(1, device="cuda")
            window, n, calls, h2d = Window(), 0, 0, 0
            with framesrv.Consumer(name, mode="lossless", timeout=120) as c:
                for frame in c:
                    for plane in frame.planes:
                        g = torch.from_numpy(plane).cuda()
                        if n >= WARMUP:
                            calls, h2d = calls + 1, h2d + g.nbytes
                    del plane, g
                    frame.release()
                    n += 1
                    if n == WARMUP:
                        window.start()
                    elif n > WARMUP:
                        window.tick()
            torch.cuda.synchronize()
            frames = max(window.frames, 1)
            window.report("consumer", h2d / FRAME_BYTES / frames, cuda_calls_per_frame=calls / frames)


        def mp_consume(frames, done, keep):
            """torch.multiprocessing's consumer (a spawned process). What a safe design needs: the
            producer may write a buffer again only after the consumer is done with it, so each
            received tensor is touched (.data_ptr(): torch has mapped the producer's memory) and its
            index sent back as the done token. keep False drops the tensor first, as torch's docs ask
            of shared CUDA tensors (torch then maps the buffer again at its next receive); keep True
            keeps the last tensor of each buffer (never read after its token), so torch's mapping
            stays open: torch's best case. A consumer that ran kernels on the tensor would also
            have to synchronize (or send an event) before the token: this one runs none."""
            import torch
            torch.zeros(1, device="cuda")
            before, kept = allocated(torch), {}
            done.put("ready")
            window, n = Window(), 0
            while (item := frames.get()) is not None:
                index, tensor = item
                tensor.data_ptr()
                if keep:
                    kept[index] = tensor
                del item, tensor
                done.put(index)
                n += 1
                if n == WARMUP:
                    window.start()
                elif n > WARMUP:
                    window.tick()
            window.report("consumer", (allocated(torch) - before) / FRAME_BYTES / max(window.frames, 1))


        def mp_run(seconds, keep):
            """torch.multiprocessing's producer: a ring of SLOTS CUDA uint8 tensors of an NV12 frame
            ((H * 3/2) x W), written once before the clock (nothing per frame, as framesrv's producer),
            each sent through a torch.multiprocessing Queue and reused only after its done token came
            back (at most SLOTS frames in flight, as a lossless framesrv consumer allows)."""
            import torch
            import torch.multiprocessing as tmp
            ctx = tmp.get_context("spawn")   # CUDA in a child needs spawn
            frames, done = ctx.Queue(), ctx.Queue()
            ring = [torch.full((H * 3 // 2, W), i, dtype=torch.uint8, device="cuda") for i in range(SLOTS)]
            torch.cuda.synchronize()
            consumer = ctx.Process(target=mp_consume, args=(frames, done, keep))
            consumer.start()
            if done.get(timeout=120) != "ready":
                sys.exit("mp: the consumer did not start")
            free, before, window, end, n = collections.deque(range(SLOTS)), allocated(torch), Window(), None, 0
            while end is None or window.last < end:
                if not free:
                    free.append(done.get(timeout=60))
                index = free.popleft()
                frames.put((index, ring[index]))
                n += 1
                if n == WARMUP:
                    window.start()
                    end = window.t0 + seconds
                elif n > WARMUP:
                    window.tick()
            frames.put(None)
            consumer.join(120)   # the ring stays alive until the consumer is gone (torch's rule)
            if consumer.exitcode != 0:
                sys.exit(f"mp: the consumer exited with {consumer.exitcode}")
            window.report("producer", (allocated(torch) - before) / FRAME_BYTES / window.frames)


        def d2d(seconds):
            """The floor of any design that copies: one device-to-device copy of a frame per frame,
            dst.copy_(src) then a synchronize, in one process; the copies counted."""
            import torch
            src = torch.full((FRAME_BYTES,), 7, dtype=torch.uint8, device="cuda")
            dst = torch.empty_like(src)
            for _ in range(WARMUP):
                dst.copy_(src)
            torch.cuda.synchronize()
            window, copied, end = Window(), 0, time.monotonic() + seconds
            window.start()
            while window.last < end:
                dst.copy_(src)
                torch.cuda.synchronize()
                copied += src.nbytes
                window.tick()
            window.report("copier", copied / FRAME_BYTES / window.frames)


        def lat_produce(name, fps, seconds):
            """A CUDA producer publishing at fps (reserve and publish on its stream, nothing written);
            the consumer reads each frame's publish time from its header (publish_ns)."""
            import torch
            import framesrv
            stream = torch.cuda.Stream()
            s = stream.cuda_stream
            with framesrv.Producer(name, W, H, "nv12", device="cuda:0", rate=fps, slots=SLOTS) as p:
                if not p.wait_for_consumers(1, timeout=120):
                    sys.exit("lat-produce: no consumer attached within 120 s")
                start = time.monotonic()
                for i in range(WARMUP + max(int(fps * seconds), 1)):
                    due = start + i / fps
                    while (left := due - time.monotonic()) > 0:
                        time.sleep(left)
                    p.publish(p.reserve(stream=s), stream=s)


        def lat_consume(name, poll_us):
            """next on a torch stream (the frame's ready wait queued on it; asleep between frames, or
            busy-polling up to poll_us around when each is due), then the stream synchronized:
            ready = CLOCK_MONOTONIC then; latency = ready - the frame's publish_ns."""
            import torch
            import framesrv
            stream = torch.cuda.Stream()
            latencies, wakes, n = [], [], 0
            with framesrv.Consumer(name, device="cuda", mode="lossless", stream=stream, timeout=120,
                                   poll_us=poll_us) as c:
                for frame in c:
                    woken = time.monotonic_ns()
                    stream.synchronize()
                    ready = time.monotonic_ns()
                    n += 1
                    if n > WARMUP:
                        latencies.append((ready - frame.publish_ns) / 1000)
                        wakes.append((woken - frame.publish_ns) / 1000)
                    frame.release()
            if not latencies:
                sys.exit("lat-consume: no frame after the warm-up")
            latencies.sort()
            wakes.sort()
            p50, p99 = latencies[len(latencies) // 2], latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
            print(json.dumps({"role": "latency", "frames": len(latencies), "p50_us": p50, "p99_us": p99,
                              "wake_p50_us": wakes[len(wakes) // 2]}), flush=True)


        def count_consume(name, ready):
            """A lossless CUDA consumer as a model stage would be: both planes as tensors with no
            copy, each released on its stream; READY is made once torch and the stream are up."""
            import torch
            import framesrv
            stream = torch.cuda.Stream()
            open(ready, "w").close()
            n = 0
            with framesrv.Consumer(name, device="cuda", mode="lossless", stream=stream, timeout=300) as c:
                for frame in c:
                    with torch.cuda.stream(stream):
                        y = torch.from_dlpack(frame.planes[0])
                        uv = torch.from_dlpack(frame.planes[1])
                    del y, uv
                    frame.release(stream=stream)
                    n += 1
            stream.synchronize()
            # ended_ns: the end of the stream reached and the last frame's work done (CLOCK_MONOTONIC,
            # as the bench's clock), before this process's own exit (torch's teardown).
            print(json.dumps({"role": "counter", "frames": n, "ended_ns": time.monotonic_ns()}), flush=True)


        def main(argv):
            role = argv[0]
            if role == "probe":
                probe()
            elif role == "fs-produce":
                fs_produce(argv[1], float(argv[2]))
            elif role == "fs-consume":
                fs_consume(argv[1])
            elif role == "host-produce":
                host_produce(argv[1], float(argv[2]))
            elif role == "host-consume":
                host_consume(argv[1])
            elif role == "mp":
                mp_run(float(argv[1]), argv[2] == "keep")
            elif role == "d2d":
                d2d(float(argv[1]))
            elif role == "lat-produce":
                lat_produce(argv[1], int(argv[2]), float(argv[3]))
            elif role == "lat-consume":
                lat_consume(argv[1], int(argv[2]))
            elif role == "count-consume":
                count_consume(argv[1], argv[2])
            else:
                sys.exit(f"unknown role {role}")


        if __name__ == "__main__":   # a spawned torch.multiprocessing child imports this file too
            main(sys.argv[1:])
        """#
}
