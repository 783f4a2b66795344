"""DLPack: torch.from_dlpack(frame.array()) views the frame on the CPU without a copy."""
import gc

import numpy as np
import pytest

import framesrv


def test_torch_from_dlpack_zero_copy(fsdir):
    torch = pytest.importorskip("torch")
    with framesrv.Producer("d", 64, 48, "yuv420p10le", slots=2) as p:
        with framesrv.Consumer("d", timeout=10) as c:
            with p.reserve() as f:
                f.fill_pattern()
            frame = c.next(timeout=10)
            arr = frame.array()
            t = torch.from_dlpack(frame.dlpack())
            assert t.data_ptr() == arr.ctypes.data                 # no copy
            assert tuple(t.shape) == arr.shape and t.stride() == tuple(s // 2 for s in arr.strides)
            assert t.dtype == torch.uint16
            assert np.array_equal(t.numpy(), arr)
            base, size = frame._pool_range()
            assert base <= t.data_ptr() < base + size
            del arr
            frame.release()
            assert frame._f.state == "releasing"                   # the tensor keeps it held
            del t
            gc.collect()
            assert frame._f.state == "done"
