"""A tour of Tack's main job on the CPU: `python -m tack.demo` (`make demo`).

Each section crosses a library line and shows the address of the data on
both sides: the same address means nothing was copied, and a write on one
side is read on the other. A section whose library is not installed says so
in one line and the tour goes on. Nothing here is timed: the benchmarks
under bench/ measure against peers in the same run.

Sections are plain functions listed in SECTIONS.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap

import numpy as np

import tack

WIDTH = 100
LABEL = 38


def say(label, value=""):
    """A label and what it shows, the value wrapped in its own column (and
    started on the next line when the label fills the column)."""
    lines = textwrap.wrap(str(value), WIDTH - LABEL - 2, break_on_hyphens=False) or [""]
    if len(label) >= LABEL:
        print(f"  {label}")
        first = " " * LABEL
    else:
        first = f"{label:<{LABEL}}"
    print(f"  {first}{lines[0]}")
    for line in lines[1:]:
        print(" " * (LABEL + 2) + line)


def show(label, left, right):
    """Two addresses of the same data; a copy would be a failure of the tour."""
    if left != right:
        raise SystemExit(f"{label}: {left:#x} -> {right:#x}, a copy was made")
    say(label, f"{left:#x} on both sides: nothing copied")


def section(title):
    print(f"\n== {title}")


def skipped(title, why):
    print(f"\n== {title}: skipped, {why}")


def numpy_exchange():
    section("NumPy <-> Tack (DLPack, the buffer protocol)")
    n = np.arange(6, dtype=np.float32).reshape(2, 3)
    a = tack.from_dlpack(n)
    show("a = tack.from_dlpack(n)", n.ctypes.data, a.ptr)
    a.fill(7)
    say("a.fill(7); NumPy reads", n.ravel().tolist())
    m = np.asarray(a)
    show("m = np.asarray(a)", a.ptr, m.ctypes.data)
    m[0, 0] = 42.0
    print("  print(a):")
    print(textwrap.indent(str(a), "    "))


def torch_exchange():
    try:
        import torch
    except ImportError:
        skipped("PyTorch <-> Tack", "PyTorch is not installed (pip install torch)")
        return
    section(f"PyTorch {torch.__version__} <-> Tack")
    t = torch.arange(4, dtype=torch.int32)
    a = tack.from_dlpack(t)
    show("a = tack.from_dlpack(t)", t.data_ptr(), a.ptr)
    a.fill(3)
    say("a.fill(3); PyTorch reads", t.tolist())
    b = tack.array(np.linspace(0.0, 1.0, 5))
    u = torch.from_dlpack(b)
    show("u = torch.from_dlpack(b)", b.ptr, u.data_ptr())
    u.mul_(10)
    say("u.mul_(10); Tack reads", b.to_numpy().tolist())


def lifetime():
    section("Who keeps the memory alive")
    a = tack.array([1.0, 2.0, 3.0])
    m = np.from_dlpack(a)
    del a
    say("Tack array dropped; NumPy reads", f"{m.tolist()} (the export holds the memory)")
    v = tack.from_dlpack(np.arange(6.0)).reshape(2, 3)
    say("NumPy array dropped; Tack reads", f"{v.to_numpy().ravel().tolist()} (the import holds it)")


def kernel_in_place():
    section("A Tack kernel on NumPy memory")
    scale = tack.Kernel("void scale_add(tack_index i, float a, float b, float *v) { v[i] = a * v[i] + b; }")
    say("kernel", scale.signature)
    n = np.arange(6, dtype=np.float32)
    a = tack.from_dlpack(n)
    show("a = tack.from_dlpack(n)", n.ctypes.data, a.ptr)
    scale(10.0, 1.0, a)  # over i in [0, a.size): the shape of its one array
    say("scale_add(10.0, 1.0, a); NumPy reads", n.tolist())
    frozen = np.ones(3, np.float32)
    frozen.flags.writeable = False
    try:
        scale(1.0, 1.0, tack.from_dlpack(frozen))
    except ValueError as exc:
        say("a read-only import is refused", f"ValueError: {exc}")
    else:
        raise SystemExit("a kernel stored through a read-only import")

    # Two indices, launched over a shape, and atomics: a 2-D histogram of
    # which row band and column band each bright pixel falls in.
    bands = tack.Kernel(BANDS_KERNEL)
    say("2-D kernel", bands.signature)
    h, w = 64, 96
    image = np.add.outer(np.arange(h), np.arange(w)).astype(np.float32)
    counts = np.zeros((4, 4), np.int32)
    img, hist = tack.from_dlpack(image), tack.from_dlpack(counts)
    show("hist = tack.from_dlpack(counts)", counts.ctypes.data, hist.ptr)
    bands.launch((h, w), h, w, 80.0, img, hist)  # every (i, j), i < h, j < w
    expected = np.zeros((4, 4), np.int32)
    i, j = np.nonzero(image > 80.0)
    np.add.at(expected, (i * 4 // h, j * 4 // w), 1)
    if not np.array_equal(counts, expected):
        raise SystemExit("the 2-D kernel's atomic counts differ from NumPy's")
    say(f"bands.launch(({h}, {w}), h, w, 80.0, img, hist); NumPy reads", f"{counts.tolist()}, as np.add.at counts")


BANDS_KERNEL = """
void bands(tack_index i, tack_index j, int64_t h, int64_t w, float level, const float *image, int32_t *counts) {
    if (image[i * w + j] > level)
        tack_atomic_add(&counts[(i * 4 / h) * 4 + j * 4 / w], 1);
}
"""


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

        # The routes tack.interop.vtk names for such a VTK: VTK arrays
        # speak the buffer protocol, and numpy_support wraps a NumPy view.
        def array_to_vtk(array, name=None):
            # numpy_to_vtk keeps the view alive; the view keeps the Tack array.
            vtk_array = numpy_support.numpy_to_vtk(np.asarray(array), deep=False)
            vtk_array.SetName(name)
            return vtk_array

        return (tack.asarray, array_to_vtk,
                "this VTK has no dlpack_support: tack.asarray and numpy_support.numpy_to_vtk")
    from tack.interop import vtk as tvtk

    return tvtk.vtk_to_array, tvtk.array_to_vtk, "tack.interop.vtk"


def vtk_exchange():
    try:
        from vtkmodules.util import numpy_support
        from vtkmodules.vtkCommonCore import VTK_FLOAT, vtkVersion
        from vtkmodules.vtkCommonDataModel import vtkImageData
        from vtkmodules.vtkIOXML import vtkXMLImageDataWriter
    except ImportError:
        skipped("VTK <-> Tack", "VTK is not installed (pip install vtk)")
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
    if not np.array_equal(numpy_support.vtk_to_numpy(radius), expected):
        raise SystemExit("the kernel's squared radius differs from NumPy's")
    say("the kernel's squared radius", f"equals NumPy's at all {r2.size} points ({nx}x{ny}x{nz})")

    with tempfile.TemporaryDirectory(prefix="tack-demo-") as folder:
        path = os.path.join(folder, "radius.vti")
        writer = vtkXMLImageDataWriter()
        writer.SetFileName(path)
        writer.SetInputData(image)
        if writer.Write() != 1:
            raise SystemExit(f"VTK could not write {path}")
        say("VTK's writer wrote both arrays", f"radius.vti, {os.path.getsize(path)} bytes (then deleted)")

    r2.fill(1.5)
    say("r2.fill(1.5); VTK reads", f"scalars[0] = {scalars.GetValue(0)}, radius2[0] = {radius.GetValue(0)}")


def jax_exchange():
    try:
        import jax
        import jax.dlpack
        import jax.numpy as jnp
    except ImportError:
        skipped("JAX <-> Tack", "JAX is not installed (pip install jax)")
        return
    section(f"JAX {jax.__version__} <-> Tack")
    a = tack.zeros(1000, tack.f32)  # 64-byte aligned, which XLA needs to wrap host memory in place
    y = jax.dlpack.from_dlpack(a)
    show("y = jax.dlpack.from_dlpack(a)", a.ptr, y.unsafe_buffer_pointer())
    a.fill(2.0)
    say("a.fill(2.0); jnp.sum(y)", float(jnp.sum(y)))
    j = jnp.arange(8, dtype=jnp.int32)
    b = tack.from_dlpack(j)
    show("b = tack.from_dlpack(j)", j.unsafe_buffer_pointer(), b.ptr)
    say("Tack reads", b.to_numpy().tolist())


def warp_exchange():
    try:
        import warp as wp
    except ImportError:
        skipped("Warp <-> Tack", "Warp is not installed (pip install warp-lang)")
        return
    wp.config.log_level = wp.LOG_ERROR  # no greeting
    # Warp's native library notes on stderr that a machine has no CUDA
    # driver; this tour is about the CPU, so the note is left out (errors
    # still raise).
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            wp.init()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    section(f"Warp {wp.config.version} <-> Tack")
    a = tack.array(np.arange(4, dtype=np.float32))
    w = wp.from_dlpack(a)
    show("w = wp.from_dlpack(a)", a.ptr, w.ptr)
    a.fill(5.0)
    say("a.fill(5.0); Warp reads", w.numpy().tolist())
    v = wp.zeros(3, dtype=wp.int32, device="cpu")
    b = tack.from_dlpack(v)
    show("b = tack.from_dlpack(v)", v.ptr, b.ptr)
    # Warp launches take a Tack array as they take their own.
    c = tack.zeros(5, tack.f32)
    wp.launch(warp_kernel(wp), dim=c.size, inputs=[c, 0.5], device="cpu")
    say("wp.launch(ramp, inputs=[c, 0.5]); Tack reads", f"{c.to_numpy().tolist()} at {c.ptr:#x}")


_WARP_KERNELS: dict[str, object] = {}


def warp_kernel(wp):
    """A Warp kernel that writes x[i] = step * i, made once (Warp compiles
    it on first launch and caches the code). Its Warp types are set as
    annotations here, where `wp` is imported."""
    if "ramp" not in _WARP_KERNELS:

        def ramp(x, step):
            i = wp.tid()
            x[i] = step * wp.float32(i)

        ramp.__annotations__ = {"x": wp.array(dtype=wp.float32), "step": wp.float32}
        _WARP_KERNELS["ramp"] = wp.kernel(ramp)
    return _WARP_KERNELS["ramp"]


CHILD = """
import socket, sys, tack
sock = socket.socket(fileno=int(sys.argv[1]))
a = tack.receive_array(sock)          # maps the same pages, copies nothing
a.fill(int(sys.argv[2]))
sock.sendall(b"done")                 # one byte of news; the values stay put
"""


def cross_process():
    section("Another process writes a Tack array (a sealed memfd and its descriptor)")
    a = tack.zeros(1 << 20, tack.i32, exportable=True)
    exported = a.export_memory()
    say("a = tack.zeros(n, exportable=True)", f"{a.nbytes} bytes behind descriptor {exported.handle}")
    ours, theirs = socket.socketpair()
    with ours, theirs:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(theirs.fileno()), "7"], pass_fds=[theirs.fileno()],
                                 env=env)
        theirs.close()
        tack.send_array(ours, a)
        ours.settimeout(60)
        reply = ours.recv(4)
        status = child.wait(60)
    if reply != b"done" or status != 0:
        raise SystemExit(f"the child process failed (exit status {status})")
    say("tack.send_array(sock, a)", f"process {child.pid} received it and filled it with 7")
    values = np.asarray(a)
    say("this process reads", f"{int(values.min())} to {int(values.max())} in all {a.size} elements, in place")


MPI_RANKS = """
from mpi4py import MPI
import tack
comm = MPI.COMM_WORLD
a = tack.zeros(4, tack.f64)
a.fill(comm.Get_rank() + 1)
before = a.ptr
comm.Allreduce(MPI.IN_PLACE, a)       # MPI reads and writes the array's own memory
values = [float(v) for v in memoryview(a)]
if comm.Get_rank() == 0:
    print(f"{comm.Get_size()} ranks, each a.fill(rank + 1); Allreduce(MPI.IN_PLACE, a) "
          f"gives {values} at the same address: {a.ptr == before}")
"""


def mpi_exchange():
    try:
        import mpi4py  # noqa: F401  (not MPI: importing MPI starts MPI in this process)
    except ImportError:
        skipped("MPI <-> Tack", "mpi4py is not installed (pip install mpi4py)")
        return
    mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
    if mpirun is None:
        skipped("MPI <-> Tack", "no mpirun on PATH (Debian: apt-get install openmpi-bin)")
        return
    command = [mpirun]
    version = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=60)
    if "Open MPI" in version.stdout + version.stderr:
        # Open MPI refuses root without the first, more ranks than cores without the second.
        command += ["--allow-run-as-root"] if os.geteuid() == 0 else []
        command += ["--oversubscribe"]
    command += ["-n", "2", sys.executable, "-c", MPI_RANKS]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env,
                             start_new_session=True)
    except subprocess.TimeoutExpired:
        skipped("MPI <-> Tack", f"{os.path.basename(mpirun)} did not finish in 120 s")
        return
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no message"])[-1]
        skipped("MPI <-> Tack", f"{os.path.basename(mpirun)} failed ({last})")
        return
    section("MPI <-> Tack (mpi4py, two ranks)")
    say("mpirun -n 2", run.stdout.strip())


C_EXAMPLE = os.path.join("examples", "c", "exchange.c")
C_PREFIX = os.path.join("build", "demo-c")


def c_library(root):
    """(cflags and libs, how to say them, where the library came from) for a
    libtack of this version: an installed one pkg-config knows, else one
    built from this source tree into build/demo-c (make install-c; a few
    seconds, once). A str says why there is none."""
    pkg_config = shutil.which("pkg-config")
    if pkg_config:
        found = subprocess.run([pkg_config, "--modversion", "tack"], capture_output=True, text=True, timeout=60)
        if found.returncode == 0 and found.stdout.strip() == tack.__version__:
            flags = subprocess.run([pkg_config, "--cflags", "--libs", "tack"], capture_output=True, text=True,
                                   timeout=60, check=True).stdout.split()
            return flags, "$(pkg-config --cflags --libs tack)", f"installed: pkg-config finds tack {tack.__version__}"
    if not shutil.which("make"):
        return "no libtack installed and no make to build one (make install-c PREFIX=<dir> installs it)"
    prefix = os.path.join(root, C_PREFIX, "prefix")
    # Meson is a Python program of its own environment: this interpreter's
    # module path is not for it.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    build = subprocess.run(["make", "--no-print-directory", "install-c", f"PREFIX={prefix}",
                            f"C_BUILD={os.path.join(root, C_PREFIX, 'build')}"], cwd=root, env=env,
                           capture_output=True, text=True, timeout=600)
    if build.returncode != 0:
        said = [line for line in (build.stdout + build.stderr).strip().splitlines()
                if line.strip() and not line.startswith(("make:", "make["))] or ["no output"]
        return f"make install-c failed ({said[-1].strip()})"
    lib = os.path.join(prefix, "lib")
    shown = os.path.join(C_PREFIX, "prefix")
    return ([f"-I{os.path.join(prefix, 'include')}", f"-L{lib}", "-ltack", f"-Wl,-rpath,{lib}"],
            f"-I{shown}/include -L{shown}/lib -ltack -Wl,-rpath,{shown}/lib",
            f"built from this tree by make install-c PREFIX={shown}")


def c_api():
    """examples/c/exchange.c, built against libtack and run: the same arrays,
    kernel and DLPack exchange from C. It lives in the source tree, which
    the installed package does not carry."""
    title = "The C API (examples/c/exchange.c)"
    root = os.getcwd()
    if not os.path.isfile(os.path.join(root, C_EXAMPLE)):
        skipped(title, f"{C_EXAMPLE} is in Tack's source tree, not in the package: run make demo there")
        return
    cc = shutil.which("cc")
    if cc is None:
        skipped(title, f"no C compiler (cc) on PATH to build {C_EXAMPLE}")
        return
    library = c_library(root)
    if isinstance(library, str):
        skipped(title, library)
        return
    flags, shown, origin = library
    with tempfile.TemporaryDirectory(prefix="tack-demo-c-") as folder:
        program = os.path.join(folder, "exchange")
        built = subprocess.run([cc, "-std=c11", os.path.join(root, C_EXAMPLE), *flags, "-o", program],
                               capture_output=True, text=True, timeout=300)
        if built.returncode != 0:
            skipped(title, f"{C_EXAMPLE} does not build: {(built.stderr.strip().splitlines() or ['?'])[-1]}")
            return
        ran = subprocess.run([program], capture_output=True, text=True, timeout=300)
    if ran.returncode != 0:
        raise SystemExit(f"{C_EXAMPLE} failed (exit status {ran.returncode}):\n{ran.stdout}{ran.stderr}")
    section(title)
    say("libtack", origin)
    say("built with", f"cc -std=c11 {C_EXAMPLE} {shown}")
    lines = ran.stdout.strip().splitlines()
    for i, line in enumerate(lines):
        say("./exchange prints" if i == 0 else "", line)
    if lines[-1:] != ["ok"]:
        raise SystemExit(f"{C_EXAMPLE} did not check out:\n{ran.stdout}")


SECTIONS = [numpy_exchange, torch_exchange, lifetime, kernel_in_place, vtk_exchange, jax_exchange, warp_exchange,
            cross_process, mpi_exchange, c_api]


def main(argv=None):
    print(f"Tack {tack.__version__}: arrays that cross library lines without a copy "
          f"(default device {tack.get_default_device().name})")
    for run in SECTIONS:
        run()
    print("\nEvery crossing above shared one memory; the README has the rest.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
