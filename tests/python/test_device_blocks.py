"""`with tack.device(...) as d:` on the CPU backend alone: the block's
protocol and its refusals. The cases that need a second device to tell the
defaults apart (cuda:0, cuda:1 and cpu, on the simulated CUDA driver) are
in test_cuda_ecosystem.py.
"""

import threading

import pytest

import tack


def test_the_block_gives_the_device_and_makes_it_the_default():
    cpu = tack.device("cpu")
    with cpu as d:
        assert d is cpu
        assert tack.get_default_device() is cpu
        assert tack.zeros(2).device is cpu
    assert tack.get_default_device() is cpu


def test_an_exception_ends_the_block_and_passes_through():
    cpu = tack.device("cpu")
    with pytest.raises(KeyError, match="inside"):
        with cpu:
            raise KeyError("inside")
    # The block ended: there is no block left to leave.
    with pytest.raises(RuntimeError, match="innermost"):
        cpu.__exit__(None, None, None)


def test_blocks_nest_and_end_one_by_one():
    cpu = tack.device("cpu")
    with cpu:
        with cpu:
            with tack.device("cpu") as inner:
                assert inner is cpu
        assert cpu.__exit__(None, None, None) is False  # the outer block, ended by hand
        cpu.__enter__()  # so that the with statement has one to end
    with pytest.raises(RuntimeError):
        cpu.__exit__(None, None, None)


def test_leaving_a_block_that_was_never_entered_is_refused_and_changes_nothing():
    cpu = tack.device("cpu")
    with pytest.raises(RuntimeError, match="innermost"):
        cpu.__exit__(None, None, None)
    cpu.__enter__()
    try:
        with pytest.raises(TypeError, match="3 arguments"):
            cpu.__exit__(None)
    finally:
        # The refused call left the block in place: it ends once, here.
        assert cpu.__exit__(None, None, None) is False
    with pytest.raises(RuntimeError):
        cpu.__exit__(None, None, None)


def test_a_block_belongs_to_the_thread_that_began_it():
    cpu = tack.device("cpu")
    seen = {}

    def other():
        try:
            cpu.__exit__(None, None, None)
        except RuntimeError as exc:
            seen["refused"] = str(exc)
        with cpu as d:
            seen["inside"] = d

    with cpu:
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert "thread" in seen["refused"] and seen["inside"] is cpu
    with pytest.raises(RuntimeError):
        cpu.__exit__(None, None, None)


def test_set_default_device_inside_a_block_keeps_its_meaning(restore_default_device):
    cpu = tack.device("cpu")
    with cpu:
        assert tack.set_default_device("cpu") is cpu
        assert tack.get_default_device() is cpu
    assert tack.get_default_device() is cpu
