"""Device blocks, pickle, copy, repr and element errors of device arrays,
against the simulated CUDA driver with two devices (cuda:0, cuda:1) beside
the CPU. Each case runs in a fresh interpreter, as in test_cuda.py.
"""

from cudasim import run


def test_a_block_makes_its_device_the_default_and_restores_the_previous_one(cuda_sim):
    run(cuda_sim, """
        cpu, c0, c1 = tack.device("cpu"), tack.device("cuda:0"), tack.device("cuda:1")
        assert tack.get_default_device() is cpu
        with tack.device("cuda:1") as d:
            assert d is c1 and tack.get_default_device() is c1
            a = tack.zeros(3)
            b = tack.array(np.arange(4, dtype=np.int32))
            e = tack.empty((2, 2), "float64")
            assert a.device is c1 and b.device is c1 and e.device is c1
            # An import without device= lands on the block's device when it can wrap it.
            host = tack.from_dlpack(np.zeros(2))
            assert host.device is cpu
            with tack.device("cuda:0"):
                assert tack.zeros(1).device is c0 and tack.get_default_device() is c0
                with cpu:
                    assert tack.zeros(1).device is cpu
                assert tack.get_default_device() is c0
            assert tack.get_default_device() is c1
        assert tack.get_default_device() is cpu and tack.zeros(1).device is cpu
        assert (b.to_numpy() == np.arange(4)).all()
    """, TACK_SIM_CUDA_DEVICES=2)


def test_an_exception_restores_the_previous_default(cuda_sim):
    run(cuda_sim, """
        cpu, c1 = tack.device("cpu"), tack.device("cuda:1")
        class Boom(Exception):
            pass
        try:
            with tack.device("cuda:0"):
                with c1:
                    raise Boom()
        except Boom:
            pass
        else:
            raise AssertionError("the exception was swallowed")
        assert tack.get_default_device() is cpu
        # The same device nested in itself ends once per block.
        with c1:
            with c1:
                pass
            assert tack.get_default_device() is c1
        assert tack.get_default_device() is cpu
    """, TACK_SIM_CUDA_DEVICES=2)


def test_leaving_blocks_out_of_order_is_refused_and_changes_nothing(cuda_sim):
    run(cuda_sim, """
        cpu, c0, c1 = tack.device("cpu"), tack.device("cuda:0"), tack.device("cuda:1")
        c0.__enter__()
        c1.__enter__()
        try:
            c0.__exit__(None, None, None)
        except RuntimeError as e:
            assert "innermost" in str(e), e
        else:
            raise AssertionError("an outer block was left first")
        assert tack.get_default_device() is c1
        assert c1.__exit__(None, None, None) is False and tack.get_default_device() is c0
        assert c0.__exit__(None, None, None) is False and tack.get_default_device() is cpu
    """, TACK_SIM_CUDA_DEVICES=2)


def test_blocks_are_per_thread(cuda_sim):
    run(cuda_sim, """
        cpu, c0, c1 = tack.device("cpu"), tack.device("cuda:0"), tack.device("cuda:1")
        seen = {}
        started, release = threading.Event(), threading.Event()
        def other():
            seen["start"] = tack.get_default_device()
            with c0:
                started.set()
                release.wait(30)
                seen["inside"] = tack.zeros(1).device
            seen["end"] = tack.get_default_device()
        with c1:
            t = threading.Thread(target=other)
            t.start()
            started.wait(30)
            # The other thread's block does not reach this one, nor this one that.
            assert tack.get_default_device() is c1 and tack.zeros(1).device is c1
            release.set()
            t.join()
        assert seen == {"start": cpu, "inside": c0, "end": cpu}, seen
        assert tack.get_default_device() is cpu
    """, TACK_SIM_CUDA_DEVICES=2)


def test_set_default_device_is_process_wide_and_a_block_wins_on_its_thread(cuda_sim):
    run(cuda_sim, """
        cpu, c0, c1 = tack.device("cpu"), tack.device("cuda:0"), tack.device("cuda:1")
        seen = {}
        with c1:
            assert tack.set_default_device("cuda:0") is c0
            # The block still decides on its own thread ...
            assert tack.get_default_device() is c1 and tack.zeros(1).device is c1
            # ... and the process-wide default is everyone else's at once.
            t = threading.Thread(target=lambda: seen.update(d=tack.get_default_device()))
            t.start(); t.join()
            assert seen["d"] is c0
        assert tack.get_default_device() is c0 and tack.zeros(1).device is c0
        tack.set_default_device(cpu)
        assert tack.get_default_device() is cpu
    """, TACK_SIM_CUDA_DEVICES=2)


def test_device_arrays_pickle_through_the_host_and_come_back_on_their_device(cuda_sim):
    run(cuda_sim, """
        import pickle
        values = np.arange(12, dtype=np.float32).reshape(3, 4)
        for name in ("cuda:0", "cuda:1"):
            a = tack.array(values, device=name)
            for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
                b = pickle.loads(pickle.dumps(a, protocol=protocol))
                assert b.device is a.device and b.ptr != a.ptr and b.writable
                assert (b.to_numpy() == values).all()
            # Out of band, the buffer is one host copy of the values.
            buffers = []
            data = pickle.dumps(a, protocol=5, buffer_callback=buffers.append)
            assert len(buffers) == 1 and bytes(buffers[0].raw()) == values.tobytes()
            b = pickle.loads(data, buffers=buffers)
            assert b.device is a.device and (b.to_numpy() == values).all()
        # Queued launches finish before the values are read.
        c = tack.zeros(4, device="cuda:1")
        c.fill(3)
        assert (pickle.loads(pickle.dumps(c)).to_numpy() == 3).all()
    """, TACK_SIM_CUDA_DEVICES=2)


def test_a_read_only_device_array_comes_back_read_only(cuda_sim):
    run(cuda_sim, """
        import pickle
        w = tack.array(np.arange(4, dtype=np.int32), device="cuda")
        ro = tack.array_from_ptr(w.ptr, "int32", 4, device="cuda")
        for protocol in (2, 5):
            b = pickle.loads(pickle.dumps(ro, protocol=protocol))
            assert not b.writable and b.device is ro.device and b.ptr != ro.ptr
            assert (b.to_numpy() == np.arange(4)).all()
            try:
                b.fill(1)
            except RuntimeError:
                pass
            else:
                raise AssertionError("a read-only array was written")
    """)


def test_a_device_array_without_its_device_is_a_clear_error_on_load(cuda_sim):
    data = run(cuda_sim, """
        import pickle
        print(pickle.dumps(tack.array(np.arange(3.0), device="cuda:1")).hex())
    """, TACK_SIM_CUDA_DEVICES=2).strip()
    run(cuda_sim, f"""
        import pickle
        try:
            pickle.loads(bytes.fromhex("{data}"))
        except RuntimeError as e:
            assert "no CUDA device 1" in str(e), e
        else:
            raise AssertionError("no error")
    """, TACK_SIM_CUDA_DEVICES=1)


def test_copies_stay_on_the_device(cuda_sim):
    run(cuda_sim, """
        import copy
        values = np.arange(6, dtype=np.float64)
        a = tack.array(values, device="cuda:1")
        for how in (copy.copy, copy.deepcopy):
            b = how(a)
            assert b.device is a.device and b.ptr != a.ptr and b.writable
            assert (b.to_numpy() == values).all()
            b.fill(0)
            assert (a.to_numpy() == values).all()
    """, TACK_SIM_CUDA_DEVICES=2)


def test_device_arrays_say_how_to_see_their_values(cuda_sim):
    run(cuda_sim, """
        a = tack.zeros((2, 3), device="cuda:1")
        text = repr(a)
        assert text == ("<tack.Array shape=(2, 3) dtype=float32 device='cuda:1': device memory; "
                        "a.to_numpy() copies the values to the host>"), text
        assert str(a) == text
        ro = tack.array_from_ptr(a.ptr, "float32", 6, device="cuda:1")
        assert "writable=False" in repr(ro)
        # Printing read nothing of the device's memory: no sync, no copy.
        assert stat("faults") == 0
    """, TACK_SIM_CUDA_DEVICES=2)


def test_device_element_access_names_to_numpy(cuda_sim):
    run(cuda_sim, """
        a = tack.zeros((2, 3), device="cuda")
        for action in (lambda: a[0], lambda: a[0:1], lambda: a[...], lambda: list(a), lambda: float(a),
                       lambda: int(a), lambda: 0 in a):
            try:
                action()
            except TypeError as e:
                text = str(e)
                assert "a.to_numpy()" in text and "cuda:0" in text and "no indexing or slicing" in text, text
            else:
                raise AssertionError("no error")
        for one in (a, tack.zeros((), device="cuda")):
            try:
                bool(one)
            except TypeError as e:
                assert "bool(a.to_numpy())" in str(e) and "cuda:0" in str(e), str(e)
            else:
                raise AssertionError("no error")
        assert stat("faults") == 0
    """)


def test_devices_pickle_by_name_but_not_an_adopted_context(cuda_sim):
    run(cuda_sim, """
        import pickle
        d = tack.device("cuda:1")
        assert pickle.loads(pickle.dumps(d)) is d
        ctx = ctypes.c_void_p()
        assert SIM.cuCtxCreate_v2(ctypes.byref(ctx), 0, 0) == 0
        adopted = tack.device("cuda:0")
        assert adopted.shares_external_context
        try:
            pickle.dumps(adopted)
        except TypeError as e:
            assert "context" in str(e), e
        else:
            raise AssertionError("an adopted context was pickled")
    """, TACK_SIM_CUDA_DEVICES=2)
