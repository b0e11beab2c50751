"""Environment settings as README.md documents them: TENFERRO_CUDA_FORBID_HOST_SYNC applies
from import on, a cache directory that cannot exist is a plain miss and one warning, and
malformed values never break the import."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tenferro_cuda._nvrtc import CompiledProgram
from tenferro_cuda.kernels import cache as C

ROOT = Path(__file__).resolve().parents[2]
PY = sys.executable


def _run(code: str, env_extra: dict, tmp_path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENFERRO_CUDA_")}
    env.update(TENFERRO_CUDA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    env.update(env_extra)
    return subprocess.run([PY, "-c", code], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)


# --- TENFERRO_CUDA_FORBID_HOST_SYNC ---------------------------------------------------------
# README "Debugging and observability": `TENFERRO_CUDA_FORBID_HOST_SYNC=1` ... makes any
# host-blocking CUDA call inside an op raise RuntimeStateError. debug.py: "(the whole
# process)". The switch is read only when tenferro_cuda.debug is imported, which nothing in
# the package does.
PROBE = """
import tenferro_cuda as tc
from tenferro_cuda import _driver
try:
    _driver.guard_blocking("cuStreamSynchronize", "some_op")  # what every hidden sync calls
except tc.RuntimeStateError:
    print("RAISED")
else:
    print("ALLOWED")
"""


def test_forbid_host_sync_env_applies_after_plain_import(tmp_path):
    out = _run(PROBE, {"TENFERRO_CUDA_FORBID_HOST_SYNC": "1"}, tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "RAISED", (
        "TENFERRO_CUDA_FORBID_HOST_SYNC=1 had no effect after `import tenferro_cuda`")


def test_forbid_host_sync_env_applies_once_debug_is_imported(tmp_path):
    """Control: the same process with `import tenferro_cuda.debug` added does raise,
    so the variable is honoured only as a side effect of importing that module."""
    out = _run("import tenferro_cuda.debug\n" + PROBE,
               {"TENFERRO_CUDA_FORBID_HOST_SYNC": "1"}, tmp_path)
    assert out.stdout.strip() == "RAISED", out.stderr


@pytest.mark.parametrize("value", ["", "0"])
def test_forbid_host_sync_off_values(tmp_path, value):
    out = _run("import tenferro_cuda.debug\n" + PROBE,
               {"TENFERRO_CUDA_FORBID_HOST_SYNC": value}, tmp_path)
    assert out.stdout.strip() == "ALLOWED", out.stderr


@pytest.mark.parametrize("var,value", [
    ("TENFERRO_CUDA_FORBID_HOST_SYNC", "yes"), ("TENFERRO_CUDA_FORBID_HOST_SYNC", " "),
    ("TENFERRO_CUDA_NVTX", "1"), ("TENFERRO_CUDA_NVTX", "garbage"),
    ("TENFERRO_CUDA_WARMUP", "no"), ("TENFERRO_CUDA_CACHE_DIR", "   "),
    ("TENFERRO_CUDA_CACHE_DIR", "x" * 5000),
])
def test_malformed_settings_never_break_import(tmp_path, var, value):
    out = _run("import tenferro_cuda, tenferro_cuda.debug, tenferro_cuda.session; print('OK')",
               {var: value}, tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "OK", out.stderr


# --- TENFERRO_CUDA_CACHE_DIR that cannot be a directory ---------------------------------------
# README: "A cache directory that cannot be written gives one warning and compilation
# continues in memory"; "a corrupt or unreadable entry is a miss". A cache directory that
# is a regular file (or a path too long for the file system) is first reported as a
# *corrupt entry* (logged warning, stats["corrupt"] += 1), then disabled (RuntimeWarning):
# two warnings, the first one false.
def _program() -> CompiledProgram:
    return CompiledProgram(b"\x7fELF-image", {"k": "_Z1kv"}, "")


@pytest.mark.parametrize("kind", ["regular file", "name too long"])
def test_a_cache_dir_that_cannot_exist_warns_once_and_reports_no_corruption(
        tmp_path, caplog, kind):
    if kind == "regular file":
        (tmp_path / "afile").write_text("not a directory")
        directory = tmp_path / "afile"
    else:
        directory = tmp_path / ("x" * 300)
    cache = C.KernelCache(directory)
    key = C.cache_key(("review",))
    caplog.set_level(logging.WARNING, logger="tenferro_cuda")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert cache.get(key) is None  # the first compile of a process looks up first
        cache.put(key, _program())
    logged = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    shown = [str(w.message) for w in record] + logged
    assert cache.stats["corrupt"] == 0, shown
    assert len(shown) == 1, shown
