"""NVTX instrumentation and the host-sync debug switch (no GPU needed)."""

from __future__ import annotations

import pytest

import tenferro_cuda as tc
from tenferro_cuda import _driver, nvtx
from tenferro_cuda.debug import allow_host_sync, forbid_host_sync


class _Ops:
    def add(self, x):
        return x + 1

    def fails(self):
        raise KeyError("inner")

    def _private(self):
        return "untouched"


def test_instrument_wraps_public_methods_in_balanced_ranges():
    events = []
    cls = nvtx.instrument(type("Ops", (_Ops,), {}),
                          backend=(lambda name: events.append(("push", name)),
                                   lambda: events.append(("pop",))))
    obj = cls()
    assert obj.add(1) == 2
    with pytest.raises(KeyError):
        obj.fails()
    assert obj._private() == "untouched"
    assert events == [("push", "tenferro.add"), ("pop",), ("push", "tenferro.fails"), ("pop",)]


def test_instrument_without_backend_warns_and_leaves_class(monkeypatch):
    monkeypatch.setattr(nvtx, "_backend", lambda: None)
    cls = type("Ops", (_Ops,), {})
    with pytest.warns(RuntimeWarning, match="no ranges"):
        assert nvtx.instrument(cls) is cls
    assert cls.add is _Ops.add


def test_enabled_reads_the_environment(monkeypatch):
    monkeypatch.setenv("TENFERRO_CUDA_NVTX", "1")
    assert nvtx.enabled()
    monkeypatch.setenv("TENFERRO_CUDA_NVTX", "0")
    assert not nvtx.enabled()


def test_forbid_host_sync_raises_outside_barriers():
    with forbid_host_sync():
        with pytest.raises(tc.RuntimeStateError, match="host synchronization"):
            _driver.guard_blocking("cuStreamSynchronize", "some_op")
        with allow_host_sync():
            _driver.guard_blocking("cuStreamSynchronize", "synchronize")  # a barrier
    _driver.guard_blocking("cuStreamSynchronize", "some_op")  # switch off again
