"""What a forked child does to the runtimes it inherits (no GPU): every runtime and its
execution contexts are closed without a driver call, the facade's usual path is off for
them (the driver's per-thread current context is copied into the child, so a check that
compares it would still pass), and a new session names the fork."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tenferro_cuda import runtime as runtime_module
from tenferro_cuda.errors import RuntimeStateError
from tenferro_cuda.runtime import CudaRuntime


@pytest.fixture
def inherited(monkeypatch):
    ctx = SimpleNamespace(closed=False, eager=True)
    rt = SimpleNamespace(pid=4242, closed=False, pool=SimpleNamespace(closed=False),
                         _contexts=[ctx])
    monkeypatch.setattr(CudaRuntime, "_registry", {0: rt})
    monkeypatch.setattr(runtime_module, "_forked_from", None)
    return rt, ctx


def test_the_child_closes_what_it_inherits(inherited):
    rt, ctx = inherited
    runtime_module._after_fork_in_child()
    assert rt.closed and rt.pool.closed
    assert ctx.closed and not ctx.eager  # the facade takes the checked path
    with pytest.raises(RuntimeStateError, match="fork") as info:
        CudaRuntime.get(0)
    assert "4242" in str(info.value)


def test_a_child_of_a_process_without_cuda_is_free(monkeypatch):
    monkeypatch.setattr(CudaRuntime, "_registry", {})
    monkeypatch.setattr(runtime_module, "_forked_from", None)
    runtime_module._after_fork_in_child()
    assert runtime_module._forked_from is None


def test_an_inherited_runtime_names_the_fork_and_a_closed_one_says_closed(inherited):
    """``check_alive`` asks the process id only once the runtime is closed: the fork
    hook closes what the child inherits, so the child still hears about the fork."""
    import os

    rt, _ = inherited
    rt.ordinal, rt.context_id = 0, 0x5000
    CudaRuntime.check_alive(rt, "add")  # (this process, open: nothing to say)
    runtime_module._after_fork_in_child()
    with pytest.raises(RuntimeStateError, match=r"process 4242 .*after fork\(\)"):
        CudaRuntime.check_alive(rt, "add")
    rt.pid = os.getpid()
    with pytest.raises(RuntimeStateError, match="is closed"):
        CudaRuntime.check_alive(rt, "add")
