"""Interpreter exit with Tack objects still alive: exit status 0 and nothing
printed, in particular no "Exception ignored" from a deleter or a capsule
destructor running after the modules were torn down."""

import os
import subprocess
import sys
import textwrap

import pytest

SCENARIOS = {
    "numpy_holds_exports": """
        import numpy as np, tack
        a = tack.array(np.arange(8.0))
        keep = np.from_dlpack(a)
        del a
        keep_view = np.from_dlpack(tack.zeros(6, tack.i32).reshape(3, 2))
        keep_ro = np.from_dlpack(tack.array_from_ptr(keep.ctypes.data, tack.f64, (8,)))
    """,
    "unadopted_capsules": """
        import tack
        legacy = tack.zeros(4).__dlpack__()
        versioned = tack.zeros(4).__dlpack__(max_version=(1, 0))
        a = tack.zeros(3)
        both = [a.__dlpack__(), a.__dlpack__(max_version=(1, 0))]
    """,
    "unadopted_capsules_in_a_cycle": """
        import gc, tack
        gc.disable()
        class Holder:
            pass
        h = Holder()
        h.self = h
        h.capsules = [tack.zeros(4).__dlpack__(), tack.zeros(4).__dlpack__(max_version=(1, 0))]
        del h
    """,
    "capsules_outlive_the_module": """
        import builtins, sys, tack
        builtins.late_capsules = [tack.zeros(4).__dlpack__(), tack.zeros(4).__dlpack__(max_version=(1, 0))]
        import numpy as np
        builtins.late_numpy = np.from_dlpack(tack.zeros(5))
        for name in [m for m in sys.modules if m == "tack" or m.startswith("tack.")]:
            del sys.modules[name]
        del tack
    """,
    "imports_from_numpy": """
        import numpy as np, tack
        n = np.arange(10.0)
        a = tack.from_dlpack(n)
        del n
        v = a.reshape(2, 5)
        ro = np.arange(3.0)
        ro.flags.writeable = False
        b = tack.from_dlpack(ro)
        legacy = tack.from_dlpack(np.zeros(4).__dlpack__())
    """,
    "tack_to_tack": """
        import tack
        a = tack.zeros(3)
        b = tack.from_dlpack(a)
        c = tack.from_dlpack(b.reshape(3, 1).__dlpack__(max_version=(1, 0)))
        del a, b
    """,
    "exit_with_an_exception_raised_and_caught": """
        import numpy as np, sys, tack
        keep = [tack.from_dlpack(np.ones(3)), np.from_dlpack(tack.zeros(3))]
        try:
            tack.from_dlpack(np.zeros(3, np.complex64))
        except TypeError:
            pass
        sys.exit(0)
    """,
    "daemon_threads_exchanging_at_exit": """
        import threading, time, numpy as np, tack
        shared = tack.zeros(1000)
        def spin():
            while True:
                n = np.from_dlpack(shared)
                b = tack.from_dlpack(n)
                c = b.__dlpack__(max_version=(1, 0))
                del n, b, c
        for _ in range(3):
            threading.Thread(target=spin, daemon=True).start()
        time.sleep(0.05)
    """,
}

TORCH_SCENARIOS = {
    "imports_from_torch_and_exports_to_torch": """
        import torch, tack
        a = tack.from_dlpack(torch.arange(10.0))
        v = a.reshape(5, 2)
        t = torch.from_dlpack(tack.zeros(6))
        legacy = tack.from_dlpack(torch.utils.dlpack.to_dlpack(torch.ones(2)))
        capsule = tack.zeros(2).__dlpack__(max_version=(1, 0))
    """,
}


def run(code):
    env = dict(os.environ)
    env["PYTHONMALLOC"] = "debug"  # catches frees without the GIL and heap corruption
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def check(result):
    assert result.returncode == 0, f"exit status {result.returncode}\n{result.stderr}"
    assert result.stderr == "", result.stderr
    assert result.stdout == "", result.stdout


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_exit_is_silent(name):
    check(run(SCENARIOS[name]))


@pytest.mark.parametrize("name", sorted(TORCH_SCENARIOS))
def test_exit_is_silent_with_torch(name):
    pytest.importorskip("torch", reason="PyTorch is not installed")
    check(run(TORCH_SCENARIOS[name]))


def test_deleter_called_after_finalization(probe):
    # A C consumer (a C++ static, say) releasing exports from an atexit
    # handler, after Python has finalized: the deleter must do nothing unsafe.
    script = """
        import sys
        sys.path.insert(0, %r)
        from conftest import Probe, adopt
        import numpy as np, tack
        probe = Probe(%r)
        for max_version in (None, (1, 0)):
            a = tack.array(np.arange(100.0))
            assert probe.lib.probe_release_at_exit(*adopt(probe, a.__dlpack__(max_version=max_version))) == 0
            b = tack.from_dlpack(np.arange(10.0))
            assert probe.lib.probe_release_at_exit(*adopt(probe, b.__dlpack__(max_version=max_version))) == 0
        del a, b
    """ % (os.path.dirname(os.path.abspath(__file__)), probe.path)
    check(run(script))


def test_a_failing_script_is_noticed():
    # the harness itself: output at exit does reach the test
    result = run("import sys; sys.stderr.write('Exception ignored in: x\\n')")
    with pytest.raises(AssertionError):
        check(result)
