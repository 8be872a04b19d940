"""`python -m tack` and tack.show_config(): what a bug report needs.

Each case runs `python -m tack` in a child interpreter with the environment
it names (Tack picks each driver once per process), and reads the report as
a user would: the header, then one block per backend.
"""

import ctypes
import io
import os
import pathlib
import platform
import shutil
import subprocess
import sys

import numpy as np
import pytest

import simdriver
from nvrtcs import OLDER, beyond, newest, older
import tack

DRIVER_VARIABLES = ("TACK_CUDA_LIBRARY", "TACK_HIP_LIBRARY", "TACK_LEVEL_ZERO_LIBRARY", "TACK_NVRTC_LIBRARY",
                    "TACK_HIPRTC_LIBRARY", "TACK_OCLOC_LIBRARY")
BACKENDS = ("cpu", "cuda", "hip", "level_zero")


def environment(tmp_path, **variables):
    """This environment without any driver selection, a kernel cache in
    tmp_path, and `variables` on top."""
    env = {k: v for k, v in os.environ.items() if k not in DRIVER_VARIABLES and k != "TACK_CC"}
    env["TACK_CACHE_DIR"] = str(tmp_path / "cache")
    env.update(variables)
    return env


def report(env):
    """The report as {"header": text, backend: text}, and the whole text."""
    run = subprocess.run([sys.executable, "-m", "tack"], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stderr == "", run.stderr
    blocks = run.stdout.strip("\n").split("\n\n")
    parts = {"header": blocks[0]}
    for block in blocks[1:]:
        parts[block.split()[0]] = block
    assert set(parts) == {"header", *BACKENDS}, run.stdout
    return parts, run.stdout


def squeeze(text):
    return " ".join(text.split())


def cc_facts():
    """The system C compiler as the shell finds it: its real path and the
    first line of its --version."""
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no cc on PATH")
    version = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=60).stdout.splitlines()[0]
    return os.path.realpath(cc), version


def test_this_machine(tmp_path):
    parts, text = report(environment(tmp_path))
    header = squeeze(parts["header"])
    assert header.startswith(f"Tack {tack.__version__} {os.path.dirname(tack.__file__)}"), header
    python = os.path.normpath(sys.executable)  # as the child names itself
    assert f"Python {platform.python_version()} ({platform.python_implementation()}) {python}" in header, header
    assert f"NumPy {np.__version__} {os.path.dirname(np.__file__)}" in header
    assert f"kernel cache {tmp_path / 'cache'}" in header

    cpu = squeeze(parts["cpu"])
    assert cpu.startswith("cpu available, 1 device"), cpu
    path, version = cc_facts()
    assert f"C compiler {squeeze(version)} {path}" in cpu, cpu
    assert "cc on PATH" in cpu, cpu

    # The CUDA driver: where the dynamic loader finds libcuda.so.1, or why not.
    try:
        ctypes.CDLL("libcuda.so.1")
        has_cuda = True
    except OSError:
        has_cuda = False
    cuda = squeeze(parts["cuda"])
    if has_cuda:
        assert "driver not found" not in cuda, cuda
    else:
        assert cuda.startswith("cuda not available"), cuda
        assert "driver not found: CUDA is not available: the driver library libcuda.so.1 could not be loaded" in cuda, \
            cuda
        assert "TACK_CUDA_LIBRARY" in cuda, cuda


def test_the_cpu_target_is_shown(tmp_path):
    """What CPU kernels are built for (TACK_CPU_TARGET), and a value that
    is refused, with what to set instead."""
    cpu = squeeze(report(environment(tmp_path))[0]["cpu"])
    assert "cpu:0 kernels native (TACK_CPU_TARGET): code for this CPU" in cpu, cpu
    cpu = squeeze(report(environment(tmp_path, TACK_CPU_TARGET="portable"))[0]["cpu"])
    assert "cpu:0 kernels portable (TACK_CPU_TARGET): code for any CPU of" in cpu, cpu
    if platform.machine() == "x86_64":
        assert "-march=x86-64-v2" in cpu, cpu
    cpu = squeeze(report(environment(tmp_path, TACK_CPU_TARGET="fast"))[0]["cpu"])
    assert "cpu:0 kernels TACK_CPU_TARGET=fast is not a target: set it to native" in cpu, cpu


def test_nvrtc_from_its_wheel(tmp_path):
    try:
        import nvidia
    except ImportError:
        pytest.skip("the nvidia-cuda-nvrtc package is not installed")
    found = sorted(p for d in nvidia.__path__ for p in pathlib.Path(d).glob("*/lib/libnvrtc.so.*")
                   if "builtins" not in p.name)
    if not found:
        pytest.skip("no libnvrtc in the nvidia package")
    parts, _ = report(environment(tmp_path))
    cuda = squeeze(parts["cuda"])
    assert f"NVRTC {found[0].name.split('.so.')[1]}." in cuda, cuda
    assert str(found[0]) in cuda or os.path.realpath(found[0]) in cuda, cuda


@pytest.fixture(scope="module")
def simulators(tmp_path_factory):
    scratch = tmp_path_factory.mktemp("sims")
    libraries = {}
    for name in ("cuda", "hip", "level_zero", "hiprtc", "ocloc"):
        library, why_not = simdriver.build(name, scratch)
        if library is None:
            pytest.skip(why_not)
        libraries[name] = library
    return libraries


def test_simulated_drivers(tmp_path, simulators):
    env = environment(tmp_path, TACK_CUDA_LIBRARY=simulators["cuda"], TACK_HIP_LIBRARY=simulators["hip"],
                      TACK_LEVEL_ZERO_LIBRARY=simulators["level_zero"], TACK_HIPRTC_LIBRARY=simulators["hiprtc"],
                      TACK_OCLOC_LIBRARY=simulators["ocloc"])
    parts, text = report(env)
    cuda = squeeze(parts["cuda"])
    assert cuda.startswith("cuda available, 1 device"), cuda
    assert f"driver 13.0 {simulators['cuda']}" in cuda, cuda
    assert "cuda:0 Tack simulated GPU 0" in cuda, cuda

    hip = squeeze(parts["hip"])
    assert hip.startswith("hip available, 2 devices"), hip
    assert f"driver 6.2.0 {simulators['hip']}" in hip, hip
    assert "hip:0 Tack simulated HIP GPU 0 hip:1 Tack simulated HIP GPU 1" in hip, hip
    assert f"hipRTC 6.2 {simulators['hiprtc']}" in hip, hip

    level_zero = squeeze(parts["level_zero"])
    assert level_zero.startswith("level_zero available, 2 devices"), level_zero
    assert f"driver driverVersion 65536 {simulators['level_zero']}" in level_zero, level_zero
    assert "level_zero:0 Tack simulated Level Zero GPU 0, device id 0x0bd5" in level_zero, level_zero
    assert f"ocloc 0.0.0-tack-sim {simulators['ocloc']}" in level_zero, level_zero


def test_a_missing_driver_says_why(tmp_path):
    missing = str(tmp_path / "nowhere" / "libcuda.so.1")
    parts, _ = report(environment(tmp_path, TACK_CUDA_LIBRARY=missing, TACK_HIP_LIBRARY=missing + "-hip"))
    cuda = squeeze(parts["cuda"])
    assert cuda.startswith("cuda not available"), cuda
    assert f"driver not found: CUDA is not available: the driver library {missing} could not be loaded" in cuda, cuda
    assert "No such file or directory" in cuda, cuda
    hip = squeeze(parts["hip"])
    assert hip.startswith("hip not available") and "not found" in hip and missing + "-hip" in hip, hip


def test_show_config_prints_the_same(tmp_path, capsys):
    assert tack.show_config() is None
    printed = capsys.readouterr().out
    buffer = io.StringIO()
    tack.show_config(file=buffer)
    assert buffer.getvalue() == printed
    assert squeeze(printed).startswith(f"Tack {tack.__version__} "), printed
    for backend in BACKENDS:
        assert f"\n{backend} " in printed, printed


# --------------------------------------------------------------------------
# several NVRTCs: each is listed, and each CUDA device says which one its
# kernels would be built by, and as what, as the driver's version decides


def nvrtc_report(tmp_path, sim, driver, cc):
    """The cuda block with the venv's newest NVRTC and the older one the
    Makefile installs (found as the toolkit of CUDA_PATH), on a simulated
    driver of version `driver` whose GPU has compute capability `cc`."""
    parts, _ = report(environment(tmp_path, TACK_CUDA_LIBRARY=sim, CUDA_PATH=str(OLDER),
                                  TACK_SIM_CUDA_DRIVER_VERSION=str(driver), TACK_SIM_CUDA_COMPUTE_CAPABILITY=cc))
    return squeeze(parts["cuda"])


def two_nvrtcs():
    n, o = newest(), older()
    assert (o.major, o.minor) < (n.major, n.minor)
    return n, o


def listed(cuda, nvrtc):
    """`nvrtc`'s line (version, then path) is in the block, and where."""
    for path in (nvrtc.path, os.path.realpath(nvrtc.path)):
        line = f"NVRTC {nvrtc.major}.{nvrtc.minor} {path}"
        if line in cuda:
            return cuda.index(line), path
    raise AssertionError(f"NVRTC {nvrtc.major}.{nvrtc.minor} ({nvrtc.path}) is not listed: {cuda}")


def test_every_nvrtc_is_listed_and_the_device_gets_a_cubin_from_the_first_that_fits(tmp_path, cuda_sim):
    n, o = two_nvrtcs()
    # A driver of the older NVRTC's release loads the newer one's CUBINs
    # (the same major version), so the first found makes them.
    cuda = nvrtc_report(tmp_path, cuda_sim, o.driver, "9.0")
    (first, newest_path), (second, _) = listed(cuda, n), listed(cuda, o)
    assert first < second, cuda  # in the order Tack tries them
    assert f"cuda:0 kernels CUBIN sm_90 from NVRTC {n.major}.{n.minor} ({newest_path})" in cuda, cuda


def test_a_device_the_newest_nvrtc_cannot_serve_gets_ptx_from_the_older(tmp_path, cuda_sim):
    n, o = two_nvrtcs()
    # A GPU no NVRTC knows gets PTX; the newer NVRTC's is newer than the
    # driver reads, the older one's is not.
    cc = beyond(n)
    cuda = nvrtc_report(tmp_path, cuda_sim, o.driver, cc)
    _, older_path = listed(cuda, o)
    listed(cuda, n)
    major, minor = (int(x) for x in cc.split("."))
    arch = max(a for a in o.archs if a <= 10 * major + minor)
    assert f"cuda:0 kernels PTX compute_{arch} from NVRTC {o.major}.{o.minor} ({older_path})" in cuda, cuda


def test_a_driver_no_nvrtc_fits_says_why_and_what_to_install(tmp_path, cuda_sim):
    n, o = two_nvrtcs()
    cuda = nvrtc_report(tmp_path, cuda_sim, 12080, "9.0")
    listed(cuda, n), listed(cuda, o)
    assert "cuda:0 kernels none: no NVRTC here makes code that cuda:0 (compute capability 9.0) runs with its " \
           "CUDA 12.8 driver" in cuda, cuda
    assert f"NVRTC {o.major}.{o.minor} ({o.path}) makes CUBINs that need a CUDA 13 driver" in cuda, cuda
    assert 'pip install "nvidia-cuda-nvrtc-cu12==12.8.*"' in cuda, cuda
