"""Where C and C++ code finds the Tack this package carries.

The package holds an install prefix of its own: tack/include (the
headers), tack/lib (libtack.so.<abi>, the one library the extension uses,
tack.pc and the CMake package). A C program or plugin built against it and
then importing tack shares one libtack, one device registry and one worker
pool with Python. `python -m tack --cflags --libs --cmake-dir` prints the
same facts for build scripts.
"""

from __future__ import annotations

import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def get_include() -> str:
    """The directory to put on the include path: #include <tack/tack.h>."""
    return os.path.join(_HERE, "include")


def get_library_dir() -> str:
    """The directory of libtack.so.<abi> (tack.pc in pkgconfig/ under it)."""
    return os.path.join(_HERE, "lib")


def _library_file() -> str:
    # One file under its SONAME; a wheel holds no libtack.so link.
    names = sorted(n for n in os.listdir(get_library_dir()) if n.startswith("libtack.so."))
    if not names:
        raise FileNotFoundError(f"no libtack.so.* in {get_library_dir()}: reinstall tack-arrays")
    return os.path.join(get_library_dir(), names[0])


def _cmake_dir() -> str:
    return os.path.join(get_library_dir(), "cmake", "Tack")


def cflags() -> str:
    return f"-I{get_include()}"


def libs() -> str:
    # The run path lets the program start without LD_LIBRARY_PATH; the
    # library is linked by file, which records its SONAME.
    return f"{_library_file()} -Wl,-rpath,{get_library_dir()}"
