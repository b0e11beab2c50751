"""kernels/toolchain.py: the NVRTC version of cache keys, from a record in the cache
directory when it is valid, so that a process whose kernels all come from the disk cache
never loads NVRTC; a stale or wrong record falls back to (or is corrected by) NVRTC."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from tenferro_cuda import _nvrtc
from tenferro_cuda.kernels import compiler, toolchain

LINUX = sys.platform.startswith("linux")
SOURCE = 'extern "C" __global__ void probe_{tag}(float* p) {{ p[0] = {tag}.0f; }}\n'
CHILD = """
import sys
from tenferro_cuda.kernels import compiler
compiler.compile_cached(sys.argv[1], "probe.cu", (), 80)
with open("/proc/self/maps") as fh:
    mapped = "/libnvrtc.so" in fh.read()
print(compiler.compile_count["n"], int(mapped))
"""


@pytest.fixture
def fresh(monkeypatch):
    """A toolchain state as in a new process (restored afterwards)."""
    monkeypatch.setattr(toolchain, "_known", toolchain._Known())
    monkeypatch.setattr(toolchain, "_recorded", set())


def _real() -> str:
    return "{}.{}".format(*_nvrtc.version())


def _child(cache_dir, source: str) -> tuple[int, int]:
    env = {**os.environ, "TENFERRO_CUDA_CACHE_DIR": str(cache_dir)}
    out = subprocess.run([sys.executable, "-c", CHILD, source], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    compiles, mapped = out.stdout.split()
    return int(compiles), int(mapped)


@pytest.mark.skipif(not LINUX, reason="the record needs /proc/self/maps")
def test_a_disk_hit_in_a_new_process_never_loads_nvrtc(tmp_path):
    source = SOURCE.format(tag=os.getpid() % 1000)
    assert _child(tmp_path, source) == (1, 1)  # compiles: NVRTC loaded, record written
    records = list(tmp_path.glob("nvrtc-*.id"))
    assert len(records) == 1 and records[0].read_text().split("\t")[0] == _real()
    assert _child(tmp_path, source) == (0, 0)  # disk hit: the record answers
    records[0].unlink()
    assert _child(tmp_path, source) == (0, 1)  # no record: NVRTC answers, as before


def _write(tmp_path, version: str, lib) -> None:
    st = os.stat(lib)
    toolchain.record_path(tmp_path).write_text(
        f"{version}\t{lib}\t{st.st_size}\t{st.st_mtime_ns}\t{st.st_ino}\n")


@pytest.mark.skipif(not LINUX, reason="records are read on Linux only")
def test_a_record_is_valid_only_while_the_library_file_is_unchanged(tmp_path, monkeypatch):
    monkeypatch.setattr(toolchain, "_loaded", lambda name: False)
    lib = tmp_path / "libnvrtc.so.99"
    lib.write_bytes(b"x" * 100)
    _write(tmp_path, "99.1", lib)
    assert toolchain._read_record(tmp_path) == "99.1"
    lib.write_bytes(b"y" * 101)  # a new library at the same path
    assert toolchain._read_record(tmp_path) is None
    _write(tmp_path, "99.2", lib)
    assert toolchain._read_record(tmp_path) == "99.2"
    lib.unlink()
    assert toolchain._read_record(tmp_path) is None
    for text in ("", "garbage", "13\tx\t1\t2\t3\n", "a.b\tx\t1\t2\t3\n"):
        toolchain.record_path(tmp_path).write_text(text)
        assert toolchain._read_record(tmp_path) is None


@pytest.mark.skipif(not LINUX, reason="records are read on Linux only")
@pytest.mark.parametrize("what", ["fifo", "directory", "endless", "binary"])
def test_a_record_that_is_not_a_small_text_file_is_ignored_at_once(tmp_path, monkeypatch,
                                                                    what):
    monkeypatch.setattr(toolchain, "_loaded", lambda name: False)
    path = toolchain.record_path(tmp_path)
    if what == "fifo":
        os.mkfifo(path)  # reading it would block until a writer came
    elif what == "directory":
        path.mkdir()
    elif what == "endless":
        path.symlink_to("/dev/zero")
    else:
        path.write_bytes(b"\xff\xfe13.0\t")
    assert toolchain._read_record(tmp_path) is None


@pytest.mark.skipif(not LINUX, reason="records are read on Linux only")
def test_a_library_loaded_by_someone_else_makes_nvrtc_answer(tmp_path, monkeypatch):
    lib = tmp_path / "libnvrtc.so.99"
    lib.write_bytes(b"x")
    _write(tmp_path, "99.1", lib)
    monkeypatch.setattr(toolchain, "_loaded", lambda name: True)
    assert toolchain._read_record(tmp_path) is None


def test_the_fingerprint_follows_the_loader_environment(monkeypatch, tmp_path):
    toolchain.where.cache_clear()
    try:
        monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
        base = toolchain.where()
        toolchain.where.cache_clear()
        monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path / "other"))
        assert toolchain.where() != base
        toolchain.where.cache_clear()
        monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
        monkeypatch.setenv("CUDA_HOME", str(tmp_path))
        assert toolchain.where() != base
    finally:
        toolchain.where.cache_clear()


def test_a_wrong_record_is_corrected_by_the_next_compile(tmp_path, fresh, caplog):
    cache = compiler.KernelCache(tmp_path)
    toolchain._known.version = "1.0"  # as if a record had said so
    source = SOURCE.format(tag=7)
    before = compiler.compile_count["n"]
    with caplog.at_level(logging.WARNING, logger="tenferro_cuda"):
        compiler.compile_cached(source, "probe.cu", (), 80, cache=cache)
    assert compiler.compile_count["n"] == before + 1
    assert toolchain.version(tmp_path) == _real()
    assert any("record said 1.0" in r.getMessage() for r in caplog.records)
    cache.clear_memory()
    compiler.compile_cached(source, "probe.cu", (), 80, cache=cache)  # stored under the
    assert compiler.compile_count["n"] == before + 1  # real version's key: a disk hit


def test_the_key_changes_with_the_nvrtc_version(tmp_path, fresh, monkeypatch):
    cache = compiler.KernelCache(tmp_path)
    source = SOURCE.format(tag=8)
    compiler.compile_cached(source, "probe.cu", (), 80, cache=cache)
    before = compiler.compile_count["n"]
    monkeypatch.setattr(toolchain, "version", lambda directory: "99.0")
    monkeypatch.setattr(toolchain, "confirm", lambda: "99.0")
    compiler.compile_cached(source, "probe.cu", (), 80, cache=cache)
    assert compiler.compile_count["n"] == before + 1


def test_reading_an_empty_log_leaves_shared_bytes_alone():
    prog = _nvrtc.compile_program(SOURCE.format(tag=9), "probe.cu", ("--gpu-architecture=sm_80",))
    assert prog.log == "" and prog.image[:4] == b"\x7fELF"
    # NVRTC's NUL once landed in CPython's shared one-byte b" " (print's separator)
    assert bytes([32]) == b" " and bytes([32])[0] == 32
