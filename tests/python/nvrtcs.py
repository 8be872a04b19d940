"""The NVRTCs the CUDA code tests compile with: the newest, from the venv's
nvidia-cuda-nvrtc, and an older one the Makefile puts beside it; each one's
version and architectures, asked through ctypes. Shared by
test_cuda_code.py and test_show_config.py. Not a test file.
"""

import ctypes
import glob
import sys
from pathlib import Path

import pytest

import tack

SITE = Path(tack.__file__).resolve().parents[1]
# The older NVRTC the Makefile installs for these cases (pip --target).
OLDER = Path(sys.prefix) / "nvrtc-13.0" / "nvidia" / "cu13"

class Nvrtc:
    """An NVRTC library's version and architectures, asked through ctypes."""

    def __init__(self, path):
        self.path = str(path)
        lib = ctypes.CDLL(self.path)
        major, minor, n = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        assert lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) == 0
        assert lib.nvrtcGetNumSupportedArchs(ctypes.byref(n)) == 0
        archs = (ctypes.c_int * n.value)()
        assert lib.nvrtcGetSupportedArchs(archs) == 0
        self.major, self.minor = major.value, minor.value
        self.archs = sorted(archs)

    @property
    def driver(self):
        """The driver version of this NVRTC's own release, as cuDriverGetVersion says it."""
        return self.major * 1000 + self.minor * 10

    @property
    def ptx_isa(self):
        """The PTX ISA its PTX declares: CUDA 13.y writes PTX 9.y."""
        assert self.major == 13, "these cases know the PTX of CUDA 13's NVRTC"
        return f"9.{self.minor}"


def newest():
    paths = sorted(glob.glob(str(SITE / "nvidia" / "cu13" / "lib" / "libnvrtc.so.13")))
    if not paths:
        pytest.skip(f"no NVRTC of the nvidia-cuda-nvrtc package in {SITE}")
    return Nvrtc(paths[0])


def older():
    path = OLDER / "lib" / "libnvrtc.so.13"
    if not path.is_file():
        pytest.skip(f"the older NVRTC the Makefile installs is not at {path} (make venv installs it)")
    return Nvrtc(path)


def beyond(nvrtc):
    """A compute capability ("major.minor") newer than every architecture `nvrtc` lists."""
    arch = max(nvrtc.archs) + 1
    if arch % 10 == 0:
        arch += 1
    return f"{arch // 10}.{arch % 10}"
