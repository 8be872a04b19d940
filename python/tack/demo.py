"""A walk through Tack's exchanges on the CPU: `python -m tack.demo`.

Each section shows one crossing between libraries: the address of the data
on both sides (the same address means nothing was copied) and what one
crossing costs. Sections are plain functions listed in SECTIONS; add new
ones there.
"""

import os
import sys
import tempfile
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


def kernel_in_place():
    if not hasattr(tack, "Kernel"):
        section("A Tack kernel on NumPy memory: skipped, this build has no kernels")
        return
    section("A Tack kernel on NumPy memory")
    scale = tack.Kernel("void scale_add(tack_index i, float a, float b, float *v) { v[i] = a * v[i] + b; }")
    say("kernel", scale.signature)
    n = np.arange(6, dtype=np.float32)
    a = tack.from_dlpack(n)
    show("NumPy array -> Tack array", n.ctypes.data, a.ptr)
    scale(10.0, 1.0, a)  # over i in [0, a.size): the first array it stores to
    say("scale_add(10.0, 1.0, a); NumPy now sees", n.tolist())
    frozen = np.ones(3, np.float32)
    frozen.flags.writeable = False
    try:
        scale(1.0, 1.0, tack.from_dlpack(frozen))
    except ValueError as exc:
        say("a read-only import is refused", f"ValueError: {str(exc)[:60]}...")
    cost("1-element kernel launch", lambda x: scale(2.0, 0.0, x), tack.zeros(1))


RADIUS_KERNEL = """
void radius2(tack_index i, int64_t nx, int64_t ny, double cx, double cy, double cz, float *out) {
    int64_t x = i % nx, y = (i / nx) % ny, z = i / (nx * ny);
    double dx = (double)x - cx, dy = (double)y - cy, dz = (double)z - cz;
    out[i] = (float)(dx * dx + dy * dy + dz * dz);
}
"""


def vtk_bridge():
    """(vtk_to_array, array_to_vtk, label): tack.interop.vtk when this VTK has
    vtkmodules.util.dlpack_support; otherwise the same zero-copy crossing
    spelled out through VTK's NumPy bridge and DLPack."""
    from vtkmodules.util import numpy_support

    try:
        import vtkmodules.util.dlpack_support  # noqa: F401
    except ImportError:

        def vtk_to_array(vtk_array):
            # numpy_support's view keeps the VTK array alive; the import keeps the view.
            return tack.from_dlpack(numpy_support.vtk_to_numpy(vtk_array))

        def array_to_vtk(array, name=None):
            # numpy_to_vtk keeps the view alive; the view pins Tack's export.
            vtk_array = numpy_support.numpy_to_vtk(np.from_dlpack(array), deep=False)
            vtk_array.SetName(name)
            return vtk_array

        return vtk_to_array, array_to_vtk, "this VTK has no dlpack_support: through VTK's NumPy bridge"
    from tack.interop import vtk as tvtk

    return tvtk.vtk_to_array, tvtk.array_to_vtk, "tack.interop.vtk"


def vtk_exchange():
    try:
        from vtkmodules.util import numpy_support
        from vtkmodules.vtkCommonCore import VTK_FLOAT, vtkVersion
        from vtkmodules.vtkCommonDataModel import vtkImageData
        from vtkmodules.vtkIOXML import vtkXMLImageDataWriter
    except ImportError:
        section("VTK <-> Tack: skipped, VTK is not installed (pip install vtk)")
        return
    if not hasattr(tack, "Kernel"):
        section("VTK <-> Tack: skipped, this build of Tack has no kernels")
        return
    vtk_to_array, array_to_vtk, how = vtk_bridge()
    section(f"VTK {vtkVersion.GetVTKVersion()} <-> Tack ({how})")

    def address(vtk_array):
        return numpy_support.vtk_to_numpy(vtk_array).ctypes.data

    nx, ny, nz = 64, 48, 32
    image = vtkImageData()
    image.SetDimensions(nx, ny, nz)
    image.AllocateScalars(VTK_FLOAT, 1)
    scalars = image.GetPointData().GetScalars()
    r2 = vtk_to_array(scalars)
    show("image scalars -> Tack array", address(scalars), r2.ptr)

    cx, cy, cz = (nx - 1) / 2, (ny - 1) / 2, (nz - 1) / 2
    tack.Kernel(RADIUS_KERNEL).launch(r2.size, nx, ny, cx, cy, cz, r2)
    radius = array_to_vtk(r2, name="radius2")
    image.GetPointData().AddArray(radius)
    show("Tack array -> VTK array 'radius2'", r2.ptr, address(radius))

    # x varies fastest in VTK's point order: index = x + nx * (y + ny * z)
    z, y, x = np.meshgrid(np.arange(nz), np.arange(ny), np.arange(nx), indexing="ij")
    expected = ((x - cx) ** 2 + (y - cy) ** 2 + (z - cz) ** 2).astype(np.float32).ravel()
    same = np.array_equal(numpy_support.vtk_to_numpy(radius), expected)
    say("kernel's squared radius == NumPy's", f"{same}  ({r2.size} points, {nx}x{ny}x{nz})")
    if not same:
        raise SystemExit("the kernel's squared radius differs from NumPy's")

    path = os.path.join(tempfile.mkdtemp(prefix="tack-demo-"), "radius.vti")
    writer = vtkXMLImageDataWriter()
    writer.SetFileName(path)
    writer.SetInputData(image)
    if writer.Write() != 1:
        raise SystemExit(f"VTK could not write {path}")
    say("written", f"{path} ({os.path.getsize(path)} bytes)")

    r2.fill(1.5)
    say("r2.fill(1.5); VTK's two arrays see", f"scalars[0] = {scalars.GetValue(0)}, radius2[0] = {radius.GetValue(0)}")

    cost("vtk_to_array(vtk_array)", vtk_to_array, scalars)
    cost("array_to_vtk(tack_array)", array_to_vtk, r2)


SECTIONS = [numpy_exchange, torch_exchange, lifetime, kernel_in_place, vtk_exchange]


def main(argv=None):
    print(f"Tack {getattr(tack, '__version__', '')} on {tack.get_default_device()!r}")
    for run in SECTIONS:
        run()
    return 0


if __name__ == "__main__":
    sys.exit(main())
