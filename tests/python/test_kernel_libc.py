"""A CPU kernel is ordinary C: it includes the standard headers and calls
the C library (printf, snprintf, getenv, rand, stderr) like any host code,
while its own functions stay its own. Each case runs in a child process,
which the kernel's output goes to."""

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.usefixtures("private_kernel_cache")


def run(script, **env):
    """Runs `script` in a fresh interpreter; its stdout and stderr. Fails
    with both when it fails."""
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **env))
    assert r.returncode == 0, f"exit {r.returncode}\n--- stdout\n{r.stdout}\n--- stderr\n{r.stderr}"
    return r.stdout, r.stderr


def test_standard_headers_and_libc_calls():
    out, _ = run(
        r'''
        import tack
        k = tack.Kernel(r"""
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>
        /* Named like a function Python exports: still the kernel's own. */
        int Py_IsInitialized(void) { return 5; }
        void label(tack_index i, int32_t *out)
        {
            char text[64];
            const char *word = getenv("TACK_TEST_WORD");
            int n = snprintf(text, sizeof text, "%s-%d", word ? word : "unset", (int)i);
            out[i] = (n == (int)strlen(text) ? n : -1000) + (rand() >= 0 ? 0 : -1000) + 100 * Py_IsInitialized();
            if (i == 3) {
                printf("index 3 says %s\n", text);
                fflush(stdout);
            }
        }
        """)
        out = tack.zeros(12, tack.i32)
        k(out)
        print(out.to_numpy().tolist())
        ''',
        TACK_TEST_WORD="tack",
    )
    lines = out.splitlines()
    assert "index 3 says tack-3" in lines
    # "tack-0" .. "tack-9" are 6 characters, "tack-10" and "tack-11" 7.
    assert str([506] * 10 + [507] * 2) in lines


def test_writing_to_stderr():
    _, err = run(
        r'''
        import tack
        k = tack.Kernel(r"""
        #include <stdio.h>
        void say(tack_index i, const float *x) { fprintf(stderr, "x[%d] = %.1f\n", (int)i, (double)x[i]); }
        """)
        k.launch(4, tack.array([1.5, 2.5, 3.5, 4.5], tack.f32))
        ''',
        TACK_NUM_THREADS="1",
    )
    assert err.splitlines() == [f"x[{i}] = {i + 1.5}" for i in range(4)]
