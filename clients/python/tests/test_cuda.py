"""CUDA streams from Python without a GPU: libframesrv's CUDA paths run against the stand-in
driver of the C tests (clients/c/tests/fakecuda, whose "device memory" is host memory mapped
into the process, so the tests read and write planes through their device addresses with
ctypes). What a GPU adds (torch and CuPy on the H200) is test_cuda_gpu.py's.

Checked here: a CUDA frame's planes are DevicePlanes whose __cuda_array_interface__ (version 3)
and __dlpack_device__ say what the host views say (shape, strides in bytes, dtype) on kDLCUDA;
the DLPack capsules (1.0 and legacy) carry the plane's pointer, shape, strides (elements),
dtype and read-only flag; a capsule consumed (renamed and later deleted, as torch does) keeps
the frame held until its deleter runs, one never consumed gives it back when it goes; the
fences are written on the streams given (release, publish; the stand-in's streams run at once,
so a wait whose fence has passed is not queued at all) and the final release on the stream
last given (next, __dlpack__, release), else the legacy default stream; and every wrong kind
is refused in one line."""
import ctypes
import gc

import numpy as np
import pytest

import framesrv
from conftest import expected_pattern

W, H = 64, 48
DL_CUDA, DL_UINT = 2, 1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", ctypes.c_void_p),
                ("deleter", DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


_capi = ctypes.pythonapi
_capi.PyCapsule_GetPointer.restype = ctypes.c_void_p
_capi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capi.PyCapsule_GetName.restype = ctypes.c_char_p
_capi.PyCapsule_GetName.argtypes = [ctypes.py_object]


def consume(capsule):
    """What a DLPack consumer does: takes the tensor and renames the capsule "used_..."; returns
    (the managed tensor, a call of its deleter)."""
    name = _capi.PyCapsule_GetName(capsule)
    address = _capi.PyCapsule_GetPointer(capsule, name)
    kind = DLManagedTensorVersioned if name == b"dltensor_versioned" else DLManagedTensor
    managed = kind.from_address(address)
    _capi.PyCapsule_SetName(capsule, b"used_" + name)
    return managed, lambda: managed.deleter(address)


def fill(frame):
    """The test pattern written through the device planes (the stand-in's memory is the host's)."""
    for i in range(frame._f.plane_count):
        d = frame.device_plane(i)
        rows = expected_pattern(frame.seq, i, d["height"], d["row_bytes"])
        for y in range(d["height"]):
            ctypes.memmove(d["ptr"] + y * d["pitch"], rows[y].tobytes(), d["row_bytes"])


def pattern_ok(frame):
    for i in range(frame._f.plane_count):
        d = frame.device_plane(i)
        got = np.frombuffer(b"".join(ctypes.string_at(d["ptr"] + y * d["pitch"], d["row_bytes"]) for y in range(d["height"])),
                            np.uint8).reshape(d["height"], d["row_bytes"])
        if not np.array_equal(got, expected_pattern(frame.seq, i, d["height"], d["row_bytes"])):
            return False
    return True


def publish(p, stream=None):
    frame = p.reserve(timeout=5, stream=stream)
    fill(frame)
    p.publish(frame, stream=stream)
    return frame.seq


@pytest.fixture
def pair(fsdir, fakecuda):
    """A CUDA producer and a lossless CUDA consumer of stream "g" (2 slots, yuv420p)."""
    with framesrv.Producer("g", W, H, "yuv420p", slots=2, device="cuda:0") as p:
        with framesrv.Consumer("g", timeout=10, device="cuda") as c:
            yield p, c


def test_planes_say_their_geometry_on_the_device(pair, fakecuda):
    p, c = pair
    publish(p, stream=5)
    frame = c.next(timeout=5, stream=7)
    assert frame.memory == "cuda" and frame.device == "cuda:0" and c.device == "cuda:0" and c.memory == "cuda"
    base, size = frame._device_range()
    for i, plane in enumerate(frame.planes):
        d = frame.device_plane(i)
        h, w = (H, W) if i == 0 else (H // 2, W // 2)
        cai = plane.__cuda_array_interface__
        assert cai == {"shape": (h, w), "typestr": "|u1", "data": (d["ptr"], True), "version": 3,
                       "strides": (d["pitch"], 1), "stream": 7}, cai
        assert plane.__dlpack_device__() == (DL_CUDA, 0)
        assert base <= d["ptr"] and d["ptr"] + d["size"] <= base + size
        assert plane.readonly and plane.shape == (h, w) and plane.device == "cuda:0"
    assert pattern_ok(frame)
    assert frame._f.stream == 7                     # the frame's stream: next's
    del plane
    assert frame.release() is True
    assert fakecuda.fakecuda_last_stream(1) == 7    # its release fence was written on it


def test_interleaved_and_16_bit_planes_have_the_host_views_shape(fsdir, fakecuda):
    for pix_fmt, shapes in (("nv12", [((H, W), (1,)), ((H // 2, W // 2, 2), (2, 1))]),
                            ("yuv420p10le", [((H, W), (2,)), ((H // 2, W // 2), (2,))])):
        with framesrv.Producer(pix_fmt, W, H, pix_fmt, slots=2, device="cuda") as p:
            with framesrv.Consumer(pix_fmt, timeout=10, device="cuda:0") as c:
                publish(p)
                frame = c.next(timeout=5)
                for plane, (shape, inner) in zip(frame.planes[:2], shapes):
                    cai = plane.__cuda_array_interface__
                    assert cai["shape"] == shape and cai["strides"][1:] == inner, (pix_fmt, cai)
                    assert cai["typestr"] == ("<u2" if pix_fmt == "yuv420p10le" else "|u1")
                    assert cai["stream"] is None   # the CPU waited: nothing to synchronize with
                frame.release()


def test_dlpack_capsules_carry_the_plane(pair, fakecuda):
    p, c = pair
    publish(p)
    frame = c.next(timeout=5)
    plane = frame.planes[1]
    d = frame.device_plane(1)
    for max_version in ((1, 0), None):
        capsule = plane.__dlpack__(stream=9, max_version=max_version)
        managed, delete = consume(capsule)
        t = managed.dl_tensor
        if max_version:
            assert (managed.major, managed.minor) == (1, 0) and managed.flags & 1, "read-only, DLPack 1.0"
        assert t.data == d["ptr"] and t.byte_offset == 0
        assert (t.device.device_type, t.device.device_id) == (DL_CUDA, 0)
        assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (DL_UINT, 8, 1)
        assert t.ndim == 2 and t.shape[:2] == [H // 2, W // 2] and t.strides[:2] == [d["pitch"], 1]
        delete()
    assert frame._f.stream == 9                     # __dlpack__'s stream is the frame's now
    del plane
    assert frame.release() is True
    assert fakecuda.fakecuda_last_stream(1) == 9   # released on the stream last given


def test_a_consumed_capsule_keeps_the_frame_held_until_its_deleter(pair, fakecuda):
    p, c = pair
    publish(p)
    publish(p)
    frame = c.next(timeout=5)
    managed, delete = consume(frame.planes[0].__dlpack__(stream=11, max_version=(1, 0)))
    gc.collect()
    assert frame.release() is False and frame._f.state == "releasing" and c.stats["held"] == 1
    assert p.try_reserve(timeout=0.3) is None   # both slots still hold frames: nothing recycled
    assert frame._f.exports == 1
    delete()                                    # the tensor is gone
    assert frame._f.state == "done" and c.stats["held"] == 0
    assert fakecuda.fakecuda_last_stream(1) == 11
    second = c.next(timeout=5)
    assert second.seq == 2 and pattern_ok(second)
    second.release(stream=13)
    assert fakecuda.fakecuda_last_stream(1) == 13
    assert publish(p) == 3                      # a slot came back


def test_an_unconsumed_capsule_and_a_plane_give_the_frame_back_when_they_go(pair, fakecuda):
    p, c = pair
    publish(p)
    frame = c.next(timeout=5)
    capsule = frame.planes[0].__dlpack__(stream=3)
    assert frame.release() is False
    del capsule
    gc.collect()
    assert frame._f.state == "done"
    assert fakecuda.fakecuda_last_stream(1) == 3
    publish(p)
    frame = c.next(timeout=5)           # no stream ever given: released on the legacy default stream
    assert frame.release() is True and fakecuda.fakecuda_last_stream(1) == 0


def test_numpy_refuses_a_device_plane_and_holds_nothing(pair):
    p, c = pair
    publish(p)
    frame = c.next(timeout=5)
    plane = frame.planes[0]
    with pytest.raises((BufferError, RuntimeError, TypeError)):
        np.from_dlpack(plane)
    del plane
    gc.collect()
    assert frame.release() is True


def test_iteration_queues_the_ready_wait_on_the_consumers_stream(pair, fakecuda):
    p, c = pair

    class TorchLikeStream:
        cuda_stream = 21

    c.stream = TorchLikeStream()
    publish(p)
    frame = next(iter(c))
    assert frame.seq == 1 and frame._f.stream == 21
    publish(p)
    frame = next(iter(c))                 # the previous one went back on its stream
    assert frame.seq == 2 and fakecuda.fakecuda_last_stream(1) == 21
    c.stream = None
    frame.release()


def test_a_producers_planes_are_writable_until_the_publish(pair, fakecuda):
    p, c = pair
    frame = p.reserve(timeout=5, stream=5)
    plane = frame.planes[0]
    cai = plane.__cuda_array_interface__
    assert cai["data"][1] is False and cai["stream"] == 5 and not plane.readonly
    managed, delete = consume(plane.__dlpack__(stream=5, max_version=(1, 0)))
    assert managed.flags & 1 == 0, "writable"
    fill(frame)
    p.publish(frame)                       # on its stream (reserve's, then __dlpack__'s): 5
    assert fakecuda.fakecuda_last_stream(1) == 5
    assert frame._f.state == "kept" and plane.readonly and plane.__cuda_array_interface__["data"][1] is True
    got = c.next(timeout=5)
    assert got.seq == 1 and pattern_ok(got)
    got.release()
    delete()
    del plane
    gc.collect()
    assert frame._f.state == "done"
    assert publish(p, stream=6) == 2 and fakecuda.fakecuda_last_stream(1) == 6


def test_wrong_kinds_are_refused_in_one_line(fsdir, fakecuda):
    with framesrv.Producer("gpu", W, H, "gray", slots=2, device="cuda:0") as p, \
            framesrv.Producer("host", W, H, "gray", slots=2) as hp:
        with pytest.raises(framesrv.MemoryKindError) as e:
            framesrv.Consumer("gpu", timeout=5)
        line = str(e.value)
        assert "CUDA memory of device GPU-face0cda-0102-0304-0506-0708090a0b0c" in line and "framesrv-cuda download --in" in line
        assert "device='cuda'" in line and "\n" not in line and e.value.code == -12
        with pytest.raises(framesrv.MemoryKindError, match="host memory") as e:
            framesrv.Consumer("host", timeout=5, device="cuda")
        assert "\n" not in str(e.value)
        with pytest.raises(framesrv.MemoryKindError, match=r"cuda:0 in this process, not cuda:1"):
            framesrv.Consumer("gpu", timeout=5, device="cuda:1")
        with pytest.raises(framesrv.MemoryKindError, match="sees 1 CUDA device"):
            framesrv.Producer("far", W, H, "gray", device="cuda:3")
        with pytest.raises(framesrv.InvalidArgument, match="device 'gpu'"):
            framesrv.Consumer("gpu", device="gpu")
        with framesrv.Consumer("host", timeout=5) as hc:
            publish_host(hp)
            with pytest.raises(framesrv.MemoryKindError, match="reads host memory"):
                hc.next(timeout=1, stream=5)
            frame = hc.next(timeout=5)
            with pytest.raises(framesrv.MemoryKindError, match="host memory"):
                frame.release(stream=5)
            frame.release()
        reserved = hp.reserve(timeout=5)
        with pytest.raises(framesrv.MemoryKindError, match="host memory"):
            hp.publish(reserved, stream=5)
        with framesrv.Consumer("gpu", timeout=5, device="cuda") as gc_:
            publish(p)
            frame = gc_.next(timeout=5)
            for call in (frame.copy, frame.pattern_check, frame.i420):
                with pytest.raises(framesrv.MemoryKindError, match="CUDA memory"):
                    call()
            plane = frame.planes[0]
            with pytest.raises(BufferError, match="copy=True"):
                plane.__dlpack__(copy=True)
            with pytest.raises(BufferError, match=r"dl_device=\(1, 0\)"):
                plane.__dlpack__(dl_device=(1, 0))
            with pytest.raises(TypeError, match="stream"):
                plane.__dlpack__(stream="fast")
            del plane
            frame.release()
            with pytest.raises(framesrv.StateError):
                frame.planes


def publish_host(p):
    with p.reserve(timeout=5) as f:
        f.fill_pattern()
