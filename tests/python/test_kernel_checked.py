"""Extents in the kernel and checked launches.

`tack_extent(y, d)` and `tack_size(y)` read, inside a kernel's body, the
shape of the array bound to parameter `y` at this launch; they are passed
only to kernels that use them. A kernel built with `checked=True` (or under
TACK_CHECKED=1) checks every subscript of an array parameter against that
array's element count: an access out of bounds touches nothing, and the
launch raises IndexError naming the kernel, the parameter, the index, the
extent and the source line."""

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tack
from children import run_python
from conftest import nvrtc_or_skip

pytestmark = pytest.mark.usefixtures("private_kernel_cache")


def run(script, **env):
    """Runs `script` in a fresh interpreter; its stdout. Fails with its
    output when it fails."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=180,
                       env=dict(os.environ, **env))
    assert r.returncode == 0, f"exit {r.returncode}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
    return r.stdout


# ---- extents ------------------------------------------------------------


def test_size_and_extent_of_a_1d_array():
    k = tack.Kernel("""
    void sizes(tack_index i, float *y)
    {
        y[i] = (float)(tack_size(y) * 100 + tack_extent(y, 0) + tack_extent(y, 1) + tack_extent(y, -1));
    }
    """)
    y = tack.zeros(7, dtype="float32")
    k(y)
    # Extents past the array's dimensions read 0.
    np.testing.assert_array_equal(y.to_numpy(), np.full(7, 707, np.float32))


def test_a_2d_kernel_takes_its_row_length_from_the_array():
    k = tack.Kernel("""
    void grid(tack_index i, tack_index j, float *y)
    {
        y[i * tack_extent(y, 1) + j] = (float)(i * 10 + j + 1000 * tack_extent(y, 0));
    }
    """)
    for shape in [(3, 4), (5, 2)]:
        y = tack.zeros(shape, dtype="float32")
        k(y)
        h, w = shape
        want = np.add.outer(np.arange(h) * 10, np.arange(w)) + 1000 * h
        np.testing.assert_array_equal(y.to_numpy(), want.astype(np.float32))


def test_points_of_n_by_3_are_indexed_by_their_extent():
    k = tack.Kernel("""
    void norms(tack_index i, const double *p, double *out)
    {
        double s = 0;
        for (tack_index c = 0; c < tack_extent(p, 1); c++)
            s += p[i * tack_extent(p, 1) + c] * p[i * tack_extent(p, 1) + c];
        out[i] = s;
    }
    """)
    pts = np.random.default_rng(1).random((11, 3))
    out = np.zeros(11)
    k.launch(11, pts, out)
    np.testing.assert_allclose(out, (pts * pts).sum(axis=1))


def test_extents_are_passed_only_for_the_arrays_that_use_them():
    src = """
    void one(tack_index i, const float *x, float *y) { y[i] = x[i] + (float)tack_size(y); }
    """
    k = tack.Kernel(src)
    for backend in ("cpu", "cuda", "hip", "level_zero"):
        g = k.generated_source(backend)
        assert "tack_ext_y_" in g and "tack_ext_x_" not in g and "tack_check_record_" not in g, backend


def test_unchecked_kernels_without_extents_are_generated_as_before():
    k = tack.Kernel("void plain(tack_index i, const float *x, float *y) { y[i] = 2 * x[i]; }")
    for backend in ("cpu", "cuda", "hip", "level_zero"):
        g = k.generated_source(backend)
        assert "tack_ext" not in g and "tack_check_record_" not in g and "_tack_x_" not in g, backend
        # The entry takes the extent and the two arrays, nothing else.
        entry = g[g.index("tack_kernel_entry("):]
        entry = entry[:entry.index(")")]
        assert entry.count(",") == (2 if backend != "cpu" else 3), (backend, entry)


@pytest.mark.parametrize("checked", [False, True])
def test_directives_in_and_around_the_body_stay_as_the_compiler_reads_them(checked):
    """The kernel's own function keeps its body's directives (a macro
    defined there, a conditional that crosses its ends) when its entry
    calls the copy that takes the extents."""
    k = tack.Kernel("""
    #if 0
    void crossing(tack_index i, double *y) {
    #else
    void crossing(tack_index i, float *y) {
    #endif
    #if 1
        y[i] = (float)(tack_size(y) * LATER_FACTOR_OR_TWO);
    #endif
    #define LATER 5
    }
    #ifndef LATER
    #error the body's #define is gone
    #endif
    """.replace("LATER_FACTOR_OR_TWO", "2"), checked=checked)
    y = np.zeros(3, np.float32)
    k(y)
    np.testing.assert_array_equal(y, [6, 6, 6])


def test_extent_outside_the_kernels_body_does_not_compile():
    with pytest.raises(RuntimeError, match="tack_extent"):
        tack.Kernel("""
        static long width(void) { return tack_extent(y, 1); }
        void outside(tack_index i, float *y) { y[i] = (float)tack_size(y) + (float)width(); }
        """)(tack.zeros(4, dtype="float32"))


def test_extent_of_a_scalar_is_refused_when_the_kernel_is_made():
    with pytest.raises(ValueError, match=r"line 1: tack_extent\(n, \.\.\.\) in kernel 'scalar'.*'n' is not one"):
        tack.Kernel("void scalar(tack_index i, int64_t n, float *y) { y[i] = (float)tack_extent(n, 0); }")


def test_an_array_of_more_dimensions_than_extent_reads_is_refused():
    k = tack.Kernel("void deep(tack_index i, float *y) { y[i] = (float)tack_extent(y, 0); }")
    with pytest.raises(ValueError, match="tack_extent reads at most 4"):
        k.launch(1, tack.zeros((1, 1, 1, 1, 2), dtype="float32"))


# ---- checked launches ---------------------------------------------------

PAST_END = """
void shift(tack_index i, float *y)
{
    y[i + 2] = 5.0f;
}
"""


def test_a_write_past_the_end_raises_and_touches_nothing_outside():
    whole = np.zeros(16, np.float32)
    view = whole[4:12]
    k = tack.Kernel(PAST_END, checked=True)
    with pytest.raises(IndexError) as e:
        k(view)
    msg = str(e.value)
    for part in ("kernel 'shift'", "parameter 'y'", "index 8 ", "8 elements", "line 4 "):
        assert part in msg, msg
    # The indices in bounds ran; the bytes beside the view are untouched.
    np.testing.assert_array_equal(whole[6:12], np.full(6, 5, np.float32))
    np.testing.assert_array_equal(whole[:6], np.zeros(6, np.float32))
    np.testing.assert_array_equal(whole[12:], np.zeros(4, np.float32))
    # What the check prevented: unchecked, the same kernel writes beside
    # the view (memory the test owns, so the damage is known).
    whole[:] = 0
    tack.Kernel(PAST_END)(view)
    assert whole[12] == 5 and whole[13] == 5


def test_a_negative_index_is_caught():
    k = tack.Kernel("""
    void back(tack_index i, const int32_t *x, int32_t *y)
    {
        y[i] = x[i - 1] + 1;
    }
    """, checked=True)
    whole = np.arange(10, dtype=np.int32)
    y = np.zeros(6, np.int32)
    with pytest.raises(IndexError, match=r"index -1 of parameter 'x' at line 4 .* 6 elements"):
        k(whole[2:8], y)
    # The load out of bounds read 0, not whole[1].
    assert y[0] == 1
    np.testing.assert_array_equal(y[1:], whole[2:7] + 1)


def test_an_address_in_an_atomic_is_checked():
    k = tack.Kernel("""
    void hist(tack_index i, const int32_t *v, int32_t *bins)
    {
        tack_atomic_add(&bins[v[i]], 1);
    }
    """, checked=True)
    bins_all = np.zeros(8, np.int32)
    bins = bins_all[2:6]
    v = np.array([0, 1, 1, 3, 4, 2, 3, 3], np.int32)
    with pytest.raises(IndexError, match=r"kernel 'hist'.*index 4 of parameter 'bins' at line 4 .* 4 elements"):
        k.launch(8, v, bins)
    np.testing.assert_array_equal(bins, [1, 2, 1, 3])
    np.testing.assert_array_equal(bins_all[[0, 1, 6, 7]], 0)


def test_every_launch_reports_its_own_violation_from_many_threads():
    k = tack.Kernel("""
    void poke(tack_index i, const int64_t *at, int64_t *y)
    {
        y[at[i]] += 1;
    }
    """, checked=True)
    n = 4000
    errors = {}

    def worker(t):
        at = np.arange(n, dtype=np.int64) % 100
        at[n // 2] = 1000 + t  # one index out of bounds, its own
        y = np.zeros(100, np.int64)
        try:
            k.launch(n, at, y)
        except IndexError as e:
            errors[t] = str(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert sorted(errors) == list(range(6))
    for t, msg in errors.items():
        assert f"index {1000 + t} of parameter 'y'" in msg, msg


def test_a_clean_checked_launch_matches_the_unchecked_one():
    src = """
    void stencil(tack_index i, tack_index j, const float *a, float *b)
    {
        tack_index w = tack_extent(a, 1), h = tack_extent(a, 0);
        if (i == 0 || j == 0 || i == h - 1 || j == w - 1) { b[i * w + j] = a[i * w + j]; return; }
        b[i * w + j] = 0.25f * (a[(i - 1) * w + j] + a[(i + 1) * w + j] + a[i * w + j - 1] + a[i * w + j + 1]);
    }
    """
    a = np.random.default_rng(2).random((9, 13), dtype=np.float32)
    b1, b2 = np.zeros_like(a), np.zeros_like(a)
    tack.Kernel(src)(a, b1)
    tack.Kernel(src, checked=True)(a, b2)
    np.testing.assert_array_equal(b1, b2)


def test_tack_checked_in_the_environment_checks_every_kernel():
    out = run("""
    import numpy as np, tack
    k = tack.Kernel("void shift(tack_index i, float *y) { y[i + 1] = 1.0f; }")
    try:
        k(np.zeros(3, np.float32))
    except IndexError as e:
        print("caught:", e)
    """, TACK_CHECKED="1")
    assert "caught: Kernel.__call__ (tack_kernel_call_hooked): kernel 'shift'" in out, out
    assert "index 3 of parameter 'y'" in out, out


# ---- every spelling of an access ----------------------------------------

# Each writes two elements past an 8-element view (indices 8 and 9, or the
# bytes of them) from the indices 6 and 7: unchecked, into the guard.
SPELLINGS = {
    "y[e]": "y[i + 2] = 5.0f;",
    "e[y]": "(i + 2)[y] = 5.0f;",
    "e[y + k]": "i[y + 2] = 5.0f;",
    "(y)[e]": "(y)[i + 2] = 5.0f;",
    "((float *)y)[e]": "((float *)y)[i + 2] = 5.0f;",
    "((unsigned char *)y)[b]": "((unsigned char *)y)[4 * i + 8] = 5;",
    "(y + k)[e]": "(y + 2)[i] = 5.0f;",
    "*(y + e)": "*(y + i + 2) = 5.0f;",
    "*(k + y + e)": "*(2 + y + i) = 5.0f;",
    "*(float *)(y + e)": "*(float *)(y + i + 2) = 5.0f;",
    "&(y[e])": "float *p = &(y[i + 2]); *p = 5.0f;",
    "&(y)[e]": "float *p = &(y)[i + 2]; p[0] = 5.0f;",
    "atomic y + e": "tack_atomic_add(y + i + 2, 5.0f);",
}

SPELLING_CHILD = r"""
import sys, numpy as np, tack
body = sys.argv[1]
k = tack.Kernel("void spell(tack_index i, float *y)\n{\n    " + body + "\n}\n", checked=True)
whole = np.full(64 + 8 + 64, -1.0, np.float32)
view = whole[64:72]
view[:] = 0
try:
    k(view)
    print("no IndexError")
except IndexError as e:
    print("IndexError:", e)
print("guard", bool((whole[:64] == -1).all() and (whole[72:] == -1).all()))
print("view", view.tolist())
"""


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_every_spelling_of_an_access_is_checked(spelling):
    # A child: unchecked, the write lands in memory beside the view, which
    # could be anything's.
    out = run_python(SPELLING_CHILD, args=[SPELLINGS[spelling]], timeout=120)
    assert "IndexError: " in out and "parameter 'y' at line 3" in out, out
    assert "guard True" in out, out
    # The indices in bounds ran; the two below them wrote nothing.
    view = [float(v) for v in out.split("view [", 1)[1].split("]", 1)[0].split(",")]
    assert view[:2] == [0.0, 0.0] and all(v != 0 for v in view[2:]), out


# A row indexed from an address out of bounds: the address is the sink,
# and the row's writes land there. Before, the sink was 16 bytes of the
# launch's record and the row ran on into the heap.
ROWS = """
void rows(tack_index i, float *y)
{
    float *row = &y[i * 64];
    for (int c = 0; c < 64; c++)
        row[c] = 7;
}
"""


def test_rows_from_addresses_out_of_bounds_corrupt_nothing_over_thousands_of_launches():
    out = run_python("""
    import sys, numpy as np, tack
    k = tack.Kernel(sys.argv[1], checked=True)
    whole = np.full(64 + 128 + 64, -1.0, np.float32)
    view = whole[64:192]            # rows 0 and 1; rows 2 and 3 start out of bounds
    caught = 0
    for _ in range(3000):
        try:
            k.launch(4, view)
        except IndexError as e:
            caught += "of parameter 'y' at line 4" in str(e)
        big = np.zeros(1 << 12, np.float64)  # the heap goes on being used
        del big
    assert caught == 3000, caught
    assert (whole[:64] == -1).all() and (whole[192:] == -1).all()
    assert (view == 7).all()
    print("ok")
    """, args=[ROWS], timeout=300)
    assert out.strip() == "ok", out


RUN_PAST = """
void run(tack_index i, float *y)
{
    float *p = &y[i + 1];
    for (long c = 0; c < (2L << 20); c++)
        p[c] = 1;
}
"""


def test_a_run_past_the_sink_stops_the_process_instead_of_writing_elsewhere():
    # Half the 2 MiB sink either way is room for rows; a run further meets
    # an inaccessible page. What the user sees is Tack's line naming the
    # mistake, then the crash with SIGSEGV it would have had (and Python's
    # fault handler's trace where it is on), never a write beyond.
    script = textwrap.dedent("""
    import sys, numpy as np, tack
    k = tack.Kernel(sys.argv[1], checked=True)
    k.launch(1, np.zeros(1, np.float32))
    print("ran on")
    """)
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c", script, RUN_PAST], capture_output=True, text=True,
                       timeout=120)
    assert "ran on" not in r.stdout
    assert r.returncode != 0 and ("Segmentation fault" in r.stderr or "SEGV" in r.stderr), (r.returncode, r.stderr)
    assert "a checked kernel ran more than 1 MiB past an address out of bounds" in r.stderr, r.stderr


def test_a_fault_elsewhere_is_left_to_the_handler_before_tack():
    # The sink's fault handler, installed at the first checked launch, says
    # nothing of a fault outside its guard pages and leaves it to what
    # handled SIGSEGV before: here the default action, which ends the
    # process as it would have without Tack.
    script = textwrap.dedent("""
    import ctypes, sys, numpy as np, tack
    k = tack.Kernel("void one(tack_index i, float *y) { y[i] = 1; }", checked=True)
    y = np.zeros(4, np.float32)
    k.launch(4, y)
    assert (y == 1).all()
    print("launched", flush=True)
    ctypes.string_at(16)
    """)
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert "launched" in r.stdout, r.stderr
    # Under the sanitized build ASan's handler was there before Tack's: it
    # reports the fault (to its log) and exits 1.
    ended = r.returncode == -signal.SIGSEGV or (os.environ.get("TACK_SANITIZED") and r.returncode != 0)
    assert ended, (r.returncode, r.stderr)
    assert "checked kernel ran" not in r.stderr, r.stderr


# What a checked kernel refuses, when it is made: uses of a parameter that
# would make its checks wrong, or accesses Tack cannot rewrite.
REFUSED = {
    "y++": ("y++;\n    y[i] = 1;", "itself is changed"),
    "y += k": ("y += 2;\n    y[i] = 1;", "itself is changed"),
    "y = x": ("y = x;\n    y[i] = 1;", "itself is changed"),
    "&y": ("float **pp = &y;\n    (*pp)[i] = 1;", "its own address is taken"),
    "(c ? y : x)[e]": ("(i > 2 ? y : x)[i] = 1;", "through an expression"),
    "*(c ? y : x)": ("*(i > 2 ? y : x) = 1;", "through an expression"),
    "local y": ("{ float *y = x; y[i] = 1; }", "a local of that name hides it"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_uses_that_checks_cannot_cover_are_refused_with_how_to_write_them(name):
    body, why = REFUSED[name]
    src = f"void r(tack_index i, float *y, float *x)\n{{\n    {body}\n}}\n"
    with pytest.raises(ValueError) as e:
        tack.Kernel(src, checked=True)
    msg = str(e.value)
    assert "line 3: kernel 'r' is checked" in msg and why in msg and "write the access as y[index]" in msg, msg
    # Unchecked, the same source is an ordinary kernel.
    tack.Kernel(src)


def test_a_change_to_the_parameter_through_a_macro_does_not_compile():
    # The checked copy's array parameters are const: what the rewrite does
    # not see (a macro's expansion) cannot move the array either.
    src = """
    #define BUMP(p) ((p) += 100)
    void m(tack_index i, float *y) { BUMP(y); y[i] = 1; }
    """
    with pytest.raises(RuntimeError, match="read-only parameter|const-qualified"):
        tack.Kernel(src, checked=True)
    tack.Kernel(src)


def test_uses_that_stay_allowed_when_checked():
    # Handing the array on (a helper, a local), its extents, comparisons,
    # a member named like it, sizeof: ordinary kernels, still built.
    k = tack.Kernel("""
    static float first(const float *p) { return p[0]; }
    void ok(tack_index i, float *y)
    {
        struct { float *y; } s = { y };
        float *row = y + 0;
        if (y == 0 || row == 0)
            return;
        y[i] = first(y) + (float)tack_size(y) + (float)sizeof y[0] + (float)(s.y == y) + 2.0f * *y;
    }
    """, checked=True)
    y = np.zeros(4, np.float32)
    k.launch(1, y)
    assert y.tolist() == [9, 0, 0, 0], y.tolist()


def test_brackets_split_across_groups_tack_keeps_both_of_are_refused():
    # Tack keeps both groups of a conditional it cannot decide; a bracket
    # closed outside its group leaves Tack's reading unbalanced, where no
    # access could be told apart: refused rather than left unchecked.
    src = """
    void u(tack_index i, float *y)
    {
    #if defined(__AVX512F__)
        y[i + 1] = (1
    #else
        y[i + 1] = (2
    #endif
        );
    }
    """
    with pytest.raises(ValueError, match="line 5: kernel 'u' is checked, and this bracket has no partner"):
        tack.Kernel(src, checked=True)
    tack.Kernel(src)


# ---- the GPU variants compile ---------------------------------------------

GPU_KERNEL = """
void both(tack_index i, tack_index j, const int32_t *v, int32_t *bins, tack_f16 *h)
{
    tack_index w = tack_extent(v, 1);
    tack_atomic_add(&bins[v[i * w + j] % tack_size(bins)], 1);
    h[i * w + j] = tack_f16_from_float(1.0f);
}
"""

# Every spelling the checked rewrite takes, in each GPU dialect.
GPU_SPELLINGS = """
void spell(tack_index i, const float *x, float *y, int32_t *n)
{
    float *row = &y[i];
    row[0] = (i)[x] + (x)[i] + ((const float *)x)[i] + *(x + i) + *x + ((const unsigned char *)x)[i];
    *(y + i) += (y + 0)[i];
    tack_atomic_add(n + i, 1);
    tack_atomic_add(&(n[i]), 1);
}
"""


def test_checked_and_extent_kernels_compile_with_nvrtc():
    nvrtc_or_skip()
    for checked in (False, True):
        k = tack.Kernel(GPU_KERNEL, checked=checked)
        ptx = k.ptx()
        entry = ptx[ptx.index(".entry tack_kernel_entry"):]
        entry = entry[:entry.index(")")]
        # Two extents, three arrays, the extents of those the body asks
        # (of every array when checked), and the record.
        assert entry.count(".param") == 2 + 3 + (3 + 1 if checked else 2), entry
    assert ".entry tack_kernel_entry" in tack.Kernel(GPU_SPELLINGS, checked=True).ptx()


def test_checked_and_extent_kernels_compile_as_opencl_c():
    clang = shutil.which("clang")
    if not clang:
        pytest.skip("no clang here (Debian: clang)")
    for kernel, checked in ((GPU_KERNEL, False), (GPU_KERNEL, True), (GPU_SPELLINGS, True)):
        src = tack.Kernel(kernel, checked=checked).generated_source("level_zero")
        out = subprocess.run(
            [clang, "-x", "cl", "-cl-std=CL2.0", "-Xclang", "-finclude-default-header", "-target", "spir64",
             "-fsyntax-only", "-Werror=implicit-function-declaration", "-"],
            input=src, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr


def test_hip_copy_is_device_code():
    src = tack.Kernel(GPU_KERNEL, checked=True).generated_source("hip")
    # The copy the entry calls lies inside the region clang makes device code.
    assert src.index("both_tack_x_(") < src.index("#pragma clang force_cuda_host_device end")
