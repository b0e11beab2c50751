"""A remembered library-load failure (cuBLAS or NCCL missing) is raised again as a fresh
copy holding no traceback: the frames a raised exception passes through, and their
locals (the caller's tensors), are not kept alive by the remembered error."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from reference.fake_context import FakeContext, HostMemory, host_upload
from reference.fake_sessions import Ctx, Session, install

from tenferro_cuda import _cublas, _nccl
from tenferro_cuda.collectives import Communicator
from tenferro_cuda.configs.dot import DotGeneralConfig
from tenferro_cuda.errors import BackendSourceError, UnsupportedError
from tenferro_cuda.exec.context import ExecContext
from tenferro_cuda.ops import dot


class _BlasCtx(FakeContext):
    """A FakeContext whose ``blas`` is ExecContext's own (cuBLAS made on first use)."""

    _blas = None
    blas = ExecContext.blas


def _tb_len(exc: BaseException) -> int:
    n, tb = 0, exc.__traceback__
    while tb is not None:
        n, tb = n + 1, tb.tb_next
    return n


@pytest.fixture
def no_cublas(monkeypatch):
    monkeypatch.setattr(_cublas, "_state", {})

    def missing():
        raise BackendSourceError("cuBLAS is unavailable: test", op="cublas")
    monkeypatch.setattr(_cublas, "_load_now", missing)


def _dot_without_cublas(ctx):
    """A user's function: it holds an input and an intermediate result while a float
    dot_general fails (cuBLAS missing), catches the error, and returns weak refs."""
    lhs = host_upload(ctx, np.ones((4, 4), np.float32))
    scratch = host_upload(ctx, np.zeros(1 << 16, np.uint8))  # some other live tensor
    refs = weakref.ref(lhs.buffer), weakref.ref(scratch.buffer)
    try:
        dot.dot_general(ctx, lhs, lhs, DotGeneralConfig((1,), (0,)))
    except BackendSourceError:
        pass
    return refs


def test_failed_dot_general_without_cublas_releases_the_callers_tensors(no_cublas):
    ctx = _BlasCtx(HostMemory(), None)
    refs = _dot_without_cublas(ctx)
    gc.collect()
    assert [r() for r in refs] == [None, None], (
        "the tensors of a frame the cuBLAS-missing error passed through are still alive "
        "after the caller dropped them: _cublas._state['error'] keeps the frames")


def test_remembered_cublas_error_does_not_grow_per_call(no_cublas):
    ctx = _BlasCtx(HostMemory(), None)
    for _ in range(3):
        _dot_without_cublas(ctx)
    first = _tb_len(_cublas._state["error"])
    for _ in range(50):
        _dot_without_cublas(ctx)
    assert _tb_len(_cublas._state["error"]) == first, (
        "the remembered cuBLAS failure's traceback grows with every failed op")


def test_failed_communicator_without_nccl_releases_the_callers_tensors(monkeypatch):
    install(monkeypatch)  # sessions of the fake context, the session type registered
    monkeypatch.setattr(_nccl, "_state", {})

    def missing():
        raise UnsupportedError("collectives need NCCL: test", op="nccl")
    monkeypatch.setattr(_nccl, "_load_now", missing)
    memory = HostMemory()
    sessions = [Session(Ctx(memory, 0)), Session(Ctx(memory, 1))]

    def user():
        grads = host_upload(sessions[0]._ctx, np.ones(1 << 16, np.float32))
        ref = weakref.ref(grads.buffer)
        try:
            Communicator.from_sessions(sessions)
        except UnsupportedError:
            pass  # "no NCCL here: run single-device"
        return ref

    ref = user()
    gc.collect()
    assert ref() is None, ("a tensor of the frame that caught the NCCL-missing error is "
                           "kept alive by _nccl._state['error']")
