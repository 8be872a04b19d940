"""Plain atomics: a CPU launch that runs on one thread performs its
kernel's tack_atomic_* as plain loads and stores, but only on memory no
other process can write and only while no other launch with atomics runs
in the process. Each case runs in a child process with a timeout: the
thread count and the serial threshold are read once per process, and a
broken exclusion could hang as well as miscount."""

import json
import os
import shutil
import sys
import textwrap

import numpy as np
import pytest

import tack
from children import run_python
import tack._tack as _tack


pytestmark = pytest.mark.usefixtures("private_kernel_cache")

HIST = "void hist(tack_index i, const uint8_t *v, uint32_t *bins) { tack_atomic_add(&bins[v[i]], 1u); }"


def run_child(script, env=None, args=(), timeout=180):
    """run_python, with HIST in `script` standing for the histogram's
    source; TACK_SERIAL_BELOW only where `env` sets it."""
    return run_python(textwrap.dedent(script).replace("HIST", repr(HIST)), args, env, timeout,
                      unset=("TACK_SERIAL_BELOW",))


def compilers():
    """The system compiler, and clang where it is installed: Clang
    vectorises a loop of plain read-modify-writes it is told has no
    dependences (a histogram's lanes then lose each other's updates), GCC
    12 does not."""
    found = [None]
    if shutil.which("clang"):
        found.append("clang")
    return found


# --------------------------------------------------------------------------
# one thread

ONE_THREAD = """
    import numpy as np, tack, tack._tack as _t

    def plain_runs():
        return _t.atomic_runs()["plain"]

    k = tack.Kernel(HIST)
    vn = np.random.default_rng(11).integers(0, 256, 10**6, dtype=np.uint8)
    v, bins = tack.array(vn), tack.zeros(256, tack.u32)
    before = plain_runs()
    for _ in range(5):
        k.launch(vn.size, v, bins)
    assert plain_runs() >= before + 5, "the launches did not take the plain entry"
    assert (bins.to_numpy() == 5 * np.bincount(vn, minlength=256)).all(), "plain histogram differs from bincount"

    # Every type and operation, through the value each returns: the old
    # values of one element are distinct when each add saw the one before.
    for np_t, c_t in [("int32", "int32_t"), ("uint32", "uint32_t"), ("int64", "int64_t"),
                      ("uint64", "uint64_t"), ("float32", "float"), ("float64", "double")]:
        add = tack.Kernel(f"void add(tack_index i, const {c_t} *v, {c_t} *sum, {c_t} *old) "
                          "{ old[i] = tack_atomic_add(&sum[i % 4], v[i]); }")
        n = 100_003
        xn = (np.arange(n) % 3 + 1).astype(np_t)
        total, old = tack.zeros(4, np_t), tack.zeros(n, np_t)
        before = plain_runs()
        add.launch(n, tack.array(xn), total, old)
        assert plain_runs() > before, np_t
        want = [xn[r::4].sum(dtype=np.float64) for r in range(4)]
        assert np.array_equal(total.to_numpy().astype(np.float64), want), np_t
        olds = old.to_numpy()
        for r in range(4):
            assert len(np.unique(olds[r::4])) == len(olds[r::4]), np_t
        if np_t.startswith("float"):
            continue
        mm = tack.Kernel(f"void mm(tack_index i, const {c_t} *v, {c_t} *lo, {c_t} *hi, {c_t} *seen) "
                         "{ seen[i] = tack_atomic_min(&lo[0], v[i]); tack_atomic_max(&hi[0], v[i]); }")
        info = np.iinfo(np_t)
        wn = np.random.default_rng(3).integers(info.min, info.max, n, dtype=np_t, endpoint=True)
        lo, hi = tack.array(np.array([info.max], np_t)), tack.array(np.array([info.min], np_t))
        seen = tack.zeros(n, np_t)
        before = plain_runs()
        mm.launch(n, tack.array(wn), lo, hi, seen)
        assert plain_runs() > before, np_t
        assert lo.to_numpy()[0] == wn.min() and hi.to_numpy()[0] == wn.max(), np_t
        # min returns the value before: the running minimum, in index order.
        running = np.minimum.accumulate(np.concatenate([[info.max], wn]))[:-1].astype(np_t)
        assert np.array_equal(seen.to_numpy(), running), np_t
    print("ok")
"""


@pytest.mark.parametrize("cc", compilers())
def test_plain_atomics_on_one_thread_equal_bincount_and_return_the_value_before(cc, tmp_path):
    env = {"TACK_NUM_THREADS": "1", "TACK_CACHE_DIR": str(tmp_path)}
    if cc:
        env["TACK_CC"] = cc
    assert run_child(ONE_THREAD, env).split() == ["ok"]


def test_launches_left_to_the_pool_take_the_plain_entry():
    """With the measured choice (no fixed threshold, every core), a
    histogram's launches are faster on one thread with plain atomics than
    on all with locked ones: the pool keeps them serial, and plain. The
    choice is measured: another process busy on the machine while the first
    launch times one thread can make it choose the pool, so three fresh
    processes are asked, and one of them must keep the launches plain."""
    script = """
        import numpy as np, tack, tack._tack as _t
        k = tack.Kernel(HIST)
        vn = np.random.default_rng(2).integers(0, 256, 2 * 10**6, dtype=np.uint8)
        v, bins = tack.array(vn), tack.zeros(256, tack.u32)
        k.launch(vn.size, v, bins)
        before = _t.atomic_runs()["plain"]
        for _ in range(10):
            k.launch(vn.size, v, bins)
        assert (bins.to_numpy() == 11 * np.bincount(vn, minlength=256)).all()
        print(_t.atomic_runs()["plain"] - before)
    """
    plain = []
    for _ in range(3):
        plain.append(int(run_child(script, {"TACK_NUM_THREADS": "2"})))
        if plain[-1] >= 9:
            break
    assert plain[-1] >= 9, f"plain launches of 10, in each process asked: {plain}"


# --------------------------------------------------------------------------
# other launches at the same time

CONCURRENT = """
    import sys, threading, numpy as np, tack, tack._tack as _t

    k = tack.Kernel(HIST)
    sizes = [int(s) for s in sys.argv[1:3]]
    rng = np.random.default_rng(5)
    values = [rng.integers(0, 256, n, dtype=np.uint8) for n in sizes]
    arrays = [tack.array(v) for v in values]
    bins = tack.zeros(256, tack.u32)
    before = _t.atomic_runs()
    state = {"rounds": 0, "stop": False}

    def met_count(runs):
        # Launches that found another: a plain one refused, a locked one waiting.
        return runs["refused"] + runs["waited"]

    def decide():
        # Rounds go on until the launches have met often enough (how
        # often they run at once depends on what else the machine runs).
        state["rounds"] += 1
        now = _t.atomic_runs()
        met = min(now["plain"] - before["plain"], met_count(now) - met_count(before)) >= 5
        state["stop"] = state["rounds"] >= 2000 or (state["rounds"] >= 20 and met)

    start, end = threading.Barrier(2), threading.Barrier(2, action=decide)
    failures = []

    def launcher(t):
        try:
            while True:
                start.wait()
                k.launch(values[t].size, arrays[t], bins)
                end.wait()
                if state["stop"]:
                    return
        except BaseException as exc:
            failures.append(exc)
            start.abort()
            end.abort()

    threads = [threading.Thread(target=launcher, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures
    after = _t.atomic_runs()
    want = state["rounds"] * sum(np.bincount(v, minlength=256).astype(np.int64) for v in values)
    got = bins.to_numpy().astype(np.int64)
    print("rounds", state["rounds"], "plain", after["plain"] - before["plain"],
          "met", met_count(after) - met_count(before), "lost", int((want - got).sum()))
"""


@pytest.mark.parametrize(
    "sizes",
    [
        pytest.param((1_000_000, 3_000_000), id="one-serial-one-parallel"),
        pytest.param((2_000_000, 2_000_000), id="both-serial"),
    ],
)
def test_two_threads_launching_into_one_array_count_exactly(sizes):
    """Two Python threads launch the same histogram kernel into the same
    bins, round after round, started together. Launches below 3 x 10^6
    indices run on one thread (with plain atomics when they may), larger
    ones on the pool with locked atomics. Every count must arrive; and the
    launches did meet (a serial launch found another running and kept
    locked atomics, or a locked launch waited for a plain one) and did run
    plain, or the case proved nothing."""
    env = {"TACK_SERIAL_BELOW": "3000000", "TACK_NUM_THREADS": "2"}
    out = run_child(CONCURRENT, env, args=[str(x) for x in sizes]).split()
    stats = dict(zip(out[::2], (int(x) for x in out[1::2])))
    assert stats["lost"] == 0, f"counts lost with launches at the same time: {stats}"
    assert stats["plain"] >= 5 and stats["met"] >= 5, stats


FORKED = """
    import os, numpy as np, tack, tack._tack as _t

    k = tack.Kernel(HIST)
    kind = os.environ["BINS"]
    bins = tack.zeros(256, tack.u32, exportable=True) if kind == "exportable" else None
    if kind == "wrapped":
        import mmap
        shared = mmap.mmap(-1, 1024)            # MAP_SHARED: the child writes the same pages
        bins = tack.from_dlpack(np.frombuffer(shared, np.uint32))
    vn = np.random.default_rng(9).integers(0, 256, 200_000, dtype=np.uint8)
    v = tack.array(vn)
    k.launch(vn.size, v, tack.zeros(256, tack.u32))   # compiled before the fork
    go_r, go_w = os.pipe()
    before = _t.atomic_runs()["plain"]
    pid = os.fork()
    if pid == 0:
        os.read(go_r, 1)
        for _ in range(100):
            k.launch(vn.size, v, bins)
        os._exit(0 if _t.atomic_runs()["plain"] == before else 3)
    os.write(go_w, b"g")
    for _ in range(100):
        k.launch(vn.size, v, bins)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the child ran plain atomics on shared memory"
    assert _t.atomic_runs()["plain"] == before, "plain atomics on memory another process writes"
    got = bins.to_numpy().astype(np.int64)
    lost = int((200 * np.bincount(vn, minlength=256) - got).sum())
    print("lost", lost)
"""


@pytest.mark.parametrize("kind", ["exportable", "wrapped"])
def test_memory_another_process_writes_keeps_locked_atomics(kind):
    """A process and its fork child launch the histogram into the same
    shared pages at the same time, each on one thread: the process-wide
    exclusion cannot see the other process, so only locked atomics count
    right. Exportable memory is Tack's own shared kind; wrapped memory may
    be anyone's mapping (here a shared anonymous one)."""
    out = run_child(FORKED, {"TACK_NUM_THREADS": "1", "BINS": kind}).split()
    assert out == ["lost", "0"]


def test_one_index_launches_with_atomics_count_and_leave_the_word_free():
    """A 1-index launch registers with locked atomics and must deregister:
    a launch on one thread afterwards still gets plain atomics."""
    script = """
        import numpy as np, tack, tack._tack as _t
        k = tack.Kernel(HIST)
        v, bins = tack.array(np.array([7], np.uint8)), tack.zeros(256, tack.u32)
        for _ in range(1000):
            k.launch(1, v, bins)
        got = bins.to_numpy()
        assert got[7] == 1000 and got.sum() == 1000, got
        before = _t.atomic_runs()
        k.launch(1000, tack.array(np.full(1000, 3, np.uint8)), bins)
        after = _t.atomic_runs()
        assert after["plain"] > before["plain"] and after["refused"] == before["refused"], (before, after)
        assert bins.to_numpy()[3] == 1000
        print("ok")
    """
    assert run_child(script, {"TACK_NUM_THREADS": "1"}).split() == ["ok"]


# --------------------------------------------------------------------------
# what other kernels compile


KERNELS = {
    "saxpy": "void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }",
    "lap": """
void lap(tack_index i, tack_index j, int64_t h, int64_t w, const float *u, float *out)
{
    tack_index k = i * w + j;
    if (i == 0 || j == 0 || i == h - 1 || j == w - 1) { out[k] = 0.0f; return; }
    out[k] = u[k - w] + u[k + w] + u[k - 1] + u[k + 1] - 4.0f * u[k];
}
""",
    "fill3": "void fill3(tack_index i, tack_index j, tack_index k, double v, double *o) "
    "{ o[(i * 4 + j) * 5 + k] = v; }",
}


def launch_and_expect(name, k):
    """Launches kernel `name` of KERNELS; (what it computed, what NumPy computes)."""
    rng = np.random.default_rng(7)
    if name == "saxpy":
        x, y = rng.standard_normal(1000).astype(np.float32), rng.standard_normal(1000).astype(np.float32)
        ty = tack.array(y)
        k.launch(1000, 2.5, tack.array(x), ty)
        return ty.to_numpy(), np.float32(2.5) * x + y
    if name == "lap":
        h, w = 33, 47
        u = rng.standard_normal((h, w)).astype(np.float32)
        out = tack.zeros(h * w, dtype="float32")
        k.launch((h, w), h, w, tack.array(u.ravel()), out)
        want = np.zeros_like(u)
        want[1:-1, 1:-1] = u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] - np.float32(4) * u[1:-1, 1:-1]
        return out.to_numpy().reshape(h, w), want
    o = tack.zeros(60, dtype="float64")
    k.launch((3, 4, 5), 0.125, o)
    return o.to_numpy(), np.full(60, 0.125)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_a_kernel_without_atomics_has_no_plain_entry_and_computes(name):
    """The plain entry is for kernels with atomics only: one without keeps
    the locked entry alone, and computes what NumPy does (1-D, 2-D, 3-D)."""
    k = tack.Kernel(KERNELS[name])
    src = k.generated_source("cpu")
    assert "_plain" not in src
    got, want = launch_and_expect(name, k)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_the_generated_source_is_the_same_in_every_process():
    """The cache key hashes the generated source: text that varied from one
    process to the next (an address, an iteration order, the time) would
    miss the cache and rebuild every kernel on every run."""
    here = {name: tack.Kernel(src).generated_source("cpu") for name, src in sorted(KERNELS.items())}
    script = f"""
        import json, tack
        print(json.dumps({{n: tack.Kernel(s).generated_source("cpu") for n, s in {sorted(KERNELS.items())!r}}}))
    """
    for _ in range(2):
        assert json.loads(run_child(script)) == here


def test_a_kernel_with_atomics_adds_the_plain_entry_without_simd_and_keeps_the_rest():
    src = tack.Kernel(HIST).generated_source("cpu")
    assert "static inline void hist_tack_plain_(tack_index i, const tack_u8_ *v, tack_u32_ *bins)" in src
    plain = src[src.index("void tack_kernel_entry_plain(tack_i64_ tack_begin_, tack_i64_ tack_end_, const tack_i64_ "
                          "*tack_shape_, void *const *tack_args_)\n{"):]
    assert "hist_tack_plain_(tack_i_, tack_p0_, tack_p1_);" in plain and "TACK_SIMD_" not in plain
    # The locked entries are still there, vectorisable as before.
    assert src.count("TACK_SIMD_\n    for (tack_index tack_i_") == 2
    assert "__atomic_fetch_" in src
