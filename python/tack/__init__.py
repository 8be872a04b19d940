"""Tack: arrays on host and GPU devices that cross library lines without a copy.

Everything here is implemented in C (tack._tack); this package re-exports it.
"""
from tack._tack import (  # noqa: F401
    Array,
    Device,
    DType,
    ExportedMemory,
    Kernel,
    __version__,
    array,
    array_from_ptr,
    asarray,
    bf16,
    bool,
    c64,
    c128,
    device,
    empty,
    f16,
    f32,
    f64,
    from_dlpack,
    get_default_device,
    i8,
    i16,
    i32,
    i64,
    import_memory,
    memory_space,
    receive_array,
    send_array,
    set_default_device,
    u8,
    u16,
    u32,
    u64,
    zeros,
)
from tack._config import show_config  # noqa: F401
from tack._build import get_include, get_library_dir  # noqa: F401

# tack.bool is a dtype, like np.bool, but unlike NumPy's it is no type:
# `from tack import *` must not shadow the builtin with it.
__all__ = [name for name in dir() if not name.startswith("_") and name != "bool"]
