"""Tack's generated code names nothing a kernel's definitions can take.

A kernel's `defines` are #define lines between the backend's prelude and
the user's source, and the source may define macros of its own: both reach
everything written after them, which is Tack's signature check, the checked
accesses, the copies of the kernel and the entry points, and every macro of
the prelude that expands there (tack_atomic_add, tack_reduce_min). So that
code names only keywords, reserved identifiers (__x, _X), the user's own
names (the kernel's, its parameters'), and Tack's own spellings, which begin
tack_ or TACK_ (or the kernel's name and _tack_, its copies) and which a
kernel's definitions may not take.

Two ways to see it: a scan of the generated source of every backend for any
other identifier where Tack's code is (the cases below over 1-3 indices,
checked and not, atomics, reductions, extents), and CPU kernels built with
a definition of every such name Tack's code used, each made wrong, that
still give the right results and still raise IndexError out of bounds, in
child processes. The GPU sources are also compiled with those definitions
by the real compilers this machine has (NVRTC, hipRTC, clang's OpenCL C).
"""

import re
import shutil
import subprocess
import textwrap

import numpy as np
import pytest

import tack
from children import run_python
from conftest import nvrtc_or_skip

pytestmark = pytest.mark.usefixtures("private_kernel_cache")

# ---------------------------------------------------------------------------
# the scan

KEYWORDS = set("""
auto break case char const continue default do double else enum extern float for goto if inline int long register
restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
_Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local
bool true false class template typename static_assert decltype namespace nullptr operator this using constexpr
__kernel __global kernel global
defined
""".split())

# The words a preprocessing directive starts with.
DIRECTIVES = {"define", "undef", "if", "ifdef", "ifndef", "elif", "else", "endif", "line", "pragma", "include",
              "error"}


def allowed(word, own):
    """A keyword, a reserved identifier, the user's own name, Tack's (tack_,
    TACK_, and <kernel>_tack_ for Tack's copies of the kernel)."""
    copy = re.match(r"(\w+?)_tack_", word)
    return (word in KEYWORDS or word in own or word.startswith(("tack_", "TACK_")) or (copy and copy.group(1) in own)
            or word.startswith("__") or re.match(r"_[A-Z]", word) is not None)


def strip(text):
    """The text without comments and with every string and character
    literal emptied, line breaks kept."""
    text = re.sub(r"#\s*include\s*<[^>]*>", "#include", text)
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.index("*/", i + 2) + 2
            out.append("\n" * text.count("\n", i, j) or " ")
            i = j
        elif text.startswith("//", i):
            i = text.index("\n", i)
        elif c in "\"'":
            j = i + 1
            while text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


TOKEN = re.compile(r"\.?\d(?:[eEpP][+-]|[\w.])*|[A-Za-z_]\w*|##|#|\S")


def logical_lines(text):
    """The lines of `text`, each with its continuations joined."""
    return text.replace("\\\n", " ").split("\n")


def regions(src, defines):
    """Tack's text before the definitions, the user's source, and Tack's
    text after it (the user's body copies left out), as `src` from
    tack_generate lays them out."""
    start = src.index('#line 1 "kernel"\n')
    before = src[:start]
    if defines:  # their lines end it, one each
        lines = before.split("\n")
        assert all(line.startswith(f"#define {name} ") for line, name in zip(lines[-len(defines) - 1:], defines))
        before = "\n".join(lines[:-len(defines) - 1]) + "\n"
    end = src.index('\n#line 1 "<tack entry>"\n', start)
    user, after = src[start:end], src[end:]
    # copies of the user's body and parameter list
    user_parts = re.findall(r'#line \d+ "kernel"\n.*?(?=#line 1 "<tack entry>")', after, re.S)
    after = re.sub(r'#line \d+ "kernel"\n.*?(?=#line 1 "<tack entry>")', "", after, flags=re.S)
    return before, user + "\n".join(user_parts), after


def foreign_names(src, own, defines=()):
    """The identifiers Tack's code names after the definitions that are
    not keywords, reserved, the user's (`own`) or Tack's: in the text after
    the user's source, and in the replacement lists of Tack's macros that
    expand there or in the user's source. Each with where it was seen."""
    before, user, after = (strip(part) for part in regions(src, defines))
    macros = {}
    for line in logical_lines(before) + logical_lines(after):
        m = re.match(r"\s*#\s*define\s+(\w+)(\(([^)]*)\))?(.*)", line)
        if m:
            params = [p.strip() for p in m.group(3).split(",")] if m.group(2) else []
            macros[m.group(1)] = (params, m.group(4))
    found = {}
    undone = set()

    def pasted_only(name, k):
        """Whether parameter k of macro `name` is only pasted or quoted in
        its body: its argument is then never expanded."""
        params, body = macros[name]
        tokens = TOKEN.findall(body)
        uses = [j for j, t in enumerate(tokens) if t == params[k]]
        return all((j and tokens[j - 1] in ("##", "#")) or tokens[j + 1:j + 2] == ["##"] for j in uses)

    def scan(tokens, where, params=()):
        skip = set()
        for k, t in enumerate(tokens):
            if k in skip or not re.match(r"[A-Za-z_]", t) or t in params or t in undone:
                continue
            if k and tokens[k - 1] == "##":
                continue  # a pasted piece: part of the name before it
            if not allowed(t, own):
                found.setdefault(t, where)
            reach(t)
            if macros.get(t, ([],))[0] and tokens[k + 1:k + 2] == ["("]:
                # an argument the macro only pastes (tack_r##op##_i32_)
                depth, arg, j = 0, 0, k + 1
                while j < len(tokens):
                    depth += tokens[j] == "("
                    depth -= tokens[j] == ")"
                    if depth == 0:
                        break
                    if depth == 1 and tokens[j] == ",":
                        arg += 1
                    elif j > k + 1 and arg < len(macros[t][0]) and pasted_only(t, arg):
                        skip.add(j)
                    j += 1

    reached = set()

    def reach(name):
        if name in macros and name not in reached:
            reached.add(name)
            params, body = macros[name]
            scan(TOKEN.findall(body), f"#define {name}", params)

    for t in TOKEN.findall(user):
        reach(t)
    for line in logical_lines(after):
        tokens = TOKEN.findall(line)
        if tokens[:1] == ["#"]:
            word = tokens[1] if len(tokens) > 1 else ""
            if word == "undef":
                undone.add(tokens[2])
            if word in ("define", "undef", "line", "include", "else", "endif"):
                continue
            # a pragma's namespace and name are read unexpanded, its
            # arguments as tokens a macro can take
            tokens = tokens[4:] if word == "pragma" else tokens[2:]
        scan(tokens, line.strip()[:120])
    # _Pragma("clang loop vectorize(...)"): its arguments, as above
    for body in re.findall(r'_Pragma\("([^"]*)"\)', after):
        scan(TOKEN.findall(body)[2:], f"_Pragma({body})")
    return found


CASES = {
    "1d": ("void k(tack_index i, const float *x, float *y) { y[i] = x[i] * 2.0f; }", {}),
    "2d": ("void k(tack_index i, tack_index j, const float *x, float *y) { y[i * 3 + j] = x[i * 3 + j]; }", {}),
    "3d": ("void k(tack_index i, tack_index j, tack_index l, float *y) { y[(i * 3 + j) * 2 + l] = 1.0f; }", {}),
    "checked": ("void k(tack_index i, tack_index j, const float *x, float *y) { y[i + j] = x[i]; }",
                {"checked": True}),
    "extents": ("void k(tack_index i, const float *x, float *y) { y[i] = x[i] + (float)tack_size(x) "
                "+ (float)tack_extent(y, 0); }", {}),
    "atomics": ("void k(tack_index i, const uint32_t *x, uint32_t *h, int64_t *c, float *f) "
                "{ tack_atomic_add(&h[x[i] % 8], 1u); tack_atomic_max(&c[0], (int64_t)i); "
                "tack_atomic_add(&f[0], 1.0f); }", {}),
    "reductions": ("void k(tack_index i, tack_index j, const float *x, float *lo, double *s, uint64_t *n) "
                   "{ tack_reduce_min(&lo[0], x[i]); tack_reduce_max(&lo[1], x[j]); "
                   "tack_reduce_add(&s[0], (double)x[i]); tack_reduce_add(&n[0], (uint64_t)1); }",
                   {"checked": True}),
    "reductions-1d": ("void k(tack_index i, const float *x, float *lo, double *s, int32_t *n) "
                      "{ tack_reduce_min(&lo[0], x[i]); tack_reduce_add(&s[0], (double)x[i]); "
                      "tack_reduce_add(&n[i % 4], 1); }", {}),
    "bool": ("void k(tack_index i, const bool *b, bool *c, int8_t *d, uint16_t *e) "
             "{ c[i] = !b[i]; d[i] = (int8_t)e[i]; }", {"checked": True}),
}


def own_names(source):
    """The kernel's own names: its function's and its parameters'."""
    head = source[:source.index("{")]
    return set(re.findall(r"[A-Za-z_]\w*(?=\s*[,)(])", head))


@pytest.mark.parametrize("backend", ["cpu", "cuda", "hip", "level_zero"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_generated_code_after_the_definitions_names_nothing_of_the_users(backend, case):
    source, options = CASES[case]
    k = tack.Kernel(source, **options)
    try:
        src = k.generated_source(backend)
    except TypeError as exc:  # a dtype the backend has no type for (bool on level_zero)
        pytest.skip(str(exc))
    found = foreign_names(src, own_names(source))
    assert not found, "\n".join(f"{name}: in {where}" for name, where in sorted(found.items()))


def test_the_scan_finds_what_a_definition_could_take():
    # The scan itself: a text laid out as Tack's, naming int64_t, a member
    # `size` and a macro's use of uint32_t after the source, is reported.
    src = textwrap.dedent("""\
        typedef long tack_index;
        #define TACK_PICK_(p) _Generic((p), uint32_t *: 1, default: 0)
        #define N 4
        #line 1 "kernel"
        void k(tack_index i, float *y) { y[i] = TACK_PICK_(y); }
        #line 1 "<tack entry>"
        typedef struct { int64_t size; } tack_e_;
        #pragma clang force_cuda_host_device end
        #line 3 "kernel"
        { int64_t mine; }
        #line 1 "<tack entry>"
        """)
    found = foreign_names(src, {"k", "i", "y"}, defines=["N"])
    assert set(found) == {"uint32_t", "int64_t", "size", "end"}, found


# ---------------------------------------------------------------------------
# every such name defined wrong, on the cpu

# The names Tack's code after the definitions used before it spelled its own
# (int64_t in the entry's shape arithmetic, uint64_t in the checked bounds
# test, ...), the standard ones it might, and the members, parameters and
# attributes its helpers had: each defined to something that breaks the
# compile or the result wherever Tack's code still named it.
WRONG = {
    "int8_t": "short", "uint8_t": "short", "int16_t": "char", "uint16_t": "unsigned char",
    "int32_t": "short", "uint32_t": "unsigned short", "int64_t": "int32_t", "uint64_t": "signed char",
    "intptr_t": "char", "uintptr_t": "unsigned char", "size_t": "char", "ptrdiff_t": "char",
    "bool": "double", "true": "2", "false": "3", "NULL": "@", "UINTPTR_MAX": "@", "INT64_MAX": "@",
    "min": "@", "max": "@", "add": "@",
    **{w: "@" for w in ("a b d e f h i k l n p q r s t u v w size ndim flag param index extent line sink expected "
                        "old next seen type value unused noinline cold visibility vectorize assume_safety ivdep "
                        "end begin atomicCAS atomic_cmpxchg get_global_id get_global_size uint ulong").split()},
}

# Kernels that name none of WRONG themselves: parameters of float, double
# and tack_index, which the prelude made before the definitions.
WRONG_KERNELS = """
K1 = '''
void k1(tack_index idx, const float *src, float *out, tack_index *cnt, float *lo, float *hi, double *sum)
{
    out[idx] = src[idx] * 2.0f + (float)tack_size(src) - (float)tack_extent(out, 0);
    tack_atomic_add(&cnt[0], (tack_index)1);
    tack_atomic_max(&cnt[1], idx);
    tack_reduce_min(&lo[0], src[idx]);
    tack_reduce_max(&hi[0], src[idx]);
    tack_reduce_add(&sum[0], (double)src[idx]);
    tack_reduce_add(&cnt[2 + idx % 3], (tack_index)1);
}'''
K2 = '''
void k2(tack_index row, tack_index col, const float *src, float *out, tack_index *cnt, float *hi)
{
    out[row * tack_extent(out, 1) + col] = src[row * tack_extent(src, 1) + col] + 1.0f;
    tack_reduce_add(&cnt[row], (tack_index)1);
    tack_reduce_max(&hi[0], src[row * tack_extent(src, 1) + col]);
    tack_atomic_add(&cnt[7], col);
}'''
K3 = '''
void k3(tack_index pl, tack_index row, tack_index col, float *out, double *sum, tack_index *cnt)
{
    out[(pl * 5 + row) * 6 + col] = (float)(pl * 100 + row * 10 + col);
    tack_reduce_add(&sum[pl], 1.0);
    tack_atomic_add(&cnt[0], (tack_index)1);
    tack_reduce_min(&cnt[1], -pl);
}'''
OOB = "void oob(tack_index idx, float *out) { out[idx + 250] = 1.0f; }"
"""


RUN_WRONG = WRONG_KERNELS + """
import json, sys
import numpy as np, tack

wrong = json.loads(sys.argv[1])
checked = sys.argv[2] == "1"
rng = np.random.default_rng(3)

def kernel(src):
    return tack.Kernel(src, defines=wrong, checked=checked)

n = 3000
src = rng.standard_normal(n).astype(np.float32)
out = np.zeros(n, np.float32)
cnt = np.array([0, -1, 0, 0, 0], np.int64)
lo, hi, s = np.array([np.inf], np.float32), np.array([-np.inf], np.float32), np.zeros(1)
kernel(K1).launch(n, src, out, cnt, lo, hi, s)
assert np.array_equal(out, src * 2 + n - n), "k1 out"
assert list(cnt[:2]) == [n, n - 1], cnt
assert list(cnt[2:]) == [len(range(r, n, 3)) for r in range(3)], cnt
assert lo[0] == src.min() and hi[0] == src.max()
assert abs(s[0] - src.astype(np.float64).sum()) < 1e-6 * n

a = rng.standard_normal((40, 70)).astype(np.float32)
b = np.zeros_like(a)
c2 = np.zeros(41, np.int64)
h2 = np.array([-np.inf], np.float32)
kernel(K2).launch(a.shape, a, b, c2, h2)
assert np.array_equal(b, a + 1), "k2"
assert list(c2[:7]) == [70] * 7 and c2[8:40].tolist() == [70] * 32, c2
assert c2[7] == 70 + 40 * (69 * 70 // 2), c2[7]
assert h2[0] == a.max()

o3 = np.zeros(4 * 5 * 6, np.float32)
s3, c3 = np.zeros(4), np.zeros(2, np.int64)
kernel(K3).launch((4, 5, 6), o3, s3, c3)
want = np.add.outer(np.add.outer(np.arange(4) * 100, np.arange(5) * 10), np.arange(6)).ravel()
assert np.array_equal(o3, want.astype(np.float32)), "k3"
assert s3.tolist() == [30.0] * 4 and c3.tolist() == [120, -3], (s3, c3)

y = np.zeros(300, np.float32)
view = y[:8]
if checked:
    try:
        kernel(OOB).launch(8, view)
    except IndexError as exc:
        assert "out of bounds" in str(exc), exc
    else:
        raise AssertionError("no IndexError")
    assert not y.any(), np.nonzero(y)
print("ok")
"""


@pytest.mark.parametrize("checked", [False, True], ids=["unchecked", "checked"])
def test_cpu_kernels_with_every_name_tack_used_defined_wrong(checked):
    import json

    out = run_python(RUN_WRONG, [json.dumps(WRONG), int(checked)], timeout=300)
    assert out.strip() == "ok"


def test_the_kept_sources_name_nothing_wrong_after_the_definitions(tmp_path):
    # The same kernels' sources as the cpu compiled them, from the cache:
    # the scan finds none of WRONG (nor anything else) in Tack's code there.
    import json

    run_python(RUN_WRONG, [json.dumps(WRONG), 1], env={"TACK_CACHE_DIR": str(tmp_path)}, timeout=300)
    kept = sorted(tmp_path.glob("cpu-*.c"))
    assert len(kept) == 4, kept
    for path in kept:
        text = path.read_text()
        name = re.search(r"for kernel '(\w+)'", text).group(1)
        source = dict(k1="K1", k2="K2", k3="K3", oob="OOB")[name]
        scope = {}
        exec(WRONG_KERNELS, scope)
        found = foreign_names(text, own_names(scope[source]), defines=WRONG)
        assert not found, (path.name, found)


def test_a_definition_still_reaches_the_users_own_code():
    # The user's source reads int64_t as the definition says, and so does
    # Tack's reading of its signature: the parameter is int32, which the
    # check (in Tack's own spelling) confirms.
    k = tack.Kernel("void w(tack_index idx, int64_t *out) { out[idx] = (int64_t)sizeof(int64_t); }",
                    defines={"int64_t": "int32_t"})
    assert k.params == (("out", tack.i32, "array", True),)
    out = np.zeros(5, np.int32)
    k.launch(5, out)
    assert out.tolist() == [4] * 5


# ---------------------------------------------------------------------------
# the GPU dialects with the same definitions, compiled by real compilers

# Less bool, true and false: keywords in C++ (CUDA, HIP) and OpenCL C.
GPU_WRONG = {name: value for name, value in WRONG.items() if name not in ("bool", "true", "false")}

GPU_KERNEL = """
void g(tack_index row, tack_index col, const float *src, float *out, tack_index *cnt, float *lo, double *sum)
{
    out[row * tack_extent(out, 1) + col] = src[row * tack_extent(src, 1) + col];
    tack_atomic_add(&cnt[0], (tack_index)1);
    tack_reduce_min(&lo[0], src[col]);
    tack_reduce_max(&lo[1], src[col]);
    tack_reduce_add(&sum[0], (double)src[col]);
    tack_reduce_add(&cnt[1], col);
}
"""


@pytest.mark.parametrize("checked", [False, True], ids=["unchecked", "checked"])
def test_cuda_source_with_the_wrong_definitions_compiles_with_nvrtc(checked):
    nvrtc_or_skip()
    k = tack.Kernel(GPU_KERNEL, defines=GPU_WRONG, checked=checked)
    assert not foreign_names(k.generated_source("cuda"), own_names(GPU_KERNEL), defines=GPU_WRONG)
    ptx = k.ptx()
    assert ".entry tack_kernel_entry" in ptx


@pytest.mark.parametrize("checked", [False, True], ids=["unchecked", "checked"])
def test_hip_source_with_the_wrong_definitions_compiles_with_hiprtc(checked):
    from test_kernels_nd import hiprtc_compile, hiprtc_or_skip

    lib = hiprtc_or_skip()
    src = tack.Kernel(GPU_KERNEL, defines=GPU_WRONG, checked=checked).generated_source("hip")
    assert not foreign_names(src, own_names(GPU_KERNEL), defines=GPU_WRONG)
    result, log = hiprtc_compile(lib, src)
    assert result == 0, log


@pytest.mark.parametrize("checked", [False, True], ids=["unchecked", "checked"])
def test_opencl_source_with_the_wrong_definitions_compiles_with_clang(checked):
    clang = shutil.which("clang")
    if not clang:
        pytest.skip("no clang here (Debian: clang)")
    src = tack.Kernel(GPU_KERNEL, defines=GPU_WRONG, checked=checked).generated_source("level_zero")
    assert not foreign_names(src, own_names(GPU_KERNEL), defines=GPU_WRONG)
    out = subprocess.run(
        [clang, "-x", "cl", "-cl-std=CL2.0", "-Xclang", "-finclude-default-header", "-target", "spir64",
         "-fsyntax-only", "-Werror=implicit-function-declaration", "-"],
        input=src, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 0, out.stderr


# ---------------------------------------------------------------------------
# Tack's names are Tack's

@pytest.mark.parametrize("options", [
    {"defines": {"tack_i64_": "int"}},
    {"defines": {"TACK_INLINE_": ""}},
    {"defines": ["tack_anything"]},
    {"options": ["-DTACK_AT_=x"]},
    {"options": ["-Utack_index"]},
    {"defines": {"r_tack_x_": "0"}},
])
def test_a_definition_of_a_tack_name_is_refused(options):
    with pytest.raises(ValueError, match="(tack_ or TACK_|followed by _tack_): those names are Tack's own|are Tack's own"):
        tack.Kernel("void r(tack_index i, float *y) { y[i] = 1.0f; }", **options)


def test_names_that_only_begin_like_tacks_are_the_users():
    k = tack.Kernel("void r(tack_index i, float *y) { y[i] = TACKY + tackle; }",
                    defines={"TACKY": "1.0f", "tackle": "2.0f"})
    y = np.zeros(4, np.float32)
    k.launch(4, y)
    assert y.tolist() == [3.0] * 4
