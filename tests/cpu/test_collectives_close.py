"""A communicator whose close() fails part-way still releases every NCCL communicator it
owns (destroy, or abort), and raises the first error. Uses the ``two``/``nccl`` fixtures
of tests/cpu/conftest.py."""

from __future__ import annotations

import gc

import pytest

import tenferro_cuda as tc


def _released(lib, handles) -> set:
    return {args[0] for name, args in lib.log
            if name in ("comm_destroy", "comm_abort") and args and args[0] in handles}


def test_failed_finalize_in_close_still_releases_every_rank(two):
    comm, _, lib = two
    handles = list(comm._handles)
    lib.fail["comm_finalize"] = 3  # ncclInternalError on the first rank's finalize
    with pytest.raises(tc.BackendSourceError):
        comm.close()
    assert comm.closed
    del comm
    gc.collect()
    assert _released(lib, handles) == set(handles), (
        "close() raised on ncclCommFinalize and released no communicator: none was "
        "destroyed or aborted, and the finalizer that would abort them was detached")


def test_failed_destroy_of_one_rank_still_destroys_the_others(two):
    comm, _, lib = two
    handles = list(comm._handles)
    calls = []
    original = lib.comm_destroy

    def destroy(handle):
        calls.append(handle)
        if len(calls) == 1:
            raise lib.NCCLError(3)
        return original(handle)
    lib.comm_destroy = destroy
    with pytest.raises(tc.BackendSourceError):
        comm.close()
    del comm
    gc.collect()
    released = set(calls) | _released(lib, handles)
    assert released == set(handles), (
        "ncclCommDestroy failing for rank 0 left rank 1's communicator never destroyed")


def test_unclosed_communicator_is_aborted_without_the_cyclic_gc(nccl):
    from reference.fake_context import HostMemory
    from reference.fake_sessions import Ctx, Session

    lib = nccl
    memory = HostMemory()
    comm = tc.Communicator.from_sessions([Session(Ctx(memory, 0)), Session(Ctx(memory, 1))])
    handles = list(comm._handles)
    gc.disable()
    try:
        del comm
        assert _released(lib, handles) == set(handles)
    finally:
        gc.enable()
