"""Optional NVTX ranges around every public session method.

Off unless ``TENFERRO_CUDA_NVTX=1`` is set when tenferro_cuda's session module is first
imported; then each public method of the session is wrapped in a range named
``tenferro.<method>``. Ranges go through the ``nvtx`` Python package when it is installed,
else through ``libnvToolsExt.so.1`` via ctypes; with neither, one warning is given and no
ranges are emitted. When off, nothing is wrapped and ops cost nothing extra.
"""

from __future__ import annotations

import ctypes
import functools
import os
import warnings
from collections.abc import Callable


def enabled() -> bool:
    return os.environ.get("TENFERRO_CUDA_NVTX", "") not in ("", "0")


def _backend() -> tuple[Callable[[str], object], Callable[[], object]] | None:
    try:
        import nvtx  # type: ignore[import-not-found]

        return nvtx.push_range, nvtx.pop_range
    except ImportError:
        pass
    for name in ("libnvToolsExt.so.1", "libnvToolsExt.so"):
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        push, pop = lib.nvtxRangePushA, lib.nvtxRangePop
        push.argtypes = [ctypes.c_char_p]
        return functools.partial(_push_bytes, push), pop
    return None


def _push_bytes(push, msg: str):
    return push(msg.encode())


def instrument(cls: type, backend=None) -> type:
    """Wrap the public methods of ``cls`` in NVTX ranges (returns ``cls``)."""
    backend = backend or _backend()
    if backend is None:
        warnings.warn("TENFERRO_CUDA_NVTX is set but neither the nvtx package nor "
                      "libnvToolsExt is available; no ranges will be emitted",
                      RuntimeWarning, stacklevel=2)
        return cls
    push, pop = backend
    for name in dir(cls):
        attr = getattr(cls, name)
        if name.startswith("_") or not callable(attr) or isinstance(attr, type):
            continue
        setattr(cls, name, _wrap(attr, f"tenferro.{name}", push, pop))
    return cls


def _wrap(fn, label: str, push, pop):
    @functools.wraps(fn)
    def ranged(*args, **kwargs):
        push(label)
        try:
            return fn(*args, **kwargs)
        finally:
            pop()

    return ranged
