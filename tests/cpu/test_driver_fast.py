"""The hot driver calls (``_driver_fast``): which bindings they use, the legacy module's
wrappers in the same calling convention, the typed errors of a failed ordering, and the
op entry's test of the current context (a failed call reads as no context)."""

from __future__ import annotations

import importlib
import sys
import types
from types import SimpleNamespace

import pytest

from tenferro_cuda import _driver_fast
from tenferro_cuda.errors import BackendSourceError, ContextLostError
from tenferro_cuda.exec import entry


def _has_v2() -> bool:
    try:
        from cuda.bindings._v2 import driver  # noqa: F401
    except ImportError:
        return False
    return True


def test_the_bindings_in_use_are_the_v2_module_when_it_is_there():
    want = "cuda.bindings._v2.driver" if _has_v2() else "cuda.bindings.driver"
    assert _driver_fast.BINDINGS == want
    if _has_v2():
        from cuda.bindings._v2 import driver as v2

        assert _driver_fast.launch is v2.launch_kernel
        assert _driver_fast.handle is int
        assert _driver_fast.current is v2.ctx_get_current
        assert _driver_fast.Failure is v2.DriverError
    else:
        assert _driver_fast.launch is _driver_fast._legacy_launch


def test_the_environment_turns_the_v2_module_off(monkeypatch):
    monkeypatch.setenv("TENFERRO_CUDA_DRIVER_BINDINGS", "legacy")
    assert _driver_fast._v2_module() is None


def test_a_v2_module_without_one_of_the_calls_is_not_used(monkeypatch):
    calls = {name: (lambda *a: None) for name in _driver_fast.V2_CALLS}
    full = types.ModuleType("cuda.bindings._v2")
    full.driver = SimpleNamespace(DriverError=type("DriverError", (Exception,), {}),
                                  **calls)  # type: ignore[attr-defined]
    monkeypatch.delenv("TENFERRO_CUDA_DRIVER_BINDINGS", raising=False)
    monkeypatch.setitem(sys.modules, "cuda.bindings._v2", full)
    assert _driver_fast._v2_module() is full.driver  # type: ignore[attr-defined]
    for missing in _driver_fast.V2_CALLS:
        part = types.ModuleType("cuda.bindings._v2")
        part.driver = SimpleNamespace(  # type: ignore[attr-defined]
            DriverError=Exception, **{k: v for k, v in calls.items() if k != missing})
        monkeypatch.setitem(sys.modules, "cuda.bindings._v2", part)
        assert _driver_fast._v2_module() is None, missing
    odd = types.ModuleType("cuda.bindings._v2")
    odd.driver = SimpleNamespace(DriverError="not a class", **calls)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "cuda.bindings._v2", odd)
    assert _driver_fast._v2_module() is None


def test_the_module_falls_back_to_the_legacy_calls(monkeypatch):
    """Reloaded with the v2 module turned off, every name is the legacy wrapper."""
    monkeypatch.setenv("TENFERRO_CUDA_DRIVER_BINDINGS", "legacy")
    try:
        legacy = importlib.reload(_driver_fast)
        assert legacy.BINDINGS == "cuda.bindings.driver"
        assert legacy.Failure is legacy.LegacyFailure
        assert legacy.launch is legacy._legacy_launch
        assert legacy.handle is legacy._same  # the legacy module takes its own objects
        assert legacy.current is legacy._legacy_current
        assert legacy.order is legacy._legacy_order
    finally:
        monkeypatch.delenv("TENFERRO_CUDA_DRIVER_BINDINGS")
        importlib.reload(_driver_fast)


class _LegacyDriver:
    """The legacy calls the wrappers make: ``(status, *values)`` tuples, recorded."""

    from cuda.bindings.driver import CUresult  # (error messages name the status)

    def __init__(self, status: int = 0) -> None:
        self.status = status
        self.calls: list[tuple] = []

    def cuLaunchKernel(self, *args):
        self.calls.append(("launch", args))
        return (self.status,)

    def cuCtxGetCurrent(self):
        return (self.status, 0x5000 if not self.status else None)

    def cuEventRecord(self, event, stream):
        self.calls.append(("record", event, stream))
        return (self.status,)

    def cuStreamWaitEvent(self, stream, event, flags):
        self.calls.append(("wait", stream, event, flags))
        return (0,)


def test_legacy_launch_passes_every_argument_and_raises_the_status(monkeypatch):
    fake = _LegacyDriver()
    monkeypatch.setattr(_driver_fast, "_d", fake)
    args = (11, 2, 3, 4, 32, 1, 1, 128, 77, 0x1000, 0)
    assert _driver_fast._legacy_launch(*args) is None
    assert fake.calls == [("launch", args)]
    fake.status = 701
    with pytest.raises(_driver_fast.LegacyFailure) as info:
        _driver_fast._legacy_launch(*args)
    assert info.value.status == 701


def test_legacy_current_gives_an_int_or_raises(monkeypatch):
    fake = _LegacyDriver()
    monkeypatch.setattr(_driver_fast, "_d", fake)
    assert _driver_fast._legacy_current() == 0x5000
    fake.status = 4
    with pytest.raises(_driver_fast.LegacyFailure) as info:
        _driver_fast._legacy_current()
    assert info.value.status == 4


@pytest.mark.parametrize("status, kind", [(1, BackendSourceError), (700, ContextLostError)])
def test_legacy_order_records_then_waits_and_raises_typed_errors(monkeypatch, status, kind):
    fake = _LegacyDriver()
    from tenferro_cuda import _driver

    monkeypatch.setattr(_driver, "_d", fake)  # the legacy order makes _driver's checked calls
    monkeypatch.setattr(_driver, "event_record", _driver._checked("cuEventRecord"))
    monkeypatch.setattr("tenferro_cuda._driver._mark_current_lost", lambda: None)
    _driver_fast._legacy_order("ev", "producer", "waiter")
    assert fake.calls == [("record", "ev", "producer"), ("wait", "waiter", "ev", 0)]
    fake.status = status
    with pytest.raises(kind, match="cuEventRecord"):
        _driver_fast._legacy_order("ev", "producer", "waiter")


@pytest.mark.skipif(not _has_v2(), reason="cuda.bindings._v2 is not installed")
@pytest.mark.parametrize("failing, api", [("_record", "cuEventRecord"),
                                          ("_wait", "cuStreamWaitEvent")])
def test_v2_order_takes_integer_handles_and_raises_typed_errors(monkeypatch, failing, api):
    seen: list[tuple] = []
    monkeypatch.setattr(_driver_fast, "_record", lambda e, s: seen.append(("record", e, s)))
    monkeypatch.setattr(_driver_fast, "_wait", lambda s, e, f: seen.append(("wait", s, e, f)))

    class Handle:  # a binding handle object: int() gives its address
        def __init__(self, value: int) -> None:
            self.value = value

        def __int__(self) -> int:
            return self.value

    _driver_fast.order(Handle(5), Handle(7), 9)
    assert seen == [("record", 5, 7), ("wait", 9, 5, 0)]

    def refuse(*args):
        raise _driver_fast.Failure(1)

    monkeypatch.setattr(_driver_fast, failing, refuse)
    with pytest.raises(BackendSourceError, match=api):
        _driver_fast.order(1, 2, 3)


# --- the op entry's test of the current context --------------------------------------------

def _session(context_id: int):
    import threading

    ctx = SimpleNamespace(thread=threading.get_ident(), eager=True, context_id=context_id)
    return SimpleNamespace(_ctx=ctx, _scope=SimpleNamespace(alive=True))


def _method(monkeypatch):
    taken: list[str] = []

    def impl(ctx, x):
        taken.append("fast")
        return x

    def enter(session, op, fn, args):
        taken.append("enter")
        return args[0]

    monkeypatch.setattr(entry, "enter", enter)  # op_method binds the slow path it finds
    monkeypatch.setattr(entry, "OUTPUTS", {})
    return entry.op_method("probe", impl), taken


@pytest.mark.parametrize("current, path", [(0x5000, "fast"), (0x6000, "enter"), (0, "enter"),
                                           ("fails", "enter")])
def test_the_op_entry_runs_the_op_only_with_our_context_current(monkeypatch, current, path):
    method, taken = _method(monkeypatch)

    def now():
        if current == "fails":
            raise _driver_fast.Failure(4)  # CUDA_ERROR_DEINITIALIZED: reads as no context
        return current

    monkeypatch.setitem(entry.SHARED, "_current", now)
    assert method(_session(0x5000), 42) == 42
    assert taken == [path]


def test_the_op_entry_refuses_a_lost_context(monkeypatch):
    method, taken = _method(monkeypatch)
    monkeypatch.setitem(entry.SHARED, "_current", lambda: 0x5000)
    monkeypatch.setitem(entry.SHARED, "_lost", {0x5000})
    method(_session(0x5000), 1)
    assert taken == ["enter"]


def test_legacy_pointer_ordinal_gives_the_ordinal_or_a_typed_error(monkeypatch):
    class Driver:
        CUpointer_attribute = SimpleNamespace(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL=9)
        status = 0

        def cuPointerGetAttribute(self, attribute, address):
            assert attribute == 9 and address == 0x7000
            return (self.status, 3)

    fake = Driver()
    monkeypatch.setattr(_driver_fast, "_d", fake)
    assert _driver_fast._legacy_pointer_ordinal(0x7000) == 3
    fake.status = 1  # CUDA_ERROR_INVALID_VALUE: host memory the driver does not know
    with pytest.raises(BackendSourceError, match="cuPointerGetAttribute"):
        _driver_fast._legacy_pointer_ordinal(0x7000)


@pytest.mark.skipif(not _has_v2(), reason="cuda.bindings._v2 is not installed")
def test_v2_pointer_ordinal_asks_for_the_device_ordinal(monkeypatch):
    seen: list[tuple] = []
    monkeypatch.setattr(_driver_fast, "_attribute", lambda a, p: seen.append((a, p)) or 2)
    assert _driver_fast.pointer_ordinal(0x7000) == 2
    assert seen == [(_driver_fast.DEVICE_ORDINAL, 0x7000)]

    def refuse(*args):
        raise _driver_fast.Failure(1)

    monkeypatch.setattr(_driver_fast, "_attribute", refuse)
    with pytest.raises(BackendSourceError, match="cuPointerGetAttribute"):
        _driver_fast.pointer_ordinal(0x7000)


@pytest.mark.skipif(not _has_v2(), reason="cuda.bindings._v2 is not installed")
def test_v2_current_id_gives_the_context_or_a_typed_error(monkeypatch):
    """The guard's question: the current context as an int, and a failed call as the
    typed error that names the API (a sticky status marks the context lost)."""
    from tenferro_cuda.exec import guard

    # (an earlier test reloads _driver_fast: compare by name, not identity)
    assert (guard.current_id.__module__, guard.current_id.__name__) == \
        (_driver_fast.__name__, "current_id")
    monkeypatch.setattr(_driver_fast, "current", lambda: 0x5000)
    assert _driver_fast.current_id() == 0x5000
    monkeypatch.setattr(_driver_fast, "current", lambda: 0)
    assert _driver_fast.current_id() == 0

    def fails(status):
        def call():
            raise _driver_fast.Failure(status)
        return call

    monkeypatch.setattr(_driver_fast, "current", fails(201))  # CUDA_ERROR_INVALID_CONTEXT
    with pytest.raises(BackendSourceError, match="cuCtxGetCurrent"):
        _driver_fast.current_id()
    monkeypatch.setattr(_driver_fast._driver, "_mark_current_lost", lambda: None)
    monkeypatch.setattr(_driver_fast, "current", fails(700))  # CUDA_ERROR_ILLEGAL_ADDRESS
    with pytest.raises(ContextLostError):
        _driver_fast.current_id()
