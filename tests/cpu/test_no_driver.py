"""Importing tenferro_cuda does no CUDA work; without a driver, init fails clearly.

Each check runs in a fresh interpreter, so the process-wide init state (and the set of
imported modules) is not shared with other tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

NATIVE_PREFIXES = ("cuda.bindings", "nvmath")
NATIVE_LIBS = ("libcuda.so", "libnvrtc", "libcublas")


def _run(code: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, f"subprocess failed:\n{proc.stdout}\n{proc.stderr}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


_LOADED = f"""
def loaded():
    mods = sorted(m for m in sys.modules
                  if m == "cuda" or m.startswith(("cuda.", "nvmath")))
    with open("/proc/self/maps") as fh:
        maps = fh.read()
    libs = [lib for lib in {NATIVE_LIBS!r} if lib in maps]
    return mods, libs
"""


def test_import_loads_no_native_bindings():
    out = _run("import sys, json\n" + _LOADED + """
import tenferro_cuda
from tenferro_cuda import DType, Tensor, ValidationError, as_dtype  # eager public names
import numpy as np
Tensor.from_numpy(np.arange(3.0))[1:]
mods, libs = loaded()
print(json.dumps({"modules": mods, "libs": libs}))
""")
    native = [m for m in out["modules"] if m.startswith(NATIVE_PREFIXES)]
    assert native == [], f"`import tenferro_cuda` imported native bindings: {native}"
    assert out["libs"] == [], f"`import tenferro_cuda` loaded {out['libs']}"


def test_public_names_resolve_without_cuda_init():
    # Touching every public name (lazy ones included) may import the bindings, but must
    # not initialise the driver or load libcuda.
    out = _run("import sys, json\n" + _LOADED + """
import tenferro_cuda
for name in tenferro_cuda.__all__:
    getattr(tenferro_cuda, name)
from tenferro_cuda import _driver
mods, libs = loaded()
print(json.dumps({"initialised": _driver._initialised,
                  "init_error": _driver._init_error is not None,
                  "libcuda": "libcuda.so" in libs}))
""")
    assert out == {"initialised": False, "init_error": False, "libcuda": False}


_INIT = """
import ctypes, json
from tenferro_cuda import _driver
from tenferro_cuda.errors import CudaDeviceError
try:
    ctypes.CDLL("libcuda.so.1")
    driver_present = True
except OSError:
    driver_present = False
errors = []
for call in (_driver.init, _driver.init, _driver.device_count):
    try:
        call()
    except CudaDeviceError as exc:
        errors.append(exc)
    else:
        errors.append(None)
first = errors[0]
print(json.dumps({
    "driver_present": driver_present,
    "raised": [e is not None for e in errors],
    "message": first.args[0] if first else None,
    "str": str(first) if first else None,
    "op": first.op if first else None,
    "same_error_reraised": errors[1] is first,
    "initialised": _driver._initialised,
}))
"""


def test_init_without_driver_raises_cuda_device_error(gpu_present):
    if gpu_present:
        pytest.skip("a CUDA driver and device are present on this machine")
    out = _run(_INIT)
    assert out["raised"] == [True, True, True], out
    assert out["op"] == "cuInit"
    assert out["same_error_reraised"], "the init failure must be recorded once and re-raised"
    assert out["initialised"] is False
    if out["driver_present"]:  # a driver without a usable device
        assert out["message"].startswith(("no CUDA device", "the NVIDIA driver is unusable"))
    else:
        assert out["message"].startswith("no NVIDIA driver"), out["message"]
    assert out["message"] in out["str"]
