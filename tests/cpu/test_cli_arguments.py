"""`python -m tenferro_cuda` with bad arguments: one usage line and status 2, never a
traceback (an arch this NVRTC does not compile for included); a temporary cache
directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cli(tmp_path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TENFERRO_CUDA_")}
    env.update(TENFERRO_CUDA_CACHE_DIR=str(tmp_path / "cache"), PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tenferro_cuda", *args], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)


USAGE_ERRORS = {
    "arch abc": ["--arch", "abc"], "arch 0": ["--arch", "0"], "arch -5": ["--arch", "-5"],
    "family nosuch": ["--family", "nosuch"], "jobs 0": ["--jobs", "0"],
    "jobs -1": ["--jobs", "-1"], "jobs abc": ["--jobs", "abc"], "unknown flag": ["--bogus"],
    "positional": ["extra"],
}


@pytest.mark.parametrize("name", list(USAGE_ERRORS))
def test_usage_errors_exit_2_with_one_error_line(tmp_path, name):
    out = _cli(tmp_path, *USAGE_ERRORS[name])
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    errors = [ln for ln in out.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and out.stdout == "", out.stderr


@pytest.mark.parametrize("arch", ["1000", "55", "2147483648"])
def test_an_arch_nvrtc_does_not_know_is_a_usage_error_not_a_broken_install(tmp_path, arch):
    """`--arch 1000` passes check_archs (any int >= 50), so NVRTC rejects the option and the
    CLI reports "installation check failed: a kernel does not compile" over several lines
    with exit 1 -- the status the module docstring reserves for a real failure of the
    installation. Expected: a one-line error naming the arch (like `--arch 0`), status 2."""
    out = _cli(tmp_path, "--arch", arch, "--family", "copy")
    assert "Traceback" not in out.stdout + out.stderr
    assert out.returncode == 2, (out.returncode, out.stdout[-600:])
    assert "a kernel does not compile" not in out.stdout


def test_good_run_compiles_copy(tmp_path):
    out = _cli(tmp_path, "--arch", "90", "--family", "copy", "--jobs", "3")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "compiled 1, from the cache 0" in out.stdout
    again = _cli(tmp_path, "--arch", "90", "--family", "copy")
    assert again.returncode == 0 and "compiled 0, from the cache 1" in again.stdout
