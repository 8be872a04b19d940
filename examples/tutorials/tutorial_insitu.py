"""
In situ: a C simulation analysed in Python
==========================================

A simulation written in C steps its field with a Tack kernel and, every
100 steps, hands the field to Python for analysis, without a copy either
way: ``examples/insitu`` in the repository. ``heat.c`` embeds the Python
interpreter, and the two sides share one libtack, so the ``tack.Array``
Python receives is the C code's own array.

The simulation
--------------

``heat.c`` keeps two arrays, ``u`` and ``v``, and launches a kernel over the
2-D grid with ``tack_kernel_launch_nd``, releasing the GIL while it steps.
Every ``EVERY`` steps it wraps ``u`` with ``tack_py_from_array`` and calls
``analysis.analyze``; then it checks that NumPy and Tack saw its own
address and that Python's total equals the one it computes itself.

.. literalinclude:: ../../examples/insitu/heat.c
   :language: c
   :start-at: int main
   :end-before: /* Every count back to zero

The analysis
------------

``analysis.py`` reads the field with NumPy (a view of the simulation's
memory), runs a Tack kernel of its own over it, and writes a PNG.

.. literalinclude:: ../../examples/insitu/analysis.py
   :language: python
   :end-before: def live_arrays

Building it
-----------

``heat.c`` is built with CMake against the libtack of the ``tack`` that
Python imports (``python -m tack --cmake-dir``) and against that Python's
library; ``examples/insitu/run.py`` does it all, and ``make insitu`` runs
it:

.. literalinclude:: ../../examples/insitu/CMakeLists.txt
   :language: cmake
   :start-at: find_package(Tack

Running it
----------

The script below builds and runs the simulation (in ``build/insitu-docs``),
prints what it printed, and shows the images its analysis wrote.
"""

# %%
import pathlib
import subprocess
import sys

import matplotlib.image as mpimg
import matplotlib.pyplot as plt

try:
    here = pathlib.Path(__file__).resolve().parent
except NameError:  # run by Sphinx-Gallery, from this folder
    here = pathlib.Path.cwd()
root = here.parents[1]
build = root / "build" / "insitu-docs"
pngs = build / "png"
run = subprocess.run([sys.executable, str(root / "examples" / "insitu" / "run.py"), "--build", str(build),
                      "--out", str(pngs)], capture_output=True, text=True, timeout=600)
print(run.stdout)
assert run.returncode == 0 and "ok" in [line.strip() for line in run.stdout.splitlines()], run.stdout + run.stderr

# %%
# The field at the steps the analysis saw, as the PNGs it wrote:
images = sorted(pngs.glob("heat_*.png"))
assert images, f"no PNG in {pngs}"
fig, axes = plt.subplots(1, len(images), figsize=(3 * len(images), 3.2), constrained_layout=True)
for ax, path in zip(axes, images):
    ax.imshow(mpimg.imread(str(path)), cmap="gray")
    ax.set_title(f"step {int(path.stem.split('_')[1])}")
    ax.axis("off")
plt.show()
