"""The calling thread's CUDA context stack, read and changed with the driver's own calls
(independently of the library's guard), and the contexts the context-stack tests push:
``from context_util import stack, push, pop, clear``; the fixtures ``contexts`` and
``empty_stack`` are the GPU tier's (``conftest.py``)."""

from __future__ import annotations

import pytest
from cuda.bindings import driver as d

from tenferro_cuda.runtime import CudaRuntime

__all__ = ["stack", "clear", "push", "pop", "set_current", "contexts", "empty_stack"]


def _ok(result):
    assert int(result[0]) == 0, result[0]
    return result[1] if len(result) > 1 else None


def stack() -> list[int]:
    """The calling thread's context stack, bottom to top (left as it was)."""
    taken = []
    while int(_ok(d.cuCtxGetCurrent())):
        taken.append(_ok(d.cuCtxPopCurrent()))
    taken.reverse()
    for ctx in taken:
        _ok(d.cuCtxPushCurrent(ctx))
    return [int(c) for c in taken]


def clear() -> None:
    while int(_ok(d.cuCtxGetCurrent())):
        _ok(d.cuCtxPopCurrent())


def push(ctx) -> None:
    _ok(d.cuCtxPushCurrent(ctx))


def pop() -> None:
    _ok(d.cuCtxPopCurrent())


def set_current(ctx) -> None:
    _ok(d.cuCtxSetCurrent(ctx))


@pytest.fixture(scope="module")
def contexts():
    """(primary, foreign A, foreign B): two cuCtxCreate contexts, not current."""
    _ok(d.cuInit(0))
    dev = _ok(d.cuDeviceGet(0))
    primary = CudaRuntime.get(0).context
    made = []
    for _ in range(2):
        ctx = _ok(d.cuCtxCreate(None, 0, dev))
        pop()
        made.append(ctx)
    yield primary, made[0], made[1]
    clear()
    for ctx in made:
        _ok(d.cuCtxDestroy(ctx))


@pytest.fixture
def empty_stack():
    """Each test starts and ends with an empty context stack."""
    clear()
    yield
    clear()
