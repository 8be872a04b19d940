"""
The heat equation, drawn without a copy
=======================================

A square plate, hot in three spots, cools by diffusion: the temperature
``u`` follows the heat equation, ∂u/∂t = α ∇²u, with the edges held at
0. Two Tack kernels step it on the CPU, updating the field in place, and
Matplotlib draws the field straight from Tack's memory: NumPy's view of a
host array is the array's own memory, so nothing is copied to plot it.
"""

# %%
# The field
# ---------
# A Tack array of float32, zero-filled like every allocation, with three
# hot spots written through a NumPy view of the same memory.
import matplotlib.pyplot as plt
import numpy as np

import tack

h, w = 128, 192
u = tack.zeros((h, w), tack.f32)
view = np.asarray(u)  # a view: no copy
assert view.ctypes.data == u.ptr  # the same memory
yy, xx = np.mgrid[0:h, 0:w]
for cy, cx, r in ((40, 50, 14), (90, 120, 20), (30, 150, 9)):
    view[(yy - cy) ** 2 + (xx - cx) ** 2 < r * r] = 100.0

# %%
# The kernels
# -----------
# A kernel is one C function whose leading ``tack_index`` parameters are
# the indices of a domain. ``laplacian`` writes the five-point Laplacian of
# ``u`` into ``d``; ``step`` then adds ``alpha * dt`` of it to ``u`` in
# place. Two kernels rather than one, because a point's update reads its
# neighbours, which other indices of the same launch may be updating.
laplacian = tack.Kernel("""
void laplacian(tack_index i, tack_index j, int64_t h, int64_t w, const float *u, float *d)
{
    tack_index k = i * w + j;
    if (i == 0 || j == 0 || i == h - 1 || j == w - 1) { d[k] = 0.0f; return; }
    d[k] = u[k - w] + u[k + w] + u[k - 1] + u[k + 1] - 4.0f * u[k];
}
""")
step = tack.Kernel("""
void step(tack_index i, tack_index j, int64_t w, float c, const float *d, float *u)
{
    u[i * w + j] += c * d[i * w + j];
}
""")
d = tack.zeros((h, w), tack.f32)

# %%
# Stepping
# --------
# Each launch names its domain explicitly: ``.launch((h, w), ...)`` runs the
# kernel for every ``(i, j)`` with ``i < h`` and ``j < w``, the last index
# fastest. ``alpha * dt = 0.2`` keeps the explicit scheme stable (it must
# stay under 0.25). Snapshots are taken as NumPy views, copied only to keep
# them for the figure.
snapshots = []
for n in range(1201):
    if n % 400 == 0:
        snapshots.append((n, np.asarray(u).copy()))
    laplacian.launch((h, w), h, w, u, d)
    step.launch((h, w), w, 0.2, d, u)

assert np.asarray(u).ctypes.data == u.ptr  # still the array made above
print(f"total heat {view.sum():.0f}, peak {view.max():.2f} after {n} steps")

# %%
# Drawing the field without a copy
# --------------------------------
# ``np.from_dlpack`` (or ``np.asarray``) gives NumPy's view of the array's
# own memory, which ``imshow`` takes as it is; from there the pixels are
# Matplotlib's work.
field = np.from_dlpack(u)
assert field.ctypes.data == u.ptr  # Tack's memory, not a copy of it
fig, axes = plt.subplots(1, len(snapshots) + 1, figsize=(13, 2.6), constrained_layout=True)
for ax, (n, snapshot) in zip(axes, snapshots):
    ax.imshow(snapshot, cmap="inferno", vmin=0, vmax=100)
    ax.set_title(f"step {n}")
    ax.axis("off")
image = axes[-1].imshow(field, cmap="inferno", vmin=0, vmax=100)
axes[-1].set_title("now, from Tack's memory")
axes[-1].axis("off")
fig.colorbar(image, ax=axes, shrink=0.8, label="temperature")
plt.show()
