"""Builds framesrv._framesrv: src/_framesrv.c and src/_framesrv_cuda.c plus libframesrv's sources (../c/src/*.c)
compiled statically into the extension, so nothing at run time depends on the repository.

The C sources are taken from the repository this package sits in (pip builds in-tree).
"""
import glob
import os
import sys

from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))
C_DIR = os.path.normpath(os.path.join(HERE, "..", "c"))
LAYOUT = os.path.normpath(os.path.join(HERE, "..", "..", "Sources", "CFrameServer", "include"))

LIB_SOURCES = sorted(glob.glob(os.path.join(C_DIR, "src", "*.c")))
if not LIB_SOURCES or not os.path.isfile(os.path.join(LAYOUT, "CFrameServer.h")):
    sys.exit("framesrv: libframesrv's sources (../c/src/*.c, ../../Sources/CFrameServer/include) "
             "were not found next to this package: build it from a framesrv checkout "
             "(pip install ./clients/python)")

# With numpy's headers the extension builds a frame's arrays itself (Frame.arrays, the
# per-frame path); without them (numpy not importable at build time) numpy makes them
# through the buffer protocol (slower, same arrays).
try:
    import numpy
    NUMPY_INCLUDE, NUMPY_MACROS = [numpy.get_include()], [("FRAMESRV_NUMPY", "1")]
except ImportError:
    NUMPY_INCLUDE, NUMPY_MACROS = [], []

# Relative paths: setuptools wants sources relative to setup.py.
SOURCES = ["src/_framesrv.c", "src/_framesrv_cuda.c"] + [os.path.relpath(p, HERE) for p in LIB_SOURCES]

setup(
    ext_modules=[
        Extension(
            "framesrv._framesrv",
            sources=SOURCES,
            depends=["src/_framesrv.h"],
            include_dirs=[os.path.join(C_DIR, "include"), os.path.join(C_DIR, "src"), LAYOUT] + NUMPY_INCLUDE,
            define_macros=NUMPY_MACROS,
            libraries=["zmq", "pthread"],
            extra_compile_args=["-std=c11", "-fvisibility=hidden", "-Wall", "-Wextra"],
        )
    ],
)
