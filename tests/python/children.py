"""A script run in a fresh interpreter, for the tests whose subject is a
whole process: its environment as read at start, its thread pool, its exit.
"""

import os
import subprocess
import sys
import textwrap


def run_python(script, args=(), env=None, timeout=120, unset=()):
    """Runs `script` (dedented) with `args` in a new interpreter, under this
    environment less the variables in `unset` and with `env` added; its
    stdout. Fails on a non-zero exit, with the child's output."""
    environ = {k: v for k, v in os.environ.items() if k not in unset}
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
        capture_output=True,
        text=True,
        env=dict(environ, **(env or {})),
        timeout=timeout,
    )
    assert out.returncode == 0, f"exit {out.returncode}\n--- stdout\n{out.stdout}\n--- stderr\n{out.stderr}"
    return out.stdout
