"""Who keeps memory alive: deleter counts over drop orders and reshape
chains, exports outliving their arrays, and no growth over many cycles."""

import gc
import itertools
import sys
import threading
import weakref

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tack
from conftest import Producer, adopt, live_counts, sample

versions = pytest.mark.parametrize("versioned", [False, True], ids=["legacy", "versioned"])


def delta(before):
    now = live_counts()
    return {k: now[k] - before[k] for k in before}


def scribble(nbytes, times=20):
    """Allocate and overwrite memory, so freed memory read later would show."""
    junk = [tack.zeros(nbytes, tack.u8) for _ in range(times)]
    for j in junk:
        j.fill(0xEE)
    return junk


# --------------------------------------------------------------------------
# imports: the producer's deleter runs once, when the last array goes


@versions
def test_every_drop_order_of_capsule_and_views(probe, versioned):
    for order in itertools.permutations(["capsule", "a", "b", "c"]):
        t = probe.tensor(versioned=versioned, shape=(2, 6))
        held = {"capsule": t.capsule()}
        held["a"] = tack.from_dlpack(held["capsule"])
        held["b"] = held["a"].reshape(3, 4)
        held["c"] = held["b"].reshape(-1)
        assert held["c"].ptr == t.data
        arrays_left = {"a", "b", "c"}
        for name in order:
            del held[name]
            arrays_left.discard(name)
            expected = 0 if arrays_left else 1
            assert t.deleter_calls == expected, f"order {order}: after dropping {name}"
            for rest in arrays_left:  # the survivors still read the memory
                np.testing.assert_array_equal(held[rest].to_numpy().ravel(), t.expected("float32").ravel())
        assert t.deleter_calls == 1


@settings(max_examples=60, deadline=None, database=None)
@given(data=st.data())
def test_random_reshape_trees_and_drop_orders(probe, data):
    shapes = [(24,), (2, 12), (4, 6), (2, 3, 4), (-1,), (3, -1), (1, 24, 1)]
    t = probe.tensor(shape=(24,), dtype=(1, 16, 1), versioned=data.draw(st.booleans()))
    capsule = t.capsule()
    arrays = [tack.from_dlpack(capsule)]
    parent = None
    for _ in range(data.draw(st.integers(0, 8))):
        parent = arrays[data.draw(st.integers(0, len(arrays) - 1))]
        arrays.append(parent.reshape(*data.draw(st.sampled_from(shapes))))
    if data.draw(st.booleans()):
        del capsule
    order = data.draw(st.permutations(range(len(arrays))))
    slots = dict(enumerate(arrays))
    del arrays, parent
    for index in order:
        assert t.deleter_calls == 0
        assert slots[index].ptr == t.data
        del slots[index]
    assert t.deleter_calls == 1


@versions
def test_source_object_dropped_first(probe, versioned):
    t = probe.tensor(versioned=versioned)
    producer = Producer(lambda **kw: t.capsule())
    a = tack.from_dlpack(producer)
    del producer
    gc.collect()
    assert t.deleter_calls == 0
    np.testing.assert_array_equal(a.to_numpy(), t.expected("float32"))
    del a
    assert t.deleter_calls == 1


def test_import_dropped_on_another_thread(probe):
    t = probe.tensor(shape=(8,))
    a = tack.from_dlpack(t.capsule())
    views = [a.reshape(2, 4), a.reshape(4, 2)]
    del a
    holder = [views]
    del views
    worker = threading.Thread(target=holder.clear)
    worker.start()
    worker.join()
    assert t.deleter_calls == 1


def test_numpy_source_released_with_the_last_view():
    n = sample("float32", (4, 5))
    ref = weakref.ref(n)
    a = tack.from_dlpack(n)
    del n
    gc.collect()
    assert ref() is not None, "the NumPy array went while Tack still uses its memory"
    views = [a.reshape(20), a.reshape(2, 10).reshape(5, 4)]
    del a
    np.testing.assert_array_equal(views[1].to_numpy().ravel(), sample("float32", (20,)))
    views.pop(0)
    assert ref() is not None
    views.pop()
    assert ref() is None, "NumPy's deleter was not called when the last array went"


@pytest.mark.parametrize("via", ["tensor", "dunder"])
def test_torch_source_released_with_the_last_view(via):
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    backing = sample("int64", (6,))
    ref = weakref.ref(backing)
    t = torch.from_numpy(backing)  # the tensor's storage holds `backing`
    # a bare tensor may go through PyTorch's C exchange table, a capsule
    # always through __dlpack__
    a = tack.from_dlpack(t if via == "tensor" else t.__dlpack__(max_version=(1, 0)))
    assert a.ptr == backing.ctypes.data
    del t, backing
    gc.collect()
    assert ref() is not None, "the tensor's memory went while Tack still uses it"
    v = a.reshape(2, 3)
    del a
    np.testing.assert_array_equal(v.to_numpy().ravel(), sample("int64", (6,)))
    del v
    assert ref() is None, "PyTorch's deleter was not called when the last array went"


# --------------------------------------------------------------------------
# exports: Tack pins the array until the consumer's deleter runs


def test_numpy_keeps_an_exported_array_alive():
    before = live_counts()
    a = tack.array(sample("float64", (64,)))
    address = a.ptr
    n = np.from_dlpack(a)
    assert delta(before)["exports"] == 1
    del a
    gc.collect()
    junk = scribble(64 * 8)
    assert n.ctypes.data == address
    np.testing.assert_array_equal(n, sample("float64", (64,)))
    assert delta(before)["arrays"] >= 1 + len(junk)
    del junk
    del n
    assert delta(before) == {"arrays": 0, "buffers": 0, "exports": 0}


def test_torch_keeps_an_exported_array_alive():
    torch = pytest.importorskip("torch", reason="PyTorch is not installed")
    before = live_counts()
    a = tack.array(sample("int32", (32,)))
    t = torch.from_dlpack(a.reshape(4, 8))
    del a
    gc.collect()
    junk = scribble(32 * 4)
    assert torch.equal(t.reshape(-1), torch.from_numpy(sample("int32", (32,))))
    assert delta(before)["exports"] == 1
    del junk, t
    assert delta(before) == {"arrays": 0, "buffers": 0, "exports": 0}


def test_tack_import_of_tack_export():
    before = live_counts()
    a = tack.array(sample("uint16", (10,)))
    b = tack.from_dlpack(a).reshape(2, 5)
    del a
    gc.collect()
    junk = scribble(20)
    np.testing.assert_array_equal(b.to_numpy().ravel(), sample("uint16", (10,)))
    assert delta(before)["exports"] == 1
    del junk, b
    assert delta(before) == {"arrays": 0, "buffers": 0, "exports": 0}


@pytest.mark.parametrize("max_version", [None, (1, 0)], ids=["legacy", "versioned"])
def test_unadopted_capsule_releases_the_array(max_version):
    before = live_counts()
    a = tack.zeros(16)
    capsule = a.__dlpack__(max_version=max_version)
    del a
    gc.collect()
    assert delta(before)["exports"] == 1
    assert delta(before)["arrays"] >= 1
    del capsule
    assert delta(before) == {"arrays": 0, "buffers": 0, "exports": 0}


def test_unadopted_capsule_in_a_reference_cycle():
    before = live_counts()
    cycle = [tack.zeros(4).__dlpack__(), tack.zeros(4).__dlpack__(max_version=(1, 0))]
    cycle.append(cycle)
    del cycle
    gc.collect()
    assert delta(before) == {"arrays": 0, "buffers": 0, "exports": 0}


def test_many_exports_of_one_array():
    before = live_counts()
    a = tack.array(np.arange(8, dtype=np.float32))
    consumers = [np.from_dlpack(a) for _ in range(10)] + [tack.from_dlpack(a) for _ in range(10)]
    assert delta(before)["exports"] == 20
    del a
    for c in consumers:
        assert (c.ctypes.data if isinstance(c, np.ndarray) else c.ptr) == consumers[0].ctypes.data
    del c
    while consumers:
        consumers.pop(len(consumers) // 2)
        assert delta(before)["exports"] == len(consumers)
    assert delta(before) == {"arrays": 0, "buffers": 0, "exports": 0}


def test_consumer_released_on_another_thread():
    before = live_counts()
    holder = [np.from_dlpack(tack.zeros(1000)) for _ in range(50)]
    workers = [threading.Thread(target=lambda part=holder[i::5]: part.clear()) for i in range(5)]
    del holder
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert delta(before) == {"arrays": 0, "buffers": 0, "exports": 0}


@versions
def test_export_released_on_a_thread_without_python(probe, versioned):
    # A C consumer may call the deleter from a thread that never held the GIL.
    before = live_counts()
    a = tack.array(sample("float32", (8,)))
    capsule = a.__dlpack__(max_version=(1, 0) if versioned else None)
    address, kind = adopt(probe, capsule)
    del a, capsule
    assert delta(before)["exports"] == 1
    assert probe.lib.probe_release_on_thread(address, kind) == 0
    assert delta(before) == {"arrays": 0, "buffers": 0, "exports": 0}


def test_concurrent_exchanges_on_threads():
    before = live_counts()
    shared = tack.array(np.arange(1000, dtype=np.float64))
    errors = []

    def work():
        try:
            for _ in range(1500):
                n = np.from_dlpack(shared)
                b = tack.from_dlpack(n).reshape(10, 100)
                assert b.ptr == shared.ptr
                del n
                c = tack.from_dlpack(b.__dlpack__(max_version=(1, 0)))
                del b
                assert c.to_numpy()[9, 99] == 999
        except BaseException as exc:  # reported below, from the main thread
            errors.append(exc)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors, errors[0]
    del shared
    assert delta(before) == {"arrays": 0, "buffers": 0, "exports": 0}


def test_export_after_import_keeps_the_producer_alive(probe):
    t = probe.tensor(shape=(6,))
    a = tack.from_dlpack(t.capsule())
    n = np.from_dlpack(a.reshape(2, 3))
    del a
    assert t.deleter_calls == 0
    np.testing.assert_array_equal(n.ravel(), t.expected("float32"))
    del n
    assert t.deleter_calls == 1


# --------------------------------------------------------------------------
# no growth


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    pytest.skip("no /proc/self/status")


def test_export_import_cycles_do_not_grow():
    a = tack.zeros(256)
    t = None
    try:
        import torch

        t = torch.zeros(256)
    except ImportError:
        pass

    def cycle(count):
        for _ in range(count):
            tack.from_dlpack(np.from_dlpack(a))
            np.from_dlpack(tack.from_dlpack(np.from_dlpack(a)))
            if t is not None:
                tack.from_dlpack(t)

    cycle(2000)  # warm up caches and allocator pools
    gc.collect()
    before_counts = live_counts()
    before = rss_kib()
    cycle(20000)
    growth = rss_kib() - before
    assert live_counts() == before_counts
    assert growth < 1024, f"resident memory grew {growth} KiB over 20000 cycles"
