"""Modules a raw sub-session loads: a body that compiles the same source on every call
(the README's ``with_raw`` example compiles inside the body) loads it once; ``load_ptx``
and ``load_cubin`` load a module of their own on every call (its globals too), kept until
the runtime closes."""

from __future__ import annotations

import contextlib
import threading
from types import SimpleNamespace

from reference.fake_graph import FakeSession

from tenferro_cuda import _driver
from tenferro_cuda import raw as raw_module
from tenferro_cuda.authority import Scope
from tenferro_cuda.raw import RawSession
from tenferro_cuda.runtime import CudaRuntime

PTX = ".version 8.0\n.target sm_90\n.address_size 64\n"


def test_repeated_raw_bodies_do_not_accumulate_modules(monkeypatch):
    loaded = []
    monkeypatch.setattr(_driver, "module_load_data",
                        lambda image, op="": loaded.append(image) or object())
    monkeypatch.setattr(raw_module, "compile_cached",
                        lambda *a, **k: SimpleNamespace(image=b"cubin"))
    rt = object.__new__(CudaRuntime)
    rt._lock, rt._modules, rt._images, rt.closed = threading.RLock(), [], {}, False
    rt.current = contextlib.nullcontext
    rt.check_alive = lambda op="": None
    session = FakeSession()
    session._ctx.runtime = rt
    session._ctx.info = SimpleNamespace(arch=90)
    for _ in range(100):  # the README's with_raw body, called once per step
        scope = Scope("raw", session._scope)
        raw = RawSession._make(session, session._ctx, scope, "mylib.axpy")
        raw.compile_nvrtc("extern \"C\" __global__ void axpy() {}")
        raw.load_ptx(PTX)
        scope.end()
    # one for the 100 compiles of one source, one per explicit load_ptx
    assert len(rt._modules) == 101 and len(loaded) == 101, (
        f"{len(rt._modules)} CUmodules loaded by 100 raw scopes that each compiled one "
        "source and loaded one PTX image")
