"""A kernel's own build options: Kernel(src, defines=, include_dirs=,
options=) reach the backend's compiler, each entry one word, and key the
code kept for it; TACK_CFLAGS stays the process-wide default. The CPU's C
compiler runs the cases end to end; NVRTC (no GPU needed) shows the
definitions and include directories reach it, through ptx()."""

import os
import re
import shutil
import subprocess

import numpy as np
import pytest

import tack
from conftest import nvrtc_or_skip

pytestmark = pytest.mark.usefixtures("private_kernel_cache")

SCALE = "void scale(tack_index i, float *y) { y[i] = (float)N * 1.5f; }"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A code store of the case's own, to count what it keeps."""
    d = tmp_path / "store"
    monkeypatch.setenv("TACK_CACHE_DIR", str(d))
    return d


def kept(cache, backend="cpu", ext="so"):
    return sorted(p.name for p in cache.glob(f"{backend}-*.{ext}")) if cache.exists() else []


def run(k, n=5, dtype=tack.f32):
    y = tack.zeros(n, dtype)
    k(y)
    return y.to_numpy().tolist()


def test_defines_change_the_result_and_the_kept_code(cache):
    four = tack.Kernel(SCALE, defines={"N": 4})
    eight = tack.Kernel(SCALE, defines=["N=8"])
    assert run(four) == [6.0] * 5
    assert run(eight) == [12.0] * 5
    # One source, two objects: the definitions are part of the key.
    assert len(kept(cache)) == 2
    # The same definitions again (as a dict or a list): the kept object.
    assert run(tack.Kernel(SCALE, defines={"N": 8})) == [12.0] * 5
    assert run(tack.Kernel(SCALE, defines=["N=4"])) == [6.0] * 5
    assert len(kept(cache)) == 2


def test_a_define_without_a_value_and_bool_values():
    src = """
    void flags(tack_index i, int32_t *y) {
    #ifdef FAST
        y[i] = 10 + ON;
    #else
        y[i] = 20 + ON;
    #endif
    }
    """
    assert run(tack.Kernel(src, defines={"FAST": None, "ON": True}), 2, tack.i32) == [11, 11]
    assert run(tack.Kernel(src, defines={"ON": False}), 2, tack.i32) == [20, 20]


def test_a_define_value_with_blanks_stays_one_word():
    # Split at the blank, "-DV=1" "+" "2" would be a compile error (a file "+").
    k = tack.Kernel("void v(tack_index i, float *y) { y[i] = V; }", defines={"V": "1 + 2"})
    assert run(k, 3) == [3.0] * 3
    k = tack.Kernel("void w(tack_index i, float *y) { y[i] = W; }", options=["-DW=2 * 3"])
    assert run(k, 3) == [6.0] * 3


def test_include_dirs_find_a_header_next_to_nothing(tmp_path, cache):
    inc = tmp_path / "headers"
    inc.mkdir()
    (inc / "phys.h").write_text("#define PHYS_G 9.5f\n")
    src = '#include "phys.h"\nvoid g(tack_index i, float *y) { y[i] = PHYS_G; }'
    assert run(tack.Kernel(src, include_dirs=[inc]), 2) == [9.5, 9.5]
    assert run(tack.Kernel(src, include_dirs=[str(inc)]), 2) == [9.5, 9.5]
    # Without it, the header is not found: the compiler's own words.
    with pytest.raises(RuntimeError, match="phys.h"):
        tack.Kernel(src)


def test_an_edited_header_compiles_again(tmp_path, cache):
    inc = tmp_path / "inc"
    (inc / "sub").mkdir(parents=True)
    header = inc / "sub" / "phys.h"
    src = '#include "sub/phys.h"\nvoid g(tack_index i, float *y) { y[i] = PHYS_G; }'
    header.write_text("#define PHYS_G 1.0f\n")
    assert run(tack.Kernel(src, include_dirs=[inc]), 2) == [1.0, 1.0]
    assert run(tack.Kernel(src, include_dirs=[inc]), 2) == [1.0, 1.0]
    assert len(kept(cache)) == 1
    # Same size, and a time apart however coarse the file system's clock.
    header.write_text("#define PHYS_G 2.0f\n")
    st = header.stat()
    os.utime(header, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    assert run(tack.Kernel(src, include_dirs=[inc]), 2) == [2.0, 2.0]
    assert len(kept(cache)) == 2


def test_a_relative_include_dir_is_the_callers(tmp_path, monkeypatch, cache):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "phys.h").write_text("#define PHYS_G 2.5f\n")
    other = tmp_path / "elsewhere"
    (other / "inc").mkdir(parents=True)
    (other / "inc" / "phys.h").write_text("#define PHYS_G 7.0f\n")
    src = '#include "phys.h"\nvoid g(tack_index i, float *y) { y[i] = PHYS_G; }'
    monkeypatch.chdir(tmp_path)
    assert run(tack.Kernel(src, include_dirs=["inc"]), 2) == [2.5, 2.5]
    # The same words from another directory name another directory: its
    # header, and code kept apart.
    monkeypatch.chdir(other)
    assert run(tack.Kernel(src, include_dirs=["inc"]), 2) == [7.0, 7.0]
    assert run(tack.Kernel(src, include_dirs=["./inc"]), 2) == [7.0, 7.0]
    assert len(kept(cache)) == 3


def test_options_are_compiler_words_after_tack_cflags(monkeypatch, cache):
    src = "void x(tack_index i, int32_t *y) { y[i] = X; }"
    assert run(tack.Kernel(src, options=["-DX=3"]), 2, tack.i32) == [3, 3]
    assert run(tack.Kernel(src, options=["-DX=3"]), 2, tack.i32) == [3, 3]
    assert len(kept(cache)) == 1
    # TACK_CFLAGS is the default; the kernel's own words come after it.
    monkeypatch.setenv("TACK_CFLAGS", "-DX=1")
    assert run(tack.Kernel(src), 2, tack.i32) == [1, 1]
    assert run(tack.Kernel(src, options=["-UX", "-DX=4"]), 2, tack.i32) == [4, 4]
    assert run(tack.Kernel(src, options=["-UX", "-DX=4", "-O1"]), 2, tack.i32) == [4, 4]
    assert len(kept(cache)) == 4


def test_a_bad_option_is_the_compilers_error(cache):
    with pytest.raises(RuntimeError, match=r"failed to compile[\s\S]*--no-such-tack-option"):
        tack.Kernel("void b(tack_index i, float *y) { y[i] = 1; }", options=["--no-such-tack-option"])
    assert kept(cache) == []


# --------------------------------------------------------------------------
# NVRTC, through ptx() (no GPU needed)

def float_bits(v):
    import struct

    return str(struct.unpack("<I", struct.pack("<f", v))[0])


def test_nvrtc_takes_the_definitions():
    nvrtc_or_skip()
    src = "void c(tack_index i, float *y) { y[i] = VAL; }"
    three = tack.Kernel(src, defines={"VAL": 3}).ptx()
    five = tack.Kernel(src, defines={"VAL": "2 + 3"}).ptx()
    # The constant the kernel stores, as its bits in the PTX.
    assert re.search(rf"\b{float_bits(3.0)}\b", three), three
    assert re.search(rf"\b{float_bits(5.0)}\b", five), five
    # A name NVRTC's own entry check used once ("N") is the user's to define.
    assert ".entry tack_kernel_entry" in tack.Kernel(src, defines={"VAL": 1, "N": 4}).ptx()


def test_nvrtc_takes_include_dirs_relative_to_the_caller(tmp_path, monkeypatch):
    nvrtc_or_skip()
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "phys.h").write_text("#define PHYS_G 9.5f\n")
    src = '#include "phys.h"\nvoid g(tack_index i, float *y) { y[i] = PHYS_G; }'
    monkeypatch.chdir(tmp_path)
    k = tack.Kernel(src, include_dirs=["inc"])
    # NVRTC compiles later, from another directory.
    monkeypatch.chdir("/")
    assert re.search(rf"\b{float_bits(9.5)}\b", k.ptx())


def test_nvrtc_refuses_an_option_with_its_message():
    nvrtc_or_skip()
    # The C compiler takes -Wall; NVRTC does not.
    k = tack.Kernel("void w(tack_index i, float *y) { y[i] = 1; }", options=["-Wall"])
    with pytest.raises(RuntimeError, match=r"failed to compile for CUDA[\s\S]*-Wall"):
        k.ptx()


def test_printf_compiles_for_cuda():
    nvrtc_or_skip()
    # CUDA's printf needs no include; the CPU's needs <stdio.h>, which
    # NVRTC has not, so the source says which. N is the kernel's own.
    src = """
    #ifdef TACK_BACKEND_CPU
    #include <stdio.h>
    #endif
    void p(tack_index i, float *y) { printf("i=%d of %d\\n", (int)i, N); y[i] = 1; }
    """
    ptx = tack.Kernel(src, defines={"N": 4}).ptx()
    assert "vprintf" in ptx


def test_a_c_library_header_on_cuda_says_how_to_keep_it_for_the_cpu():
    nvrtc_or_skip()
    # Ordinary C for the CPU, where it compiles; NVRTC has no <stdio.h>.
    k = tack.Kernel('#include <stdio.h>\nvoid p(tack_index i, float *y) { printf("%d\\n", (int)i); y[i] = 1; }')
    with pytest.raises(RuntimeError) as e:
        k.ptx()
    message = str(e.value)
    assert "stdio.h" in message.split("\n")[1]  # the compiler's log first
    assert "no C library headers" in message and "#ifdef TACK_BACKEND_CPU" in message


def test_printf_compiles_as_opencl_c(tmp_path):
    # ocloc is Intel's and absent here; Clang compiles OpenCL C 2.0 for SPIR
    # too, with the definitions as ocloc would pass them.
    if not shutil.which("clang"):
        pytest.skip("clang is not installed")
    src = """
    #ifdef TACK_BACKEND_CPU
    #include <stdio.h>
    #endif
    void p(tack_index i, float *y) { printf("i=%d of %d\\n", (int)i, N); y[i] = 1; }
    """
    path = tmp_path / "kernel.cl"
    path.write_text(tack.Kernel(src, defines={"N": 4}).generated_source("level_zero"))
    r = subprocess.run(["clang", "-x", "cl", "-cl-std=CL2.0", "-target", "spir64", "-Xclang",
                        "-finclude-default-header", "-DN=4", "-fsyntax-only", str(path)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


# --------------------------------------------------------------------------
# the definitions are the kernel's source, not Tack's


def test_defines_steer_a_signature_under_a_conditional():
    src = ("#if WIDE\ntypedef double real;\n#else\ntypedef float real;\n#endif\n"
           "void w(tack_index i, real *y) { y[i] = (real)K; }")
    assert run(tack.Kernel(src, defines={"WIDE": True, "K": 3}), 2, tack.f64) == [3.0, 3.0]
    assert run(tack.Kernel(src, defines={"WIDE": False, "K": 4}), 2, tack.f32) == [4.0, 4.0]
    # Without them the condition is the compiler's (a -D flag may set it).
    with pytest.raises(ValueError, match=r"conditional directive at line 3[\s\S]*kernel.s defines"):
        tack.Kernel(src)


# Names Tack's own functions use inside: the reductions' table, the plain
# atomics, CUDA's templates.
TACKS_OWN = {"n": "bad", "p": ")", "v": "(", "old": "}", "sum": ";", "t": None, "e": "1 +", "T": "int",
             "value": "0", "type": "x"}
REDUCES = ("void r(tack_index i, const float *x, float *s, uint32_t *c)\n"
           "{\n    tack_reduce_add(&s[0], x[i]);\n    tack_reduce_add(&c[i % 4], 1u);\n"
           "    tack_reduce_max(&c[4], (uint32_t)i);\n    tack_atomic_add(&c[5], 2u);\n}\n")


def test_defines_named_like_tacks_own_locals_reach_only_the_kernel():
    k = tack.Kernel(REDUCES, defines=TACKS_OWN)
    x = tack.array(np.ones(1001, np.float32))
    s, c = tack.zeros(1, tack.f32), tack.zeros(6, tack.u32)
    k.launch(1001, x, s, c)
    assert s.to_numpy().tolist() == [1001.0]
    assert c.to_numpy().tolist() == [251, 250, 250, 250, 1000, 2002]


def test_a_source_macro_named_like_tacks_own_locals_compiles():
    src = "#define n 16\n#define p (n / 4)\n#define v 1u\n" + REDUCES.replace("% 4", "% p").replace("1u)", "v)")
    k = tack.Kernel(src)
    x = tack.array(np.ones(8, np.float32))
    s, c = tack.zeros(1, tack.f32), tack.zeros(6, tack.u32)
    k.launch(8, x, s, c)
    assert c.to_numpy().tolist() == [2, 2, 2, 2, 7, 16]


def test_nvrtc_defines_named_like_tacks_own_reach_only_the_kernel():
    nvrtc_or_skip()
    ptx = tack.Kernel(REDUCES, defines=TACKS_OWN).ptx()
    assert ".entry tack_kernel_entry" in ptx
    # The entry names the thread grid's members through the prelude, which
    # a macro x or y of the kernel's own source does not reach.
    grid = "#define x xx\n#define y yy\nvoid g(tack_index i, tack_index j, float *s) { s[i * 4 + j] = 1; }"
    assert ".entry tack_kernel_entry" in tack.Kernel(grid).ptx()


def test_nvrtc_log_of_a_failed_compile_holds_the_users_error_alone():
    # Nothing of Tack's own source (its unused helpers, the signature
    # check's pragmas) warns ahead of the user's message.
    nvrtc_or_skip()
    src = "void r(tack_index i, float *s) {\n#ifndef TACK_BACKEND_CPU\n    s[i] = undefined_name;\n#endif\n}"
    with pytest.raises(RuntimeError) as e:
        tack.Kernel(src).ptx()
    log = str(e.value).split("\n", 1)[1]
    assert log.startswith('kernel(3): error: identifier "undefined_name" is undefined'), log[:300]
    assert "warning" not in log, log
