"""The harness of the op-argument tests: the real session facade over the emulated device
of tests/gpu/test_elementwise_emu.py, with every way to device work recorded.

``armed(session)`` is a context manager: while armed, any allocation, copy, memset,
upload, download or launch is recorded and raises ``Reached`` -- so a bad argument that
is not rejected before device work shows up as ``Reached`` (not a TenferroError), and a
typed error raised while armed proves nothing was allocated, written or launched.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from test_elementwise_emu import emulated_session, put

from tenferro_cuda.errors import TenferroError
from tenferro_cuda.kernels import launch as launch_mod


class Reached(Exception):
    """A bad argument got past validation to device work."""


class Harness:
    def __init__(self, monkeypatch) -> None:
        self.s, self.dev, self.ctx = emulated_session(monkeypatch)
        self.reached: list[tuple] = []
        self.on = False
        ctx = self.ctx
        for name in ("alloc", "alloc_bytes", "copy", "memset", "upload", "download",
                     "launch", "adopt"):
            monkeypatch.setattr(ctx, name, self._wrap(name, getattr(ctx, name)))
        monkeypatch.setattr(ctx.home, "alloc", self._wrap("home.alloc", ctx.home.alloc))
        monkeypatch.setattr(launch_mod, "_launch", self._wrap("cuLaunchKernel",
                                                              launch_mod._launch))
        monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions

    def _wrap(self, name, fn):
        def recorder(*args, **kwargs):
            if self.on:
                self.reached.append((name, args[:3]))
                raise Reached(f"{name}{args[:3]!r}")
            return fn(*args, **kwargs)
        return recorder

    @contextlib.contextmanager
    def armed(self):
        self.reached.clear()
        self.on = True
        try:
            yield
        finally:
            self.on = False

    def rejects(self, call, op: str, cls: type = TenferroError, kind: str | None = None):
        """``call()`` raises ``cls`` (a TenferroError) naming ``op`` before any device work."""
        with self.armed():
            with pytest.raises(cls) as info:
                call()
        assert not self.reached, f"device work before the error: {self.reached}"
        err = info.value
        assert isinstance(err, TenferroError)
        assert err.op == op, f"op={err.op!r}, expected {op!r} ({err!r})"
        if kind is not None:
            assert err.kind == kind, repr(err)
        return err

    def put(self, array):
        return put(self.s, np.asarray(array))
