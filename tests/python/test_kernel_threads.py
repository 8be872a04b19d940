"""Kernels and other Python threads: a launch long enough to be worth it
lets them run, whatever its number of indices, and a thread's compile log
goes with the thread. Each case runs in a fresh interpreter with a cache of
its own; the figures the README quotes (another thread's progress during a
launch, bytes left per exited thread) are printed by these runs."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

LIMIT = 120


def run(body, tmp_path, **environ):
    env = dict(os.environ, TACK_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TACK_CC", None)
    env.pop("TACK_CFLAGS", None)
    env.update(environ)
    prelude = "import json, sys, threading, time\nimport tack\n"
    try:
        proc = subprocess.run([sys.executable, "-c", prelude + textwrap.dedent(body)], env=env, capture_output=True,
                              text=True, timeout=LIMIT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the case hung (killed after {LIMIT} s)")
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    print(figures)
    return figures


# A kernel whose every index spins for `spins` steps: slow per index, so
# that a launch over few indices takes long.
SLOW = """
void slow(tack_index i, int64_t spins, int64_t *y) {
    volatile int64_t s = 0;
    for (int64_t j = 0; j < spins; j++)
        s += j;
    y[i] = s;
}
"""


def test_a_long_launch_of_few_indices_lets_other_threads_run(tmp_path):
    figures = run(f"""
        SLOW = {SLOW!r}
        calibrate = tack.Kernel(SLOW)
        y = tack.zeros(1000, tack.i64)
        # Spins for about 0.25 ms per index: 1,000 indices take about 0.25 s
        # on one thread.
        spins = 1 << 16
        # Timed over one index, which runs on this thread: a launch of more
        # may be the one that starts the thread pool, and the start (some
        # milliseconds) would pass for the kernel's own time.
        while True:
            t0 = time.perf_counter()
            calibrate.launch(1, spins, y)
            if time.perf_counter() - t0 > 0.25e-3 or spins > 1 << 30:
                break
            spins *= 2

        def progress(kernel):
            # The longest stretch of one launch during which another Python
            # thread made no progress. Counting its steps would not do: it
            # takes the GIL for a whole switch interval as soon as the launch
            # returns, before anything can be read.
            seen, stop = [], threading.Event()
            def other():
                last = time.perf_counter()
                while not stop.is_set():
                    now = time.perf_counter()
                    if now - last > 1e-3:
                        seen.append(now)
                        last = now
            t = threading.Thread(target=other)
            t.start()
            time.sleep(0.05)  # it is running
            t0 = time.perf_counter()
            kernel.launch(1000, spins, y)
            t1 = time.perf_counter()
            stop.set()
            t.join()
            marks = [t0] + [m for m in seen if t0 < m < t1] + [t1]
            return max(b - a for a, b in zip(marks, marks[1:])), t1 - t0

        fresh = tack.Kernel(SLOW)  # nothing measured yet: its first launch
        first, first_took = progress(fresh)
        measured, measured_took = progress(fresh)  # its cost per index known
        ok = y.to_numpy()[999] == spins * (spins - 1) // 2
        print(json.dumps(dict(first=first, first_took=first_took, measured=measured, measured_took=measured_took,
                              right=bool(ok))))
    """, tmp_path)
    assert figures["right"]
    assert figures["first_took"] > 0.1 and figures["measured_took"] > 0.1, figures
    # Holding the GIL, the launch left the other thread nothing until it
    # returned; releasing it, the other thread ran throughout.
    assert figures["first"] < figures["first_took"] / 4, figures
    assert figures["measured"] < figures["measured_took"] / 4, figures


def test_a_threads_compile_log_goes_with_the_thread(tmp_path):
    # A compiler that fails at once with 80 KB of diagnostics: the log is
    # what matters here, not how long a real compiler takes to write it.
    cc = tmp_path / "cc-failing"
    cc.write_text('#!/bin/sh\nyes "kernel:2: error: a diagnostic a compiler wrote" | head -c 81920\nexit 1\n')
    cc.chmod(0o755)
    figures = run("""
        import ctypes
        class MallInfo2(ctypes.Structure):
            _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                       "fsmblks", "uordblks", "fordblks", "keepcost")]
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = MallInfo2
        def in_use():
            m = libc.mallinfo2()
            return m.uordblks + m.hblkhd  # small blocks, and large ones mapped on their own

        logs = []
        def fail_once():
            try:
                tack.Kernel("void bad(tack_index i, float *y) { y[i] = 0; }")
            except RuntimeError as e:
                logs.append(len(str(e)))
        def threads(n):
            for _ in range(n):
                t = threading.Thread(target=fail_once)
                t.start()
                t.join()
        threads(5)  # the allocator's per-thread arenas, the module
        before = in_use()
        threads(40)
        left = (in_use() - before) / 40
        print(json.dumps(dict(log=sum(logs) / len(logs), failed=len(logs), left_per_thread=left)))
    """, tmp_path, TACK_CC=str(cc))
    assert figures["failed"] == 45 and figures["log"] > 80000, figures  # a log worth leaking
    # Each exited thread leaked its whole log before.
    assert figures["left_per_thread"] < figures["log"] / 10, figures
