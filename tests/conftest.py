"""Test tiers and shared test environment.

- ``has_gpu()``: whether a CUDA driver and at least one device are usable. It is asked in a
  subprocess (so this process never initialises CUDA) and cached for the session.
- Without a device, every module under ``tests/gpu/`` is skipped as a whole, with the
  reason, before it is imported (one skip per module, not one per test: its ~12,000
  tests cost the CPU tier 10 s to collect and skip one by one), and so is any other test
  marked ``gpu``.
- Without a device, each module's first test moves what is alive by then out of the
  garbage collector's sight (``gc.freeze``; a GPU run keeps the usual collector): the
  objects collection made (about 17,000 test items and their parameters) and what the
  modules before it left (the run's reports and caches). They live for the whole run
  anyway, and the fixtures that call ``gc.collect()`` between tests then scan only what
  the current module made (the first freeze saved 0.5 s per call, the per-module ones
  another 0.08 s on average over 350 calls).
- ``TENFERRO_CUDA_CACHE_DIR`` points at a fresh session-scoped directory unless the
  environment already sets it, so tests never read or write the user's kernel cache.
"""

from __future__ import annotations

import functools
import gc
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

GPU_SKIP_REASON = (
    "no CUDA GPU/driver on this machine (GPU tier runs via `make gpu-test` on a GPU host)"
)
GPU_DIR = Path(__file__).resolve().parent / "gpu"

# Prints 1 when cuInit(0) succeeds and at least one device exists, else 0.
_PROBE = """
try:
    from cuda.bindings import driver as d
    (status,) = d.cuInit(0)
    ok = int(status) == 0
    if ok:
        status, count = d.cuDeviceGetCount()
        ok = int(status) == 0 and int(count) > 0
except Exception:
    ok = False
print(1 if ok else 0)
"""

_CACHE_ENV = "TENFERRO_CUDA_CACHE_DIR"
_made_cache_dir: str | None = None


@functools.cache
def has_gpu() -> bool:
    """True when a CUDA driver and at least one device are usable (probed once)."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and proc.stdout.strip() == "1"


def pytest_configure(config: pytest.Config) -> None:
    global _made_cache_dir
    if not os.environ.get(_CACHE_ENV):
        _made_cache_dir = tempfile.mkdtemp(prefix="tenferro-cuda-test-cache-")
        os.environ[_CACHE_ENV] = _made_cache_dir


def pytest_unconfigure(config: pytest.Config) -> None:
    global _made_cache_dir
    if _made_cache_dir is not None:
        shutil.rmtree(_made_cache_dir, ignore_errors=True)
        os.environ.pop(_CACHE_ENV, None)
        _made_cache_dir = None


class _SkippedGpuModule(pytest.Module):
    """A module of the GPU tier on a machine without a device: skipped, never imported."""

    def collect(self):
        pytest.skip(GPU_SKIP_REASON)


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector):
    if GPU_DIR in Path(module_path).resolve().parents and not has_gpu():
        return _SkippedGpuModule.from_parent(parent, path=module_path)
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # (the modules of tests/gpu never get here without a device: they skip whole above)
    gpu_items = [item for item in items if item.get_closest_marker("gpu") is not None]
    if gpu_items and not has_gpu():
        skip = pytest.mark.skip(reason=GPU_SKIP_REASON)
        for item in gpu_items:
            item.add_marker(skip)


_last_module: list[str | None] = [None]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Without a device, each module's first test (before its fixtures) collects what
    # collection and the modules before it left (their module fixtures are torn down by
    # now) and freezes what survives: the test items, the run's reports and caches, which
    # only grow. A fixture's gc.collect() then scans what this module made.
    module = item.nodeid.partition("::")[0]
    if module != _last_module[0]:
        _last_module[0] = module
        if not has_gpu():
            gc.collect()
            gc.freeze()


@pytest.fixture(scope="session")
def gpu_present() -> bool:
    """``has_gpu()`` as a fixture (tests cannot import conftest under importlib mode)."""
    return has_gpu()
