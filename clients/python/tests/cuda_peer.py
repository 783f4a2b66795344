"""The two processes of test_cuda_gpu.py on a real GPU, with torch (and CuPy):

    python cuda_peer.py produce NAME FRAMES     a CUDA producer (2 slots, gray 1920x1080): each
        frame's test pattern is written by a torch kernel into torch.from_dlpack(plane), on
        the producer's own stream, and published on it; the slots are recycled as fast as the
        consumer's release fences allow.
    python cuda_peer.py consume NAME FRAMES [--control]    a CUDA consumer: for each frame,
        torch.from_dlpack(frame.planes[0]) on its stream; the tensor's data_ptr against
        framesrv_frame_device_plane's pointer and the allocation; the first frames downloaded
        (tensor.cpu(), cupy.asnumpy(cupy.from_dlpack(...))) against the pattern; then a slow
        kernel (torch.cuda._sleep) followed by a kernel that counts the tensor's bytes that are
        not the frame's pattern, queued before frame.release(stream) (odd frames) or
        frame.release() (even ones: on the stream torch gave __dlpack__): the producer's
        rewrite of the slot waits for it. --control reads on a second stream but releases on the
        first, so nothing orders the rewrite after the read: the count should not be 0.
        Prints one JSON line.
"""
import json
import sys
import time

import numpy as np
import torch

import framesrv

W, H = 1920, 1080
SLEEP_CYCLES = 2_000_000   # about 1 ms at the H200's clock


def pattern(seq, y, x):
    """PROTOCOL.md 21 for plane 0: (x + 2y + 3 seq) mod 256, computed on the current stream."""
    return ((x + 2 * y + 3 * seq) % 256).to(torch.uint8)


def grid():
    y = torch.arange(H, device="cuda", dtype=torch.int32)[:, None]
    x = torch.arange(W, device="cuda", dtype=torch.int32)[None, :]
    torch.cuda.synchronize()   # made on the default stream, used on others
    return y, x


def produce(name, frames):
    stream = torch.cuda.Stream()
    y, x = grid()
    with framesrv.Producer(name, W, H, "gray", slots=2, device="cuda:0") as p:
        print(f"producer: stream '{name}' open", file=sys.stderr, flush=True)
        p.wait_for_consumers(1, timeout=60)
        for _ in range(frames):
            frame = p.reserve(timeout=30, stream=stream)
            with torch.cuda.stream(stream):
                t = torch.from_dlpack(frame.planes[0])   # writable until the publish
                t.copy_(pattern(frame.seq, y, x))
            del t
            p.publish(frame, stream=stream)
    print(json.dumps({"published": frames}), flush=True)


def zero_copy(frame, t):
    """The tensor views the plane: its pointer is framesrv's, inside the imported allocation."""
    d = frame.device_plane(0)
    base, size = frame._device_range()
    ok = t.data_ptr() == d["ptr"] and base <= t.data_ptr() and d["ptr"] + d["size"] <= base + size
    return ok and tuple(t.shape) == (H, W) and t.stride() == (d["pitch"], 1) and t.dtype == torch.uint8


def downloads_match(frame, t):
    """tensor.cpu() and CuPy's view, downloaded, are the frame's pattern."""
    want = ((np.arange(W)[None, :] + 2 * np.arange(H)[:, None] + 3 * frame.seq) % 256).astype(np.uint8)
    ok = np.array_equal(t.cpu().numpy(), want)
    try:
        import cupy
    except ImportError:
        return ok, None
    a = cupy.from_dlpack(frame.planes[0])
    b = cupy.asarray(frame.planes[0])                  # through __cuda_array_interface__
    cupy_ok = a.data.ptr == t.data_ptr() and b.data.ptr == t.data_ptr() and np.array_equal(cupy.asnumpy(a), want)
    return ok and cupy_ok, cupy_ok


def consume(name, frames, control):
    stream, other = torch.cuda.Stream(), torch.cuda.Stream()
    y, x = grid()
    bad = torch.zeros((), dtype=torch.int64, device="cuda")
    report = {"frames": 0, "zero_copy": 0, "downloads": 0, "cupy": None, "seqs_in_order": True}
    start = time.monotonic()
    with framesrv.Consumer(name, timeout=60, device="cuda", stream=stream) as c:
        for i in range(frames):
            frame = c.next(timeout=30)
            if frame is None or frame.seq != i + 1:
                report["seqs_in_order"] = False
                break
            reader = other if control else stream
            with torch.cuda.stream(reader):
                t = torch.from_dlpack(frame.planes[0])
                report["zero_copy"] += zero_copy(frame, t)
                if i < 3:
                    ok, report["cupy"] = downloads_match(frame, t)
                    report["downloads"] += ok
                want = pattern(frame.seq, y, x)
                torch.cuda._sleep(SLEEP_CYCLES)          # the producer would overwrite the slot now...
                bad += (t != want).sum()                  # ...if its rewrite did not wait for this read
            del t
            if i % 2 or control:
                frame.release(stream=stream)              # the control reads on `other`: unordered
            else:
                frame.release()                           # on the frame's stream: __dlpack__'s
            report["frames"] += 1
        report["stats"] = c.stats
    torch.cuda.synchronize()
    report["bad_bytes"] = int(bad.item())
    report["seconds"] = round(time.monotonic() - start, 3)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    role, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if role == "produce":
        produce(name, count)
    else:
        consume(name, count, "--control" in sys.argv[4:])
