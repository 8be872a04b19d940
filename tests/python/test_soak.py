"""Lifetime soak: many DLPack exchanges between Tack, NumPy and PyTorch in
both DLPack versions, through reshape chains, with every chain's objects
dropped in a random order while other chains are still alive.

Every exchange must be zero-copy (the address survives), writes through the
far end of a chain must reach the memory it started from, and at the end
every producer object must have been released, Tack's live counters must be
back where they started and resident memory must not have grown.

The fast variant here runs 50,000 exchanges; tests/stress/soak.py runs the
same engine for 1,000,000 (``make stress``).
"""

import gc
import os
import random
import time
import weakref

import numpy as np
import pytest

import tack

torch = pytest.importorskip("torch")

# Shapes of 24 elements: every chain can reshape among them.
SHAPES = [(24,), (2, 12), (12, 2), (3, 8), (4, 6), (6, 4), (2, 3, 4), (4, 3, 2), (2, 2, 6), (1, 24, 1), (2, 2, 2, 3)]
DTYPES = ["float32", "float64", "int32", "int64", "uint8", "int16"]


def live():
    return dict(tack._tack.live_counts())


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS in /proc/self/status")


def address(obj):
    """The address of the first element, whoever owns the object."""
    if isinstance(obj, tack.Array):
        return obj.ptr
    if isinstance(obj, np.ndarray):
        return obj.__array_interface__["data"][0]
    return obj.data_ptr()


def values(obj):
    """A NumPy copy of the object's elements, flattened."""
    if isinstance(obj, tack.Array):
        return obj.to_numpy().ravel()
    if isinstance(obj, np.ndarray):
        return obj.ravel().copy()
    return obj.detach().numpy().ravel().copy()


class Chain:
    """Objects over one allocation, from the producer that made it to the
    latest consumer. All of them stay referenced here until retirement."""

    def __init__(self, origin, expected):
        self.objects = [origin]
        self.capsules = []  # exports nobody adopts, dropped with the rest
        self.address = address(origin)
        self.expected = expected  # what the memory holds, as a flat NumPy array

    @property
    def last(self):
        return self.objects[-1]


class Soak:
    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.exchanges = 0
        self.legacy = 0
        self.versioned = 0
        self.origins_made = 0
        self.origins_freed = 0
        self.chains = []
        self.writes = 0

    # -------------------------------------------------------------- origins

    def _freed(self, _ref):
        self.origins_freed += 1

    def new_chain(self):
        rng = self.rng
        dtype = rng.choice(DTYPES)
        shape = rng.choice(SHAPES)
        expected = (np.arange(24) * 7 + rng.randrange(50)).astype(dtype) % 100
        kind = rng.randrange(3)
        if kind == 0:
            origin = expected.reshape(shape).copy()
        elif kind == 1:
            origin = torch.from_numpy(expected.reshape(shape).copy())
        else:
            origin = tack.array(expected.reshape(shape))
        chain = Chain(origin, expected.copy())
        if kind != 2:
            # The callback counts producers actually released (Tack's own
            # arrays show in the live counters instead); the chain keeps the
            # reference, so the callback stays registered.
            chain.ref = weakref.ref(origin, self._freed)
            self.origins_made += 1
        self.chains.append(chain)
        return chain

    # -------------------------------------------------------------- steps

    def exchange(self, chain):
        """One hand-over of the chain's memory to the next library."""
        rng = self.rng
        src = chain.last
        if isinstance(src, tack.Array):
            way = rng.randrange(6)
            if way == 0:
                out = np.from_dlpack(src)  # NumPy asks for a versioned tensor
                self.versioned += 1
            elif way == 1:
                out = torch.from_dlpack(src)
                self.versioned += 1
            elif way == 2:
                out = torch.utils.dlpack.from_dlpack(src.__dlpack__())
                self.legacy += 1
            elif way == 3:
                out = tack.from_dlpack(src.__dlpack__())
                self.legacy += 1
            elif way == 4:
                out = tack.from_dlpack(src.__dlpack__(max_version=(1, 0)))
                self.versioned += 1
            else:
                out = tack.from_dlpack(src)
                self.versioned += 1
        elif isinstance(src, np.ndarray):
            way = rng.randrange(3)
            if way == 0:
                out = tack.from_dlpack(src)
                self.versioned += 1
            elif way == 1:
                out = tack.from_dlpack(src.__dlpack__())
                self.legacy += 1
            else:
                out = tack.from_dlpack(src.__dlpack__(max_version=(1, 0)))
                self.versioned += 1
        else:
            way = rng.randrange(3)
            if way == 0:
                out = tack.from_dlpack(src)  # through PyTorch's C exchange table
                self.versioned += 1
            elif way == 1:
                out = tack.from_dlpack(torch.utils.dlpack.to_dlpack(src))
                self.legacy += 1
            else:
                out = tack.from_dlpack(src.__dlpack__(max_version=(1, 0)))
                self.versioned += 1
        self.exchanges += 1
        assert address(out) == chain.address, f"exchange {self.exchanges} copied: {type(src)} -> {type(out)}"
        chain.objects.append(out)

    def reshape(self, chain):
        src = chain.last
        shape = self.rng.choice(SHAPES)
        if isinstance(src, tack.Array):
            out = src.reshape(shape) if self.rng.randrange(2) else src.reshape(-1)
        elif isinstance(src, np.ndarray):
            out = src.reshape(shape)
        else:
            out = src.reshape(shape)
        assert address(out) == chain.address
        chain.objects.append(out)

    def unconsumed_export(self, chain):
        """An export nobody adopts: the capsule's destructor releases it."""
        arrays = [o for o in chain.objects if isinstance(o, tack.Array)]
        if arrays:
            a = self.rng.choice(arrays)
            capsule = a.__dlpack__(max_version=(1, 0)) if self.rng.randrange(2) else a.__dlpack__()
            chain.capsules.append(capsule)

    def write_through(self, chain):
        """Writes through the newest Tack array; every object must see it."""
        arrays = [o for o in chain.objects if isinstance(o, tack.Array) and o.writable]
        if not arrays:
            return
        a = arrays[-1]
        value = self.rng.randrange(1, 100)
        a.fill(value)
        chain.expected[:] = value
        self.writes += 1
        probe = self.rng.choice(chain.objects)
        got = values(probe)
        assert (got == chain.expected).all(), f"a write through Tack is not visible through {type(probe)}"

    def retire(self, chain):
        """Drops the chain's objects one by one in a random order."""
        self.chains.remove(chain)
        assert (values(chain.last) == chain.expected).all(), "the memory changed under the chain"
        objects = chain.objects + chain.capsules
        chain.objects = chain.capsules = None
        self.rng.shuffle(objects)
        while objects:
            objects.pop()

    # -------------------------------------------------------------- driver

    def run(self, exchanges, max_chains=12):
        rng = self.rng
        while self.exchanges < exchanges:
            if not self.chains or (len(self.chains) < max_chains and rng.random() < 0.2):
                self.new_chain()
            chain = rng.choice(self.chains)
            r = rng.random()
            if r < 0.55 or len(chain.objects) < 2:
                self.exchange(chain)
            elif r < 0.75:
                self.reshape(chain)
            elif r < 0.78:
                self.unconsumed_export(chain)
            elif r < 0.80:
                self.write_through(chain)
            elif len(chain.objects) > 2:
                self.retire(chain)
        while self.chains:
            self.retire(self.chains[-1])


def soak(exchanges, seed=0, warmup=5000):
    """Runs `exchanges` exchanges after `warmup` more; returns the figures."""
    gc.collect()
    counts0 = live()
    engine = Soak(seed)
    engine.run(warmup)
    gc.collect()
    rss0 = rss_kib()
    start = time.perf_counter()
    engine.run(warmup + exchanges)
    elapsed = time.perf_counter() - start
    gc.collect()
    rss1 = rss_kib()
    return {
        "exchanges": engine.exchanges - warmup,
        "legacy": engine.legacy,
        "versioned": engine.versioned,
        "writes": engine.writes,
        "origins_made": engine.origins_made,
        "origins_freed": engine.origins_freed,
        "rss_growth_kib": rss1 - rss0,
        "seconds": elapsed,
        "counts_before": counts0,
        "counts_after": live(),
    }


def check(figures, rss_limit_kib):
    assert figures["counts_after"] == figures["counts_before"], f"live counters did not return: {figures}"
    assert figures["origins_freed"] == figures["origins_made"], f"producers were not all released: {figures}"
    assert figures["legacy"] > 0 and figures["versioned"] > 0
    assert figures["rss_growth_kib"] < rss_limit_kib, f"resident memory grew: {figures}"


SOAK_EXCHANGES = int(os.environ.get("TACK_SOAK_EXCHANGES", "50000"))


def test_soak_mixed_exchanges():
    figures = soak(SOAK_EXCHANGES, seed=20240611)
    check(figures, rss_limit_kib=2048)


def test_soak_detects_a_leak():
    """The soak's own yardsticks notice a leak of one export per exchange:
    the same figures with the capsules kept alive are refused."""
    kept = []
    engine = Soak(seed=3)
    original = engine.unconsumed_export

    def leaky(chain):
        original(chain)
        arrays = [o for o in chain.objects if isinstance(o, tack.Array)]
        if arrays:
            kept.append(arrays[0].__dlpack__())

    engine.unconsumed_export = leaky
    counts0 = live()
    engine.run(2000)
    gc.collect()
    assert kept, "the leak was never exercised"
    figures = {"counts_before": counts0, "counts_after": live(), "origins_made": engine.origins_made,
               "origins_freed": engine.origins_freed, "legacy": 1, "versioned": 1, "rss_growth_kib": 0}
    with pytest.raises(AssertionError):
        check(figures, rss_limit_kib=2048)
    kept.clear()
    gc.collect()
    assert live() == counts0
