"""Kernel cache entries are bound to their key (issue 13, item 6): a new process that
finds two entries' contents swapped, or an entry truncated, or another key's file copied
over it, recompiles and computes the right values (no KeyError, no wrong image)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

ADD = textwrap.dedent("""
    import sys, numpy as np, tenferro_cuda as tc
    from tenferro_cuda.kernels import compiler
    ops = sys.argv[1].split(",")
    with tc.cuda_exec_session(0) as s:
        x = s.upload_host_tensor(np.arange(8, dtype=np.float32))
        y = s.upload_host_tensor(np.full(8, 3, np.float32))
        for op in ops:
            got = s.download_to_host(getattr(s, op)(x, y)).numpy()
            want = getattr(np, {"add": "add", "sub": "subtract", "mul": "multiply"}[op])(
                np.arange(8, dtype=np.float32), 3)
            assert np.array_equal(got, want), (op, got, want)
    cache = compiler.shared_cache()
    print("COMPILES", compiler.compile_count["n"], "CORRUPT", cache.stats["corrupt"])
""")


def _run(env, ops):
    proc = subprocess.run([sys.executable, "-c", ADD, ops], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _entries(path):
    return {p.name: p.stat().st_mtime_ns for p in path.glob("*.tfk")}


@pytest.mark.parametrize("damage", ["swap", "copy_over", "truncate"])
def test_damaged_entries_are_recompiled(tmp_path, damage):
    env = dict(os.environ, TENFERRO_CUDA_CACHE_DIR=str(tmp_path))
    _run(env, "add")  # the upload/download kernels and add's
    before_sub = _entries(tmp_path)
    _run(env, "sub")
    sub_files = sorted(set(_entries(tmp_path)) - set(before_sub))
    add_out = _run(env, "add,sub")
    assert "COMPILES 0 " in add_out  # everything comes from the disk cache now
    assert sub_files, "sub's kernel wrote no cache entry"
    a = tmp_path / sorted(before_sub)[0]
    b = tmp_path / sub_files[0]
    ab, bb = a.read_bytes(), b.read_bytes()
    if damage == "swap":
        a.write_bytes(bb)
        b.write_bytes(ab)
    elif damage == "copy_over":
        b.write_bytes(ab)
    else:
        b.write_bytes(bb[: len(bb) // 2])
    out = _run(env, "add,sub")
    compiles = int(out.split()[1])
    assert compiles >= 1 and "CORRUPT 0" not in out
    assert "COMPILES 0 " in _run(env, "add,sub")  # the recompiled entries are good again


@pytest.mark.parametrize("damage", ["image", "name"])
def test_resealed_entries_that_do_not_load_are_recompiled(tmp_path, damage):
    """An entry rewritten with a right checksum and key but an image the driver refuses,
    or a lowered name its image lacks, is compiled again when it fails to load."""
    from tenferro_cuda._nvrtc import CompiledProgram
    from tenferro_cuda.kernels.cache import decode_entry, encode_entry

    env = dict(os.environ, TENFERRO_CUDA_CACHE_DIR=str(tmp_path))
    _run(env, "add")
    before = _entries(tmp_path)
    _run(env, "sub")
    sub_file = tmp_path / sorted(set(_entries(tmp_path)) - set(before))[0]
    key = sub_file.stem
    prog = decode_entry(sub_file.read_bytes(), key)
    assert prog is not None
    if damage == "image":
        bad = CompiledProgram(b"\x7fELF" + bytes(range(256)) * 4, prog.lowered, prog.log)
    else:
        bad = CompiledProgram(prog.image, {k: v + "_gone" for k, v in prog.lowered.items()},
                              prog.log)
    sub_file.write_bytes(encode_entry(bad, key))
    assert decode_entry(sub_file.read_bytes(), key) is not None  # it reads as intact
    out = _run(env, "add,sub")  # the values are checked in the child
    assert "COMPILES 1 CORRUPT 0" in out
    assert "COMPILES 0 " in _run(env, "add,sub")  # the entry was replaced by a good one
