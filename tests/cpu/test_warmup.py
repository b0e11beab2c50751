"""The first-kernel warm-up (``kernels/warmup.py``): one daemon thread per process, file
and import work only (NVRTC is never loaded from it), failures swallowed, and off with
``TENFERRO_CUDA_WARMUP=0``."""

from __future__ import annotations

import logging

import pytest

from tenferro_cuda.kernels import compiler, registry, toolchain, warmup

DIGEST = compiler.headers_digest


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """A process state with no warm-up yet, no known NVRTC version and a private cache
    directory; the digest memo cleared."""
    monkeypatch.setattr(warmup, "_thread", [])
    monkeypatch.setattr(toolchain, "_known", toolchain._Known())
    monkeypatch.setattr(compiler, "_caches", {})
    monkeypatch.setenv("TENFERRO_CUDA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("TENFERRO_CUDA_WARMUP", raising=False)
    compiler.headers_digest.cache_clear()
    asked = []
    monkeypatch.setattr(toolchain, "_ask", lambda: asked.append(1) or "99.9")
    yield asked
    DIGEST.cache_clear()


def _run_once():
    warmup.start()
    thread = warmup.started()
    assert thread is not None and thread.daemon
    thread.join(30)
    assert not thread.is_alive()
    return thread


def test_it_does_the_first_kernels_host_work_once(fresh, monkeypatch):
    imported = []
    real = registry.families
    monkeypatch.setattr(registry, "families", lambda: imported.append(1) or real())
    monkeypatch.setattr(registry, "_SOURCES", {})
    thread = _run_once()
    assert compiler.headers_digest.cache_info().currsize == 1
    assert imported == [1]
    # every family's source (part of each cache key) is read: a first kernel reads none
    assert len(registry._SOURCES) == len(registry.family_names())
    monkeypatch.setattr(registry.Path, "read_text", lambda self: pytest.fail("read again"))
    for fam in registry.families().values():
        assert fam.read_source() is registry._SOURCES[str(fam.source_path())]
    warmup.start()  # once per process: no second thread
    assert warmup.started() is thread
    assert fresh == []  # no record in the new directory: NVRTC was not asked


def test_a_valid_record_gives_the_version_without_nvrtc(fresh, monkeypatch):
    monkeypatch.setattr(toolchain, "_read_record", lambda directory: "12.8")
    _run_once()
    assert toolchain.version(compiler.shared_cache().directory) == "12.8"
    assert fresh == []


def test_no_record_leaves_the_version_to_the_first_compile(fresh, monkeypatch):
    monkeypatch.setattr(toolchain, "_read_record", lambda directory: None)
    _run_once()
    assert toolchain._known.version is None and fresh == []
    assert toolchain.version(compiler.shared_cache().directory) == "99.9"  # asked now
    assert fresh == [1]


def test_a_failure_is_swallowed_and_logged(fresh, monkeypatch, caplog):
    def broken():
        raise OSError("unreadable ptx/include")

    monkeypatch.setattr(compiler, "headers_digest", broken)
    with caplog.at_level(logging.DEBUG, logger="tenferro_cuda"):
        _run_once()
    assert any("warm-up failed" in r.getMessage() for r in caplog.records)


def test_it_can_be_turned_off(fresh, monkeypatch):
    monkeypatch.setenv("TENFERRO_CUDA_WARMUP", "0")
    warmup.start()
    assert warmup.started() is None


def test_the_warm_up_and_the_caller_share_one_cache(fresh, monkeypatch):
    made = []
    real = compiler.KernelCache
    monkeypatch.setattr(compiler, "KernelCache", lambda d: made.append(d) or real(d))
    _run_once()
    first = compiler.shared_cache()
    assert compiler.shared_cache() is first and len(made) == 1


def test_the_shared_cache_is_found_by_the_setting_without_building_a_path(fresh, monkeypatch,
                                                                           tmp_path):
    from tenferro_cuda.kernels import cache as cache_mod

    first = compiler.shared_cache()
    assert first.directory == tmp_path
    with monkeypatch.context() as patch:
        patch.setattr(cache_mod, "default_cache_dir", lambda: pytest.fail("path built"))
        assert compiler.shared_cache() is first
    monkeypatch.setenv("TENFERRO_CUDA_CACHE_DIR", str(tmp_path / "other"))
    other = compiler.shared_cache()
    assert other.directory == tmp_path / "other" and other is not first
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # a home changes only the default
    assert compiler.shared_cache() is other
    monkeypatch.delenv("TENFERRO_CUDA_CACHE_DIR")
    assert compiler.shared_cache().directory == tmp_path / "home" / ".cache" / "tenferro_cuda"


def test_it_lays_out_the_launches_the_op_families_list(fresh, monkeypatch):
    from tenferro_cuda.kernels import launch
    from tenferro_cuda.ops.elementwise import engine

    assert (engine.CONTIG_CODES, 5) in warmup.LAYOUTS
    monkeypatch.setattr(launch, "_LAYOUTS", {})
    _run_once()
    assert set(launch._LAYOUTS) == set(warmup.LAYOUTS)
    lay = launch._LAYOUTS[(engine.CONTIG_CODES, 5)]

    class Info:
        max_threads_per_block, max_block_dims = 1024, (1024, 1024, 64)
        max_grid_dims, max_shared_per_block = (2**31 - 1, 65535, 65535), 49152

    monkeypatch.setattr(launch, "parse_codes", lambda codes: pytest.fail("parsed again"))
    a, b = (launch.PreparedLaunch(1, engine.CONTIG_CODES, 0, Info(), tail=(0,) * 5, op=op)
            for op in ("add", "mul"))
    assert a._head is b._head is lay.head and a._buf is not b._buf
    assert a.pointer_slots == lay.pointer_slots == (0, 1, 2, 3)
