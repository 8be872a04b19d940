"""Which code a CUDA kernel is built as, against the simulated driver.

A driver refuses PTX newer than its JIT (an NVRTC newer than the driver
makes such PTX) and a CUBIN for another GPU, and so does the simulated one
(tests/sim/cuda_sim.c, whose driver version and compute capability the
cases set with TACK_SIM_CUDA_DRIVER_VERSION and
TACK_SIM_CUDA_COMPUTE_CAPABILITY). Tack builds a CUBIN for the GPU when an
NVRTC knows its architecture and the driver loads that NVRTC's CUBINs,
else PTX from an NVRTC whose PTX the driver reads, else says which NVRTC to
install. The NVRTCs are real: the newest, from the venv's
nvidia-cuda-nvrtc, and an older one `make` puts beside it for the cases
that need two. Expectations are worked out from the NVRTCs' own answers
(their versions, the architectures they list), so a newer NVRTC release
changes the numbers, not the cases.
"""

import re
import textwrap

import pytest

from cudasim import run
from nvrtcs import OLDER, beyond, newest, older

# What the case runs: a kernel built on the default CUDA device, what it was
# built as, and the simulator's counts of loads.
SAXPY = """
def saxpy():
    return tack.Kernel("void saxpy(tack_index i, float a, const float *x, float *y) { y[i] = a * x[i] + y[i]; }",
                       device="cuda")

def built():
    # Built for the device when made (device="cuda").
    return saxpy()
"""


def build(sim, body, nvrtc, driver, cc, tmp_path, **env):
    """Runs `body` with one NVRTC (TACK_NVRTC_LIBRARY) on a simulated
    driver of version `driver` whose GPU has compute capability `cc`."""
    return run(sim, SAXPY + textwrap.dedent(body), TACK_NVRTC_LIBRARY=nvrtc.path, TACK_SIM_CUDA_DRIVER_VERSION=driver,
               TACK_SIM_CUDA_COMPUTE_CAPABILITY=cc, TACK_CACHE_DIR=tmp_path, **env)


def refusal(sim, nvrtc, driver, cc, tmp_path, before=""):
    """The RuntimeError of building the kernel as `build` does, after
    `before`; the driver was given nothing to refuse (injected failures
    aside, which it does not count)."""
    return build(sim, before + """
try:
    saxpy()
except RuntimeError as e:
    print(e)
else:
    raise AssertionError("no error")
assert stat("modules_loaded") == 0 and stat("modules_refused") == 0
""", nvrtc, driver, cc, tmp_path)


# --------------------------------------------------------------------------
# CUBIN when NVRTC knows the GPU


def test_a_cubin_for_the_gpu_even_when_nvrtc_is_newer_than_the_driver(cuda_sim, tmp_path):
    n = newest()
    assert 90 in n.archs
    # The driver of the NVRTC's major release, its first minor: it refuses
    # that NVRTC's PTX, and loads its CUBINs.
    out = build(cuda_sim, f"""
        k = built()
        print(k.target("cuda"))
        assert stat("modules_cubin") == 1 and stat("modules_ptx") == 0, (stat("modules_cubin"), stat("modules_ptx"))
        x, y = tack.zeros(64, device="cuda"), tack.zeros(64, device="cuda")
        k(2.0, x, y)
        assert stat("launches") == 1
        # ptx() is still PTX, of this NVRTC, whatever the launch runs.
        assert ".version {n.ptx_isa}" in k.ptx()
        assert stat("modules_loaded") == 1
    """, n, n.major * 1000, "9.0", tmp_path)
    assert re.match(rf"cubin sm_90 \(CUDA {n.major}\.{n.minor}\)", out), out


def test_a_cubin_for_each_architecture_nvrtc_lists(cuda_sim, tmp_path):
    n = newest()
    for arch in (n.archs[0], n.archs[-1]):
        out = build(cuda_sim, """
            print(built().target("cuda"))
            assert stat("modules_cubin") == 1
        """, n, n.driver, f"{arch // 10}.{arch % 10}", tmp_path)
        assert out.startswith(f"cubin sm_{arch} "), out


def test_target_without_a_device_is_the_kernels_own(cuda_sim, tmp_path):
    n = newest()
    out = build(cuda_sim, """
        assert tack.get_default_device().backend == "cpu"
        k = built()
        k.build()  # its own device again: nothing more is loaded
        assert stat("modules_loaded") == 1
        assert k.target() == k.target("cuda"), (k.target(), k.target("cuda"))
        print(k.target())
        assert tack.Kernel(k.source).target() == "host"
    """, n, n.driver, "9.0", tmp_path)
    assert out.startswith("cubin sm_90 "), out


# --------------------------------------------------------------------------
# PTX when no NVRTC knows the GPU


def test_a_gpu_newer_than_nvrtc_gets_ptx_for_the_newest_architecture_nvrtc_knows(cuda_sim, tmp_path):
    n = newest()
    out = build(cuda_sim, """
        print(built().target("cuda"))
        assert stat("modules_ptx") == 1 and stat("modules_cubin") == 0
    """, n, n.driver, beyond(n), tmp_path)
    assert re.match(rf"ptx compute_{n.archs[-1]} \(PTX ISA {re.escape(n.ptx_isa)}, CUDA {n.major}\.{n.minor}\)",
                    out), out


def test_ptx_newer_than_the_driver_is_never_loaded_and_the_error_says_what_to_install(cuda_sim, tmp_path):
    n = newest()
    if n.minor == 0:
        pytest.skip("needs an NVRTC newer than the first release of its major version")
    driver = n.driver - 10
    out = refusal(cuda_sim, n, driver, beyond(n), tmp_path)
    assert f'pip install "nvidia-cuda-nvrtc=={n.major}.{n.minor - 1}.*"' in out, out
    assert "TACK_NVRTC_LIBRARY" in out and n.path in out, out


# --------------------------------------------------------------------------
# neither


def test_a_driver_of_an_older_major_version_is_told_its_nvrtc(cuda_sim, tmp_path):
    n = newest()
    out = refusal(cuda_sim, n, 12080, "9.0", tmp_path)
    assert 'pip install "nvidia-cuda-nvrtc-cu12==12.8.*"' in out, out
    assert "12.8" in out and f"{n.major}.{n.minor}" in out, out


def test_a_gpu_older_than_every_architecture_of_nvrtc_is_told_an_older_nvrtc(cuda_sim, tmp_path):
    n = newest()
    old = n.archs[0] - 5
    out = refusal(cuda_sim, n, n.driver, f"{old // 10}.{old % 10}", tmp_path)
    assert f"sm_{old}" in out, out
    assert 'pip install "nvidia-cuda-nvrtc-cu12==12.9.*"' in out, out


# --------------------------------------------------------------------------
# several NVRTCs


def test_ptx_comes_from_an_older_nvrtc_the_driver_reads(cuda_sim, tmp_path):
    n, o = newest(), older()
    assert (o.major, o.minor) < (n.major, n.minor)
    # Found in the venv's package first, then as the toolkit of CUDA_PATH.
    environ = {"CUDA_PATH": str(OLDER), "TACK_NVRTC_LIBRARY": ""}
    out = run(cuda_sim, SAXPY + textwrap.dedent("""
        print(built().target("cuda"))
        assert stat("modules_ptx") == 1 and stat("modules_cubin") == 0
    """), TACK_SIM_CUDA_DRIVER_VERSION=o.driver, TACK_SIM_CUDA_COMPUTE_CAPABILITY=beyond(n),
              TACK_CACHE_DIR=tmp_path, **environ)
    arch = max(a for a in o.archs if a <= max(n.archs) + 1)
    assert re.match(rf"ptx compute_{arch} \(PTX ISA {re.escape(o.ptx_isa)}, CUDA {o.major}\.{o.minor}\)", out), out


def test_a_cubin_the_driver_refuses_falls_back_to_ptx(cuda_sim, tmp_path):
    n = newest()
    out = build(cuda_sim, """
        # The first load, the CUBIN, is refused as an unreadable image.
        assert SIM.tack_sim_cuda_fail(b"cuModuleLoadData", 200, 1) == 0
        print(built().target("cuda"))
        assert stat("modules_ptx") == 1 and stat("modules_cubin") == 0
        # The device makes PTX from then on: no CUBIN is offered again.
        other = tack.Kernel("void fill(tack_index i, float v, float *y) { y[i] = v; }", device="cuda")
        assert other.target("cuda").startswith("ptx compute_90 "), other.target("cuda")
        assert stat("modules_ptx") == 2 and stat("modules_cubin") == 0
    """, n, n.driver, "9.0", tmp_path)
    assert out.startswith(f"ptx compute_90 (PTX ISA {n.ptx_isa}, "), out


def test_a_refused_cubin_with_no_ptx_to_fall_back_to_says_both(cuda_sim, tmp_path):
    n = newest()
    if n.minor == 0:
        pytest.skip("needs an NVRTC newer than the first release of its major version")
    # The first load, the CUBIN, is refused as an unreadable image.
    out = refusal(cuda_sim, n, n.major * 1000, "9.0", tmp_path,
                  before='assert SIM.tack_sim_cuda_fail(b"cuModuleLoadData", 200, 1) == 0\n')
    assert "CUDA_ERROR_INVALID_IMAGE" in out, out
    assert f'pip install "nvidia-cuda-nvrtc=={n.major}.0.*"' in out, out


# --------------------------------------------------------------------------
# the cache keeps code per target


def test_the_disk_cache_keeps_code_for_each_target_apart(cuda_sim, tmp_path):
    n = newest()
    cache = tmp_path / "cache"

    def files():
        return sorted(p.name for p in cache.iterdir() if p.name.startswith("cuda-"))

    def once(cc, driver=n.driver):
        return build(cuda_sim, """
            print(built().target("cuda"))
        """, n, driver, cc, cache).strip()

    assert once("9.0").startswith("cubin sm_90 ")
    first = files()
    assert len(first) == 1 and first[0].endswith(".cubin"), first
    # Another GPU gets its own CUBIN: the simulated driver refuses one for
    # another architecture, so a shared entry would fail to load.
    assert once("8.6").startswith("cubin sm_86 ")
    assert len(files()) == 2
    # The same GPU again: from the cache, nothing new.
    assert once("9.0").startswith("cubin sm_90 ")
    assert len(files()) == 2
    # PTX for the same source is an entry of its own.
    assert once(beyond(n)).startswith("ptx ")
    kinds = sorted(name.rsplit(".", 1)[1] for name in files())
    assert kinds == ["cubin", "cubin", "ptx"], files()
