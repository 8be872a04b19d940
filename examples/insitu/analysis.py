"""The analysis of the in-situ example: heat.c calls analyze() every few
steps with a tack.Array over the simulation's own field (no copy), and
this reads it with NumPy, runs a Tack kernel over it and writes a PNG."""
import os
import struct
import zlib

import numpy as np

import tack

# |grad u|^2 by central differences; the border is fixed at 0.
gradient = tack.Kernel("""
void grad2(tack_index i, tack_index j, int64_t n, const float *u, float *g)
{
    tack_index k = i * n + j;
    if (i == 0 || j == 0 || i == n - 1 || j == n - 1) { g[k] = 0.0f; return; }
    float dx = 0.5f * (u[k + 1] - u[k - 1]), dy = 0.5f * (u[k + n] - u[k - n]);
    g[k] = dx * dx + dy * dy;
}
""")


def analyze(field, step, out_dir):
    """Statistics of `field` (an n x n float32 tack.Array) at `step`, and
    the addresses at which NumPy and Tack saw it, for the caller to check."""
    u = np.asarray(field)  # a view of the simulation's memory
    n = field.shape[0]
    g = tack.zeros(field.shape, "float32", device=field.device)
    gradient.launch(field.shape, n, field, g)
    steepest = float(np.sqrt(np.asarray(g).max()))
    png = None
    if out_dir:
        png = os.path.join(out_dir, f"heat_{step:05d}.png")
        write_png(png, u)
    return {
        "numpy_address": u.__array_interface__["data"][0],
        "tack_address": field.ptr,
        "total": float(u.sum(dtype=np.float64)),
        "peak": float(u.max()),
        "steepest": steepest,
        "png": png,
    }


def live_arrays():
    """Arrays and buffers the Python side counts as alive."""
    counts = tack._tack.live_counts()
    return counts["arrays"] + counts["buffers"] + counts["exports"]


def write_png(path, u):
    """`u` as an 8-bit grey PNG, 0 black and its peak white."""
    peak = max(float(u.max()), 1e-30)
    image = (np.clip(u / peak, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)
    height, width = image.shape
    # Each row starts with its filter type, 0 (none).
    rows = np.zeros((height, width + 1), np.uint8)
    rows[:, 1:] = image

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(rows.tobytes())))
        f.write(chunk(b"IEND", b""))
