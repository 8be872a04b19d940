"""tests/gpu/run.sh where it cannot run: it must stop at once with its
reason, and with OUT set keep that reason in OUT/gpu-run.log, since a GPU
machine hands back only the files under OUT and the end of the output.

The GPU path itself runs only on a machine with an NVIDIA GPU.
"""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "gpu" / "run.sh"


def run_script(cwd, **env):
    environ = {k: v for k, v in os.environ.items() if k not in ("OUT", "PYTHON", "TACK_GPU_RUN_LOGGING")}
    environ.update(env)
    return subprocess.run(["bash", str(SCRIPT)], cwd=cwd, env=environ, capture_output=True, text=True, timeout=120)


def check_stopped(r, log, reason):
    """The run stopped with status 1 and `reason`; the log, when there is
    one, holds everything it printed."""
    said = r.stdout + r.stderr
    assert r.returncode == 1, f"exit {r.returncode}\n{said}"
    assert f"tests/gpu/run.sh: stopped: {reason}" in said, said
    if log is not None:
        assert log.is_file(), f"no {log}; the run printed:\n{said}"
        text = log.read_text()
        # The inner run writes both streams through tee: nothing is
        # printed that the log lacks.
        assert text == said, f"the log differs from the output:\n--- log\n{text}\n--- output\n{said}"
        assert text.rstrip().endswith(reason), text
        assert sorted(p.name for p in log.parent.iterdir()) == ["gpu-run.log"]


def test_a_missing_interpreter_stops_the_run_and_the_log_says_why(tmp_path):
    missing = tmp_path / "no-such-python"
    # A relative OUT that does not exist yet: made, and used from the
    # repository root the script moves to.
    r = run_script(tmp_path, OUT="out/logs", PYTHON=str(missing))
    check_stopped(r, tmp_path / "out" / "logs" / "gpu-run.log",
                  f"PYTHON={missing} cannot run the GPU tests: not found")


def test_without_out_nothing_is_written_and_the_reason_is_printed(tmp_path):
    missing = tmp_path / "no-such-python"
    r = run_script(tmp_path, PYTHON=str(missing))
    check_stopped(r, None, f"PYTHON={missing} cannot run the GPU tests: not found")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="this interpreter has CuPy")
def test_an_interpreter_without_pytorch_or_cupy_is_named_with_the_reason(tmp_path):
    missing = "PyTorch" if importlib.util.find_spec("torch") is None else "CuPy"
    r = run_script(tmp_path, OUT=str(tmp_path / "out"), PYTHON=sys.executable)
    check_stopped(r, tmp_path / "out" / "gpu-run.log",
                  f"PYTHON={sys.executable} cannot run the GPU tests: it has no {missing}")
