"""A walk through Tack's exchanges on the CPU: `python -m tack.demo`.

Each section shows one crossing between libraries: the address of the data
on both sides (the same address means nothing was copied) and what one
crossing costs. Sections are plain functions listed in SECTIONS; add new
ones there.
"""

import sys
import timeit

import numpy as np

import tack


def cost_us(f, x, number=20_000, repeat=5):
    """Best per-call cost of f(x) in microseconds."""
    timer = timeit.Timer("f(x)", globals={"f": f, "x": x})
    return min(timer.repeat(number=number, repeat=repeat)) / number * 1e6


def say(label, value):
    print(f"  {label:<36} {value}")


def show(label, left, right):
    same = "same address, nothing copied" if left == right else "DIFFERENT addresses: a copy was made"
    say(label, f"{left:#x} -> {right:#x}  ({same})")


def cost(label, f, x):
    say(f"one {label}", f"{cost_us(f, x):.2f} us")


def section(title):
    print(f"\n== {title}")


def numpy_exchange():
    section("NumPy <-> Tack")
    n = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = tack.from_dlpack(n)
    say("a = tack.from_dlpack(n)", repr(a))
    show("NumPy array -> Tack array", n.ctypes.data, a.ptr)
    a.fill(7)
    say("a.fill(7); NumPy now sees", n.ravel().tolist())

    b = tack.zeros((2, 3), tack.f64)
    m = np.from_dlpack(b)
    show("Tack array -> NumPy array", b.ptr, m.ctypes.data)
    m[0, 0] = 42.0
    say("m[0, 0] = 42; Tack now sees", b.to_numpy().ravel().tolist())

    cost("tack.from_dlpack(numpy_array)", tack.from_dlpack, n)
    cost("np.from_dlpack(tack_array)", np.from_dlpack, b)
    cost("np.from_dlpack(numpy_array)", np.from_dlpack, n)


def torch_exchange():
    try:
        import torch
    except ImportError:
        section("PyTorch <-> Tack: skipped, PyTorch is not installed")
        return
    section("PyTorch <-> Tack")
    t = torch.arange(4, dtype=torch.int32)
    a = tack.from_dlpack(t)
    show("torch tensor -> Tack array", t.data_ptr(), a.ptr)
    a.fill(3)
    say("a.fill(3); PyTorch now sees", t.tolist())

    b = tack.array(np.linspace(0.0, 1.0, 5))
    u = torch.from_dlpack(b)
    show("Tack array -> torch tensor", b.ptr, u.data_ptr())
    u.mul_(10)
    say("u.mul_(10); Tack now sees", b.to_numpy().tolist())

    cost("tack.from_dlpack(torch_tensor)", tack.from_dlpack, t)
    cost("torch.from_dlpack(tack_array)", torch.from_dlpack, b)
    cost("torch.from_dlpack(numpy_array)", torch.from_dlpack, np.zeros(4, np.float32))


def lifetime():
    section("Who keeps the memory alive")
    a = tack.array([1.0, 2.0, 3.0])
    m = np.from_dlpack(a)
    del a
    say("Tack array deleted; NumPy still reads", f"{m.tolist()}  (the export pins it)")
    v = tack.from_dlpack(np.arange(6.0)).reshape(2, 3)
    say("NumPy source gone; Tack still reads", f"{v.to_numpy().ravel().tolist()}  (the import holds it)")


SECTIONS = [numpy_exchange, torch_exchange, lifetime]


def main(argv=None):
    print(f"Tack {getattr(tack, '__version__', '')} on {tack.get_default_device()!r}")
    for run in SECTIONS:
        run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
