"""tack.show_config() and `python -m tack`: what a bug report needs.

The facts about Tack's own parts -- each backend's driver, where the
dynamic loader found it, its devices, each backend's kernel compiler and the
kernel cache -- are gathered in C by the code that loads and uses them
(tack_backend_describe, tack_kernel_cache_dir); this module adds what only
Python knows (the interpreter, NumPy) and lays it out.
"""

from __future__ import annotations

import os
import sys

# typing, platform and textwrap would double the time import tack takes:
# the first is for type checkers only, the others are imported when a
# report is made.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import IO, Any

# The extension's private half, which the stub does not declare.
_tack = __import__("tack._tack", fromlist=["_config"])

WIDTH = 100
LABEL = 18


def _lines(label: str, value: str, indent: int) -> list[str]:
    """`label` and `value` in two columns, the value wrapped under itself."""
    import textwrap

    column = WIDTH - indent - LABEL
    lines: list[str] = []
    for part in value.split("\n"):
        lines += textwrap.wrap(part, column, break_on_hyphens=False, break_long_words=False) or [""]
    head = " " * indent + f"{label:<{LABEL}}"
    if len(label) >= LABEL:
        head = " " * indent + label + "\n" + " " * (indent + LABEL)
    return [head + lines[0]] + [" " * (indent + LABEL) + line for line in lines[1:]]


def _numpy() -> str:
    try:
        import numpy
    except ImportError as exc:
        return f"not installed ({type(exc).__name__}: {exc}); pip install numpy"
    return f"{numpy.__version__}  {os.path.dirname(numpy.__file__)}"


def _component(part: dict[str, Any]) -> str:
    """One driver or compiler: its version and where it is, or why not."""
    if not part["found"]:
        return f"not found: {part['note']}"
    text = "  ".join(x for x in (part["version"], part["path"]) if x)
    if part["note"]:
        text += f"\n({part['note']})" if text else part["note"]
    return text


def _backend(report: dict[str, Any]) -> list[str]:
    name = report["backend"]
    count = report["device_count"]
    usable = report["driver"]["found"] and count > 0
    state = f"available, {count} device{'s' if count != 1 else ''}" if usable else "not available"
    out = _lines(name, state, 0)
    out += _lines(report["driver"]["name"], _component(report["driver"]), 2)
    for i, device in enumerate(report["devices"]):
        out += _lines(f"{name}:{i}", device, 2)
    if count > len(report["devices"]):
        out += _lines("", f"... and {count - len(report['devices'])} more", 2)
    # Where a backend chooses among several libraries (NVRTC), each found,
    # and what each device's kernels would be built as.
    compilers = report["compilers"] or ([report["compiler"]] if report["compiler"]["name"] else [])
    for compiler in compilers:
        out += _lines(compiler["name"], _component(compiler), 2)
    for i, code in enumerate(report["kernel_code"]):
        if code:
            out += _lines(f"{name}:{i} kernels", code, 2)
    return out


def config_text() -> str:
    """The report that show_config() prints, as one string."""
    import platform

    config = _tack._config()
    here = os.path.dirname(os.path.abspath(__file__))
    out = _lines("Tack", f"{config['version']}  {here}", 0)
    out += _lines("Python", f"{platform.python_version()} ({platform.python_implementation()})  {sys.executable}", 0)
    out += _lines("NumPy", _numpy(), 0)
    out += _lines("platform", f"{platform.platform()}, {os.cpu_count()} CPUs", 0)
    if config["cache_dir"] is not None:
        out += _lines("kernel cache", config["cache_dir"], 0)
    else:
        out += _lines("kernel cache", f"unusable: {config['cache_error']}", 0)
    for report in config["backends"]:
        out.append("")
        out += _backend(report)
    return "\n".join(out) + "\n"


def show_config(file: IO[str] | None = None) -> None:
    """Prints what a bug report about Tack needs: Tack's, Python's and NumPy's
    versions; for each backend whether its driver was found, where and which
    version, and its devices; each backend's kernel compiler (the C
    compiler, NVRTC, hipRTC, ocloc) with its version -- every NVRTC found,
    and for each CUDA device which one its kernels would be built by, and
    as what (a CUBIN for its architecture, or PTX), or why none fits its
    driver; and the kernel cache directory. Nothing is allocated on a device. `python -m tack` prints
    the same."""
    (file if file is not None else sys.stdout).write(config_text())
