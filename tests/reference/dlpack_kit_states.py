"""What the CPU tests of the export's kit share (``test_dlpack_kit.py`` and
``test_dlpack_kit_ordered.py``): a fake context that counts the full path's liveness
checks, the helpers that make a kit and read a capsule, and the states a kit must step
aside in."""

from __future__ import annotations

import gc

import numpy as np

from tenferro_cuda import _dlpack_export, _driver, dlpack
from tenferro_cuda.errors import RuntimeStateError

from .dlpack_fakes import CONTEXT_ID, Interop

__all__ = ["STATES", "TENSORS", "counting", "fields", "kitted"]


# the tensors both files export (name -> maker over an ``Interop``)
TENSORS = {
    "matrix": lambda fx: fx.tensor(np.arange(12.0).reshape(3, 4)),
    "scalar": lambda fx: fx.tensor(np.array(7, np.int32)),
    "empty": lambda fx: fx.tensor(np.zeros((0, 3), np.float32)),
    "reversed view": lambda fx: fx.tensor(np.arange(24.0).reshape(4, 6))[::-1, 1::2],
}


def counting(monkeypatch) -> Interop:
    """An ``Interop`` whose ``alive_checks`` counts the runtime checks: the full path
    asks, a kit does not."""
    fx = Interop(monkeypatch)
    fx.alive_checks = 0  # type: ignore[attr-defined]

    def check_alive(op):
        fx.alive_checks += 1  # type: ignore[attr-defined]

    fx.runtime.check_alive = check_alive
    return fx


def fields(capsule):
    """What a consumer reads of a capsule, the block address left out."""
    info = dlpack.parse_capsule(capsule)
    return info._replace(managed=0)


def kitted(t, stream, max_version):
    """Export twice (the second leaves the kit) and drop both."""
    for _ in range(2):
        t.__dlpack__(stream=stream, max_version=max_version)
    gc.collect()
    kit = t._kit
    assert type(kit) is _dlpack_export._Kit and kit.asked is max_version
    return kit


def _closed(fx, t):
    fx.runtime.closed = True

    def refuse(op):
        fx.alive_checks += 1
        raise RuntimeStateError("the runtime of device 0 is closed", op=op)

    fx.runtime.check_alive = refuse


class _Capture:
    def refuse(self, op):
        raise RuntimeStateError(f"{op} is not allowed during capture", op=op)


def _capturing(fx, t):
    fx.capture = _Capture()


def _lost(fx, t):
    _driver.lost_contexts.add(CONTEXT_ID)


def _reclaimed(fx, t):
    t.base.buffer.release()


# (what changes, the error the full path raises then, how many times it asks check_alive)
STATES = {
    "runtime closed": (_closed, RuntimeStateError, "closed", 1),
    "capturing": (_capturing, RuntimeStateError, "during capture", 1),
    "context lost": (_lost, None, None, 1),
    "reclaimed": (_reclaimed, RuntimeStateError, "reclaimed", 0),
}
