"""Whole programs, run end to end as users write them, each in a child
process with a timeout: many kernels alive at once, threads that each build
their own, one program that mixes every kind of kernel with NumPy's and
PyTorch's arrays, and a C simulation that links libtack, embeds Python and
loads plugins (one of which carries a copy of Tack of its own).

Each checks its results, not only that nothing raised: a kernel that ran
another kernel's code, an array copied where it should be shared, or a
message left behind by a call that succeeded fails here.
"""

import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig

import pytest

import tack
from children import run_python
from conftest import SANITIZED

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PROGRAMS = HERE / "programs"
CC = os.environ.get("CC", "cc")
TIMEOUT = 240


def child_env(tmp_path, name="cache"):
    """(variables to set, variables to unset) for a child that builds its
    kernels into a cache no kernel has been built into, with the system
    compiler whatever the environment says."""
    return {"TACK_CACHE_DIR": str(tmp_path / name)}, ("TACK_CC", "TACK_CFLAGS")


# --------------------------------------------------------------------------
# Many kernels alive at once

MANY = """
    import os, sys, numpy as np, tack
    count = int(sys.argv[1])
    # Distinct sources, so each is its own compiled object; all held at once,
    # as a program that builds its kernels up front holds them.
    kernels = [tack.Kernel(f"void k{j}(tack_index i, const float *x, float *y) {{ y[i] = x[i] * {j} + {j % 7}; }}")
               for j in range(count)]
    x = np.arange(64, dtype=np.float32)
    # Twice over, in two orders: each kernel runs its own code whenever it runs.
    for order in (range(count), reversed(range(count))):
        for j in order:
            y = np.full(64, -1, dtype=np.float32)
            kernels[j](x, y)
            want = x * j + j % 7
            assert np.array_equal(y, want), (j, y[:4], want[:4])
    cache = os.environ["TACK_CACHE_DIR"]
    print(len(kernels), "kernels ran;", sum(f.endswith(".so") for f in os.listdir(cache)), "objects")
"""


# Under the sanitizers each kernel is compiled with them too, several times
# slower: there a few dozen, which is still past every small fixed limit.
MANY_KERNELS = 32 if SANITIZED else 200


def test_two_hundred_kernels_alive_at_once_from_a_cold_then_a_warm_cache(tmp_path):
    env, unset = child_env(tmp_path)
    cold = run_python(MANY, [MANY_KERNELS], env=env, unset=unset, timeout=TIMEOUT)
    assert cold.split() == [str(MANY_KERNELS), "kernels", "ran;", str(MANY_KERNELS), "objects"], cold
    # The second process loads every object the first one built and builds
    # none: a rebuilt object would be published as a new file. (Their times
    # change: a use marks an object recently used.)
    def objects():
        return {p.name: (p.stat().st_ino, p.stat().st_size) for p in (tmp_path / "cache").iterdir()}

    built = objects()
    warm = run_python(MANY, [MANY_KERNELS], env=env, unset=unset, timeout=TIMEOUT)
    assert warm == cold
    assert objects() == built


# --------------------------------------------------------------------------
# Threads, each building and launching its own kernels

THREADS = """
    import sys, threading, numpy as np, tack
    THREADS, SHARED = 16, 3
    # Every thread builds one kernel of its own, and one of SHARED sources
    # that other threads build at the same time.
    own = "void own{t}(tack_index i, int32_t *y) {{ y[i] = {t} * 1000 + (int32_t)i; }}"
    shared = "void shared{s}(tack_index i, const int32_t *y, int64_t *z) {{ z[i] = (int64_t)y[i] * {m}; }}"
    start = threading.Barrier(THREADS)
    done = threading.Barrier(THREADS)
    results, errors = {}, []

    def work(t):
        try:
            start.wait()
            k_own = tack.Kernel(own.format(t=t))
            s = t % SHARED
            k_shared = tack.Kernel(shared.format(s=s, m=s + 2))
            for n in (1, 17, 5000):
                y = np.zeros(n, np.int32)
                z = tack.zeros(n, tack.i64)
                k_own(y)
                k_shared(y, z)
                want = np.arange(n, dtype=np.int64) + t * 1000
                assert np.array_equal(y, want.astype(np.int32)), (t, n, y[:4])
                assert np.array_equal(z.to_numpy(), want * (s + 2)), (t, n, z.to_numpy()[:4])
            # Every thread's kernels are alive while the others launch theirs.
            done.wait()
            results[t] = (k_own.name, k_shared.name)
        except BaseException as exc:
            errors.append(f"thread {t}: {type(exc).__name__}: {exc}")
            start.abort()
            done.abort()

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, "\\n".join(errors)
    assert sorted(results) == list(range(THREADS)), results
    assert all(results[t] == (f"own{t}", f"shared{t % SHARED}") for t in results), results
    print("ok")
"""


def test_sixteen_threads_each_build_and_launch_their_own_kernels(tmp_path):
    env, unset = child_env(tmp_path)
    assert run_python(THREADS, env=env, unset=unset, timeout=TIMEOUT).strip() == "ok"


# --------------------------------------------------------------------------
# One program with every kind of kernel and foreign arrays

MIXED = """
    import gc, numpy as np, tack, tack._tack
    try:
        import torch
    except ImportError:
        torch = None

    def live():
        gc.collect()
        return dict(tack._tack.live_counts())

    before = live()
    rng = np.random.default_rng(31)
    n = 10_000
    v = rng.integers(0, 64, n).astype(np.int32)
    x = rng.standard_normal(n)                                   # float64

    hist = tack.Kernel("void hist(tack_index i, const int32_t *v, int32_t *bins) { tack_atomic_add(&bins[v[i]], 1); }")
    stats = tack.Kernel('''
    void stats(tack_index i, const double *x, double *sum, double *lo, double *hi)
    {
        tack_reduce_add(&sum[0], x[i]);
        tack_reduce_min(&lo[0], x[i]);
        tack_reduce_max(&hi[0], x[i]);
    }''')
    scale = tack.Kernel("void scale(tack_index i, const float *x, float *y) { y[i] = SCALE * x[i] + OFFSET; }",
                        defines={"SCALE": 3, "OFFSET": "0.5f"})
    shift = tack.Kernel("void shift(tack_index i, const float *x, float *y) { y[i + 1] = x[i]; }", checked=True)
    axpy = tack.Kernel("void axpy(tack_index i, float a, const float *x, float *y) { y[i] += a * x[i]; }",
                       checked=True)

    def check_all(tag):
        # Atomics into a NumPy array passed directly.
        bins = np.zeros(64, np.int32)
        hist.launch(n, v, bins)
        assert np.array_equal(bins, np.bincount(v, minlength=64)), (tag, "atomics")
        # Reductions into a Tack array.
        out = tack.zeros(3, tack.f64)
        o = np.from_dlpack(out)
        assert o.ctypes.data == out.ptr, (tag, "the export is a copy")
        o[:] = (0.0, np.inf, -np.inf)
        stats.launch(n, x, out[0:1], out[1:2], out[2:3])
        got = out.to_numpy()
        assert np.isclose(got[0], x.sum(), rtol=1e-12, atol=1e-9), (tag, got[0], x.sum())
        assert got[1] == x.min() and got[2] == x.max(), (tag, got, x.min(), x.max())
        # Defines, on a NumPy float32 array (of integers, which the
        # compiler's fused multiply-add gives exactly too).
        xf = np.round(x * 100).astype(np.float32)
        y = np.zeros(n, np.float32)
        scale(xf, y)
        assert np.array_equal(y, np.float32(3) * xf + np.float32(0.5)), (tag, "defines")

    check_all("first")

    # Imports: each shares the producer's memory.
    xs = np.arange(1000, dtype=np.float32)
    a = tack.from_dlpack(xs)
    assert a.ptr == xs.ctypes.data
    ys = np.ones(1000, np.float32)
    axpy(2.0, a, ys)
    assert np.array_equal(ys, 1 + 2 * xs)

    # Exports: NumPy and PyTorch see a Tack array's memory, and what they
    # write is what a kernel then reads.
    t = tack.zeros(1000, tack.f32)
    tn = np.from_dlpack(t)
    assert tn.ctypes.data == t.ptr
    tn[:] = xs
    if torch is not None:
        tt = torch.from_dlpack(t)
        assert tt.data_ptr() == t.ptr
        tt += 1
        # PyTorch CPU tensors passed directly, and imported.
        px = torch.arange(1000, dtype=torch.float32)
        py = torch.zeros(1000, dtype=torch.float32)
        axpy(1.0, px, py)
        assert torch.equal(py, px)
        pa = tack.from_dlpack(px)
        assert pa.ptr == px.data_ptr()
        scale(pa, py)
        assert torch.equal(py, 3 * px + 0.5)
        del tt, pa
    else:
        tn += 1
    assert np.array_equal(tn, xs + 1)

    # A checked launch out of bounds in the middle: IndexError, nothing
    # written beside the view, and everything after it as before.
    whole = np.zeros(16, np.float32)
    view = whole[4:12]
    src = np.arange(8, dtype=np.float32) + 1
    try:
        shift(src, view)
    except IndexError as exc:
        assert "kernel 'shift'" in str(exc) and "parameter 'y'" in str(exc), exc
    else:
        raise AssertionError("the checked launch out of bounds did not raise")
    assert np.array_equal(whole[:5], np.zeros(5, np.float32)) and np.array_equal(whole[12:], np.zeros(4, np.float32))
    assert np.array_equal(whole[5:12], src[:7])
    check_all("after the IndexError")
    axpy(1.0, t, ys)
    assert np.array_equal(ys, 1 + 2 * xs + xs + 1)

    del a, t, tn
    after = live()
    assert after == before, (before, after)
    print("ok", "torch" if torch is not None else "numpy only")
"""


def test_a_program_mixing_atomics_reductions_checks_defines_and_foreign_arrays(tmp_path):
    env, unset = child_env(tmp_path)
    out = run_python(MIXED, env=env, unset=unset, timeout=TIMEOUT).split()
    try:
        import torch  # noqa: F401
        want = ["ok", "torch"]
    except ImportError:
        want = ["ok", "numpy", "only"]
    assert out == want, out


# --------------------------------------------------------------------------
# A C simulation: links libtack, embeds Python, loads plugins


def library_file():
    """The shared libtack the package carries, which the extension links."""
    names = [n for n in os.listdir(tack.get_library_dir()) if n.startswith("libtack.so.")]
    assert len(names) == 1, names
    return pathlib.Path(tack.get_library_dir()) / names[0]


def compile_c(source, output, *flags):
    cmd = [CC, "-std=c11", "-D_GNU_SOURCE", "-O1", "-Wall", "-Werror", "-o", str(output), str(source), *flags]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT)
    except OSError as exc:
        pytest.skip(f"no C compiler ({CC}): {exc}")
    assert run.returncode == 0, f"{' '.join(cmd)}\n{run.stderr}"
    return output


def host_env(tmp_path, cache):
    """The environment in which the embedded interpreter finds this venv's
    packages (tack, NumPy) as the running one does, with a cache no kernel
    has been built into."""
    env = {k: v for k, v in os.environ.items() if k not in ("TACK_CC", "TACK_CFLAGS")}
    env["PYTHONHOME"] = sys.base_prefix
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(tack.__file__))] +
                                        [p for p in sys.path if p and os.path.isdir(p)])
    env["TACK_CACHE_DIR"] = str(tmp_path / cache)
    # The program ends without finalizing Python, whose objects a leak
    # checker (a sanitized run preloads one) would report.
    env["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS"), "detect_leaks=0"]))
    return env


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """The simulation, built against the package's libtack and this Python."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        pytest.skip("this Python has no shared libpython to embed")
    libdir = sysconfig.get_config_var("LIBDIR")
    out = tmp_path_factory.mktemp("host")
    lib = library_file()
    return compile_c(PROGRAMS / "host.c", out / "host", f"-I{sysconfig.get_paths()['include']}",
                     f"-I{tack.get_include()}", str(lib), f"-Wl,-rpath,{lib.parent}", f"-L{libdir}",
                     f"-lpython{sysconfig.get_config_var('LDVERSION')}", f"-Wl,-rpath,{libdir}", "-ldl")


def run_host(host, plugin, tmp_path, *args):
    run = subprocess.run([str(host), str(plugin), *args], capture_output=True, text=True, timeout=TIMEOUT,
                         env=host_env(tmp_path, "cache"))
    return run.returncode, run.stdout + run.stderr


@pytest.fixture(scope="module")
def simulation(host, tmp_path_factory):
    """(exit status, output) of the whole program with a plugin linked
    against the same shared libtack, run once for the tests below."""
    out = tmp_path_factory.mktemp("simulation")
    lib = library_file()
    plugin = compile_c(PROGRAMS / "plugin.c", out / "plugin.so", "-shared", "-fPIC", f"-I{tack.get_include()}",
                       str(lib), f"-Wl,-rpath,{lib.parent}")
    return run_host(host, plugin, out)


def test_c_program_compiles_a_kernel_and_shares_arrays_with_python_without_a_copy(simulation):
    rc, out = simulation
    assert rc == 0, out
    lines = out.splitlines()
    assert "C kernel: 1 4096" in lines, out
    # Python's kernel ran on the C memory (4 doubled) and NumPy's view saw it.
    assert "Python's kernel: 8 (Python read 8)" in lines, out
    assert "round trip same memory: 1" in lines, out
    assert "Python's array same memory: 1" in lines and "Python's array: 7 7" in lines, out


def test_c_program_plugin_uses_the_hosts_tack(simulation):
    rc, out = simulation
    assert rc == 0, out
    plugin = [line.split(";")[:2] for line in out.splitlines() if line.startswith("plugin: ")]
    # The host holds its field and the two arrays Python handed back (the
    # tack.Array Python made over the field is the field); the plugin counts
    # the same, then one more of its own.
    assert plugin == [["plugin: 0 same device: 1", " arrays: 3, the host's 3, with one more 4"]], out
    assert "plugin's kernel: 108" in out.splitlines(), out


def test_c_program_successful_calls_leave_no_message(simulation):
    rc, out = simulation
    assert rc == 0, out
    # From the first compile into a fresh cache on, every call succeeded.
    assert "message left" not in out, out
    assert "messages left: 0" in out.splitlines(), out
    plugin = [line for line in out.splitlines() if line.startswith("plugin: ")]
    assert len(plugin) == 1 and plugin[0].endswith("; messages left: 0"), out


def meson_and_ninja():
    """Meson and Ninja, from PATH or beside this Python (the venv's)."""
    found = []
    for tool in ("meson", "ninja"):
        path = shutil.which(tool) or shutil.which(tool, path=os.path.dirname(sys.executable))
        if not path:
            pytest.skip(f"no {tool} to build libtack.a with (it comes with requirements-dev.txt)")
        found.append(path)
    return found


@pytest.fixture(scope="module")
def static_libtack(tmp_path_factory):
    """libtack.a of this source tree, as `make install-c` installs it for C
    users: Meson's C-only build into a folder of the test's own (the
    package carries the shared library only). A few seconds."""
    meson, ninja = meson_and_ninja()
    build = tmp_path_factory.mktemp("static") / "build"
    # Meson runs in its own environment: this interpreter's module path and
    # a sanitized run's preloaded runtime are not for it.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "LD_PRELOAD")}
    env["PATH"] = os.pathsep.join([os.path.dirname(ninja), env.get("PATH", "")])
    for cmd in ([meson, "setup", str(build), str(ROOT), "-Dpython=false", "-Dtests=false"],
                [ninja, "-C", str(build), "libtack.a"]):
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=TIMEOUT, env=env)
        assert run.returncode == 0, f"{' '.join(cmd)}\n{run.stdout}\n{run.stderr}"
    return build / "libtack.a"


def test_a_plugin_with_a_static_copy_of_tack_is_refused_at_its_first_call(host, static_libtack, tmp_path):
    """A plugin that bundles libtack.a, loaded into a host whose Tack is the
    shared libtack, holds a second copy: its own registry, pool and counts,
    which the host's handles must never reach. Its first call is refused,
    naming both copies' files; the host's Tack goes on."""
    # A plugin keeps the static library's symbols to itself, as plugins
    # that bundle one do: its calls then run its own copy.
    plugin = compile_c(PROGRAMS / "plugin.c", tmp_path / "bundled.so", "-shared", "-fPIC", f"-I{tack.get_include()}",
                       "-Wl,--exclude-libs,ALL", str(static_libtack), "-pthread", "-ldl", "-lm")
    rc, out = run_host(host, plugin, tmp_path, "static")
    assert rc == 0, out
    lines = out.splitlines()
    assert "host after the static plugin: 8" in lines, out
    said = next((line for line in lines if line.startswith("static plugin said: ")), "")
    assert "static plugin: 1" in lines, f"the plugin's own copy of Tack ran beside the host's:\n{out}"
    for copy in (plugin, library_file()):
        assert str(copy) in said or os.path.realpath(copy) in said, f"{copy} is not named:\n{out}"
