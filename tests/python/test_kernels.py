"""tack.Kernel on the CPU backend: results against NumPy, every binding
check, compile errors, the compile cache, and CUDA source through NVRTC."""

import os
import stat
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tack
from conftest import nvrtc_or_skip

C_TYPES = {
    "int8": "int8_t",
    "uint8": "uint8_t",
    "int16": "int16_t",
    "uint16": "uint16_t",
    "int32": "int32_t",
    "uint32": "uint32_t",
    "int64": "int64_t",
    "uint64": "uint64_t",
    "float32": "float",
    "float64": "double",
}

SAXPY = "void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }"


def assert_multiply_add(got, product, addend):
    """got is product + addend, computed in got's precision with or without
    contraction into one fused multiply-add: a fused one rounds once, so the
    two may differ by the product's rounding, within 2 epsilons of the
    terms' magnitude (the result alone can be far smaller where they
    cancel)."""
    eps = np.finfo(got.dtype).eps
    want = np.asarray(product, np.float64) + np.asarray(addend, np.float64)
    bound = 2 * eps * (np.abs(product) + np.abs(addend))
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound)


pytestmark = pytest.mark.usefixtures("private_kernel_cache")


@pytest.fixture(scope="module")
def saxpy():
    return tack.Kernel(SAXPY)


def counting_compiler(directory, barrier=0):
    """A TACK_CC that logs each call to calls.log, then runs cc. With a
    barrier of k, each call first waits (up to 10 s) until k calls have
    arrived, so that k compilations certainly run at once."""
    log = directory / "calls.log"
    script = directory / "cc-counting"
    wait = ""
    if barrier:
        arrived = directory / "arrived"
        arrived.mkdir()
        wait = (
            f'touch "{arrived}/$$"\ni=0\n'
            f'while [ "$(ls "{arrived}" | wc -l)" -lt {barrier} ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done\n'
        )
    script.write_text(f'#!/bin/sh\necho "$@" >> "{log}"\n{wait}exec cc "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script, log


def calls(log):
    return len(log.read_text().splitlines()) if log.exists() else 0


# --------------------------------------------------------------------------
# results


def test_saxpy_launch_and_call(saxpy):
    rng = np.random.default_rng(1)
    xn = rng.standard_normal(1000).astype(np.float32)
    yn = rng.standard_normal(1000).astype(np.float32)
    x, y = tack.array(xn), tack.array(yn)
    saxpy(np.float32(2.5), x, y)
    first = y.to_numpy()
    assert_multiply_add(first, 2.5 * xn.astype(np.float64), yn)
    saxpy.launch(10, -1.0, x, y)
    got = y.to_numpy()
    assert_multiply_add(got[:10], -xn[:10].astype(np.float64), first[:10])
    assert np.array_equal(got[10:], first[10:])


# The integer and real types' arithmetic; the newer dtypes' kernels are
# tested in test_dtypes.py.
@pytest.mark.parametrize("name", list(C_TYPES))
def test_every_dtype_against_numpy(name):
    t = C_TYPES[name]
    k = tack.Kernel(f"void k(tack_index i, {t} s, const {t} *x, {t} *y) {{ y[i] = ({t})(x[i] * s + ({t})(i % 5)); }}")
    n = 1237
    xn = (np.arange(n) % 100).astype(name)
    x, y = tack.array(xn), tack.zeros(n, name)
    k(3, x, y)
    wide = np.float64 if name.startswith("float") else (np.uint64 if name.startswith("u") else np.int64)
    got = y.to_numpy()
    assert got.dtype == np.dtype(name)
    if name.startswith("float"):
        assert_multiply_add(got, xn.astype(np.float64) * 3, np.arange(n) % 5)
    else:
        expected = (xn.astype(wide) * wide(3) + (np.arange(n) % 5).astype(wide)).astype(name)
        np.testing.assert_array_equal(got, expected)


def test_large_launch_matches_numpy():
    k = tack.Kernel("void k(tack_index i, const double *x, double *y) { y[i] = x[i] * x[i] + (double)i; }")
    n = (1 << 21) + 17
    xn = np.random.default_rng(2).standard_normal(n)
    x, y = tack.array(xn), tack.zeros(n, tack.f64)
    for _ in range(3):
        k(x, y)
    assert_multiply_add(y.to_numpy(), xn * xn, np.arange(n, dtype=np.float64))


def test_helpers_macros_and_name():
    src = textwrap.dedent(
        """
        #include <math.h>
        #define SCALE 2.0f
        typedef float real;
        static real sq(real v) { return v * v; }
        void first(tack_index i, real *y) { y[i] = sq((real)i) * SCALE; }
        void second(tack_index i, const real *x, real *y) { y[i] = sqrtf(x[i]); }
        """
    )
    last = tack.Kernel(src)
    first = tack.Kernel(src, name="first")
    assert (last.name, first.name) == ("second", "first")
    y = tack.zeros(6)
    first(y)
    np.testing.assert_array_equal(y.to_numpy(), np.arange(6, dtype=np.float32) ** 2 * 2)
    z = tack.zeros(6)
    last(y, z)
    np.testing.assert_allclose(z.to_numpy(), np.sqrt(np.arange(6, dtype=np.float32) ** 2 * 2), rtol=1e-6)


def test_aliasing_keeps_program_order():
    k = tack.Kernel("void k(tack_index i, float *a, const float *b) { a[i] = a[i] + 1.0f; a[i] = a[i] * b[i]; }")
    base = (np.arange(4096) % 50).astype(np.float32)
    x = tack.array(base)
    k(x, x)  # the same array twice
    np.testing.assert_array_equal(x.to_numpy(), (base + 1) * (base + 1))
    x.from_numpy(np.full(4096, 3, np.float32))
    k.launch(4096, x.reshape(64, 64), x.reshape(4096))  # two views of one buffer
    np.testing.assert_array_equal(x.to_numpy(), np.full(4096, 16, np.float32))


def test_in_place_on_imported_numpy_memory():
    a = np.arange(10, dtype=np.float64)
    view = tack.from_dlpack(a)
    tack.Kernel("void neg(tack_index i, double *v) { v[i] = -v[i]; }")(view)
    np.testing.assert_array_equal(a, -np.arange(10, dtype=np.float64))


def test_on_imported_torch_memory():
    torch = pytest.importorskip("torch")
    t = torch.arange(8, dtype=torch.int32)
    k = tack.Kernel("void k(tack_index i, int32_t *v, int32_t add) { v[i] += add; }")
    k(tack.from_dlpack(t), 5)
    assert t.tolist() == [i + 5 for i in range(8)]


def test_launches_from_threads():
    k = tack.Kernel("void k(tack_index i, int64_t *y) { y[i] += i; }")
    results = []

    def work():
        y = tack.zeros(1 << 16, tack.i64)
        for _ in range(20):
            k(y)
        results.append(np.array_equal(y.to_numpy(), 20 * np.arange(1 << 16)))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 4


@pytest.mark.parametrize("env", [{"TACK_NUM_THREADS": "1"}, {"TACK_SERIAL_BELOW": "0"}, {"TACK_NUM_THREADS": "3"}],
                         ids=["serial", "always-parallel", "3-threads"])
def test_every_index_runs_once(env):
    script = textwrap.dedent(
        """
        import numpy as np, tack
        k = tack.Kernel("void k(tack_index i, uint32_t *hits, int64_t *idx) { hits[i] += 1; idx[i] = i; }")
        for n in (1, 2, 3, 7, 1000, 100003, 1 << 20):
            hits, idx = tack.zeros(n, tack.u32), tack.zeros(n, tack.i64)
            for _ in range(3):
                k(hits, idx)
            assert (hits.to_numpy() == 3).all(), n
            assert (idx.to_numpy() == np.arange(n)).all(), n
        print("ok", tack._tack.Kernel is tack.Kernel)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ, **env))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ok", "True"]


def test_introspection(saxpy):
    assert saxpy.name == "saxpy"
    assert saxpy.source == SAXPY
    assert saxpy.signature == "saxpy(tack_index i, float a, const float *x, float *y)"
    assert repr(saxpy) == "<tack.Kernel saxpy(tack_index i, float a, const float *x, float *y)>"
    assert saxpy.params == (
        ("a", tack.f32, "scalar", False),
        ("x", tack.f32, "array", False),
        ("y", tack.f32, "array", True),
    )
    assert "tack_kernel_entry" in saxpy.generated_source()
    assert "__global__" in saxpy.generated_source("cuda")
    # What the CPU runs is host code (CUDA's is a CUBIN or PTX: test_cuda_code.py).
    assert saxpy.target() == saxpy.target("cpu") == "host"


# --------------------------------------------------------------------------
# every check, before anything runs


def test_argument_count(saxpy):
    x, y = tack.zeros(4), tack.zeros(4)
    with pytest.raises(TypeError, match=r"takes 3 arguments \(float a, const float \*x, float \*y\), 2 given"):
        saxpy(2.0, x)
    with pytest.raises(TypeError, match="4 given"):
        saxpy.launch(4, 2.0, x, y, y)
    with pytest.raises(TypeError, match="n, the number of indices"):
        saxpy.launch()
    with pytest.raises(TypeError):
        saxpy(2.0, x, y=y)


def test_argument_kinds_name_the_parameter(saxpy):
    x, y = tack.zeros(4), tack.zeros(4)
    with pytest.raises(TypeError, match="parameter 'x'.*array"):
        saxpy(2.0, 1.0, y)
    with pytest.raises(TypeError, match="parameter 'a'.*scalar.*got an array"):
        saxpy(x, x, y)
    with pytest.raises(TypeError, match="parameter 'a'"):
        saxpy("two", x, y)
    with pytest.raises(TypeError, match="parameter 'y'.*list"):
        saxpy(2.0, x, [0.0] * 4)


def test_dtype_mismatch(saxpy):
    with pytest.raises(TypeError, match="parameter 'x'.*float32.*int32"):
        saxpy(2.0, tack.zeros(4, tack.i32), tack.zeros(4))
    with pytest.raises(TypeError, match="parameter 'y'.*float64"):
        saxpy(2.0, tack.zeros(4), tack.zeros(4, tack.f64))


def test_scalar_range():
    k = tack.Kernel("void k(tack_index i, uint8_t v, uint8_t *y) { y[i] = v; }")
    y = tack.zeros(2, tack.u8)
    with pytest.raises(ValueError, match="parameter 'v'"):
        k(256, y)
    with pytest.raises(ValueError, match="parameter 'v'"):
        k(-1, y)
    k(np.uint8(7), y)
    assert y.to_numpy().tolist() == [7, 7]


@pytest.mark.parametrize("dtype", ["int8", "uint16", "int32", "int64", "uint64"])
@pytest.mark.parametrize("value", [3.7, 3.0, float("nan"), np.float64(2.0), np.float32(2.0)],
                         ids=["3.7", "3.0", "nan", "np.float64", "np.float32"])
def test_a_float_for_an_integer_parameter_is_refused_not_truncated(dtype, value):
    k = tack.Kernel(f"void k(tack_index i, {C_TYPES[dtype]} v, {C_TYPES[dtype]} *y) {{ y[i] = v; }}")
    y = tack.array(np.full(2, 9, dtype))
    with pytest.raises(TypeError, match="parameter 'v'.*expected an integer"):
        k(value, y)
    assert y.to_numpy().tolist() == [9, 9], "a refused launch ran"
    k(True, y)  # bool and NumPy integers are integers
    assert y.to_numpy().tolist() == [1, 1]
    k(np.int8(5), y)
    assert y.to_numpy().tolist() == [5, 5]


def test_an_integer_for_a_float_parameter_is_exact(saxpy):
    x, y = tack.array(np.ones(2, np.float32)), tack.zeros(2)
    saxpy(3, x, y)
    assert y.to_numpy().tolist() == [3.0, 3.0]


def test_read_only_import_from_numpy(saxpy):
    frozen = np.ones(4, np.float32)
    frozen.flags.writeable = False
    ro = tack.from_dlpack(frozen)
    assert not ro.writable
    y = tack.zeros(4)
    with pytest.raises(ValueError, match="parameter 'y'.*read-only"):
        saxpy(2.0, y, ro)
    np.testing.assert_array_equal(frozen, np.ones(4, np.float32))
    saxpy(2.0, ro, y)  # read through const: fine
    np.testing.assert_array_equal(y.to_numpy(), np.full(4, 2, np.float32))


def test_read_only_raw_pointer(saxpy):
    backing = np.zeros(4, np.float32)
    ro = tack.array_from_ptr(backing.ctypes.data, tack.f32, (4,))
    with pytest.raises(ValueError, match="parameter 'y'"):
        saxpy.launch(4, 1.0, tack.zeros(4), ro)


def test_n(saxpy):
    x, y = tack.array(np.ones(4, np.float32)), tack.zeros(4)
    with pytest.raises(ValueError, match="n must be >= 0"):
        saxpy.launch(-1, 1.0, x, y)
    with pytest.raises(TypeError, match="n must be an integer"):
        saxpy.launch(2.0, 1.0, x, y)
    saxpy.launch(0, 1.0, x, y)
    assert y.to_numpy().tolist() == [0, 0, 0, 0]
    saxpy.launch(np.int64(2), 1.0, x, y)
    assert y.to_numpy().tolist() == [1, 1, 0, 0]


def test_call_needs_an_array_to_take_the_domain_from():
    k = tack.Kernel("void k(tack_index i, float v) { (void)i; (void)v; }")
    with pytest.raises(ValueError, match="no array parameter"):
        k(1.0)


def test_signature_errors():
    with pytest.raises(ValueError, match="no function definition"):
        tack.Kernel("int x;")
    with pytest.raises(ValueError, match="no function named 'nope'"):
        tack.Kernel(SAXPY, name="nope")
    with pytest.raises(ValueError, match="returns void"):
        tack.Kernel("float k(tack_index i, const float *x) { return x[i]; }")
    with pytest.raises(ValueError, match="tack_index"):
        tack.Kernel("void k(float *y) { y[0] = 1; }")
    with pytest.raises(TypeError, match="line 2: parameter 'y' of kernel 'k' has type 'int \\*'"):
        tack.Kernel("void k(tack_index i,\n int *y) { y[i] = 1; }")


# --------------------------------------------------------------------------
# compilation


def test_compile_error_has_log_and_user_lines():
    src = "// one\n// two\nvoid k(tack_index i, float *y) {\n    y[i] = not_declared;\n}\n"
    with pytest.raises(RuntimeError) as info:
        tack.Kernel(src)
    message = str(info.value)
    assert "kernel 'k' failed to compile" in message
    assert "kernel:4:" in message
    assert "not_declared" in message


def test_long_compile_log_is_not_cut():
    body = "\n".join(f"    y[i] = undeclared_{n};" for n in range(40))
    with pytest.raises(RuntimeError) as info:
        tack.Kernel("void k(tack_index i, float *y) {\n" + body + "\n}\n")
    assert "undeclared_39" in str(info.value)
    assert len(str(info.value)) > 1024


def test_no_compiler(monkeypatch):
    monkeypatch.setenv("TACK_CC", "/nonexistent/bin/cc")
    with pytest.raises(RuntimeError, match="TACK_CC"):
        tack.Kernel("void nocc(tack_index i, float *y) { y[i] = 1; }")


def test_cache_hits_do_not_run_the_compiler(tmp_path, monkeypatch):
    cc, log = counting_compiler(tmp_path)
    monkeypatch.setenv("TACK_CC", str(cc))
    monkeypatch.setenv("TACK_CACHE_DIR", str(tmp_path / "cache"))
    src = "void cached(tack_index i, int32_t *y) { y[i] = (int32_t)i * 7; }"
    first = tack.Kernel(src)
    assert calls(log) == 1
    second = tack.Kernel(src)
    assert calls(log) == 1
    y = tack.zeros(5, tack.i32)
    second(y)
    assert y.to_numpy().tolist() == [0, 7, 14, 21, 28]
    del first
    tack.Kernel(src + "\n")  # another source: compiled
    assert calls(log) == 2
    monkeypatch.setenv("TACK_CFLAGS", "-DSOMETHING=1")  # other flags: compiled
    tack.Kernel(src)
    assert calls(log) == 3
    monkeypatch.delenv("TACK_CFLAGS")
    # Another process finds the cached object on disk.
    script = f"import tack; k = tack.Kernel({src!r}); y = tack.zeros(3, tack.i32); k(y); print(y.to_numpy().tolist())"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=dict(os.environ))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[0, 7, 14]"
    assert calls(log) == 3


def test_two_processes_compile_the_same_kernel_at_once(tmp_path):
    cc, log = counting_compiler(tmp_path, barrier=2)
    env = dict(os.environ, TACK_CC=str(cc), TACK_CACHE_DIR=str(tmp_path / "cache"))
    script = (
        "import tack\n"
        "k = tack.Kernel('void race(tack_index i, int64_t *y) { y[i] = i * i; }')\n"
        "y = tack.zeros(4, tack.i64); k(y); print(y.to_numpy().tolist())\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert out.strip() == "[0, 1, 4, 9]"
    assert calls(log) == 2  # both compiled, at the same time
    objects = [f for f in os.listdir(tmp_path / "cache") if f.endswith(".so")]
    assert len(objects) == 1, objects
    leftovers = [f for f in os.listdir(tmp_path / "cache") if f.startswith("tmp-")]
    assert not leftovers


# --------------------------------------------------------------------------
# CUDA source through NVRTC (no GPU needed)


@pytest.mark.parametrize("name", list(C_TYPES))
def test_nvrtc_compiles_every_dtype(name):
    nvrtc_or_skip()
    t = C_TYPES[name]
    k = tack.Kernel(
        f"static {t} twice({t} v) {{ return v + v; }}\n"
        f"void k(tack_index i, {t} s, const {t} *restrict x, {t} *y) {{ y[i] = ({t})(twice(x[i]) * s); }}"
    )
    ptx = k.ptx()
    assert ".entry tack_kernel_entry" in ptx
    assert ptx.count(".param ") == 4  # n, then the three parameters


def test_nvrtc_errors_map_to_user_lines():
    nvrtc_or_skip()
    k = tack.Kernel("void k(tack_index i, float *y) {\n  y[i] = 1.0f;\n}\n")
    assert ".target sm_90" in k.ptx("compute_90")
    # Valid C (it compiled for the CPU), not valid C++: NVRTC's error
    # names the user's line.
    cxx_bad = tack.Kernel("void k(tack_index i, float *y) {\n  int class = 1;\n  y[i] = (float)class;\n}\n")
    with pytest.raises(RuntimeError, match=r"failed to compile for CUDA[\s\S]*kernel\(2\)"):
        cxx_bad.ptx()
