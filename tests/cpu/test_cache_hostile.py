"""The on-disk kernel cache against a hostile or damaged cache directory: entries that
are no plain files, crafted headers, damaged toolchain records, other writers, headers
reached through a caller's include options. Every test uses its own temporary cache
directory (never the user's)."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from tenferro_cuda._nvrtc import CompiledProgram
from tenferro_cuda.kernels import cache as C
from tenferro_cuda.kernels import compiler, toolchain

ROOT = Path(__file__).resolve().parents[2]
KEY = C.cache_key(("hostile", "key"))


def _program(tag: str = "a") -> CompiledProgram:
    return CompiledProgram(image=b"\x7fELF" + tag.encode() * 32,
                           lowered={"tf::k<float>": f"_Z1k{tag}"}, log="")


def _crafted(meta: bytes, image: bytes = b"img") -> bytes:
    """An entry with a VALID checksum whose JSON header is ``meta``."""
    payload = meta + image
    return struct.pack("<4s32sI", C.MAGIC, hashlib.sha256(payload).digest(),
                       len(meta)) + payload


# --- entries that are not plain files --------------------------------------------------------

def test_a_directory_in_place_of_an_entry_does_not_turn_the_disk_cache_off(tmp_path):
    """A directory where an entry belongs is a miss (test_cache.py) and the recompiled
    program is then put: that one write cannot land, but it must not switch the whole
    disk cache off for every other kernel of the process."""
    cache = C.KernelCache(tmp_path)
    cache.path_for(KEY).mkdir()
    assert cache.get(KEY) is None
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        cache.put(KEY, _program())
    assert not [w for w in record if "disabled" in str(w.message)], \
        [str(w.message) for w in record]
    other = C.cache_key(("other",))
    cache.put(other, _program("b"))
    assert cache._disk_ok
    assert C.KernelCache(tmp_path).get(other) == _program("b")  # persisted


def test_a_symlink_loop_entry_is_a_miss_not_a_disabled_cache(tmp_path):
    """An entry that is a symlink to itself (ELOOP) is a corrupt entry like any other:
    a miss, recompiled and rewritten, disk cache still on."""
    cache = C.KernelCache(tmp_path)
    path = cache.path_for(KEY)
    path.symlink_to(path)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert cache.get(KEY) is None
    assert not [w for w in record if "disabled" in str(w.message)], \
        [str(w.message) for w in record]
    assert cache._disk_ok
    cache.put(KEY, _program())
    assert C.KernelCache(tmp_path).get(KEY) == _program()


def test_an_unreadable_entry_is_a_miss_not_a_disabled_cache(tmp_path, monkeypatch):
    """One entry that cannot be opened (EACCES: written by another user with umask 077
    in a shared cache; simulated, the tests run as root) is a miss; the disk cache
    stays on for every other entry."""
    cache = C.KernelCache(tmp_path)
    good = C.cache_key(("good",))
    C.KernelCache(tmp_path).put(good, _program("g"))
    C.KernelCache(tmp_path).put(KEY, _program())
    bad_path = os.fspath(cache.path_for(KEY))
    real_open = os.open

    def guarded_open(path, *args, **kwargs):
        if os.fspath(path) == bad_path:
            raise PermissionError(13, "Permission denied", bad_path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", guarded_open)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cache.get(KEY) is None
    assert cache._disk_ok
    assert cache.get(good) == _program("g")  # the other entries still come from disk
    assert cache.stats["disk_hits"] == 1


# --- decode robustness -------------------------------------------------------------------------

def test_a_deeply_nested_header_is_a_miss_not_a_recursion_error(tmp_path):
    """An entry rewritten with a valid checksum whose JSON header nests too deeply to
    parse reads as a miss (not a RecursionError)."""
    meta = b"[" * 200_000 + b"]" * 200_000
    cache = C.KernelCache(tmp_path)
    cache.path_for(KEY).write_bytes(_crafted(meta))
    assert cache.get(KEY) is None


@pytest.mark.parametrize("meta", [
    json.dumps({"key": KEY, "lowered": "ab", "log": ""}).encode(),
    json.dumps({"key": KEY, "lowered": 5, "log": ""}).encode(),
    json.dumps([KEY]).encode(),
    json.dumps({"key": [KEY]}).encode(),
    b"\xff\xfe not utf-8",
    b"",
])
def test_crafted_headers_with_a_valid_checksum_are_misses(tmp_path, meta):
    cache = C.KernelCache(tmp_path)
    cache.path_for(KEY).write_bytes(_crafted(meta))
    assert cache.get(KEY, ("tf::k<float>",)) is None


def test_an_entry_missing_a_requested_name_is_a_miss(tmp_path):
    C.KernelCache(tmp_path).put(KEY, _program())
    assert C.KernelCache(tmp_path).get(KEY, ("tf::other<int>",)) is None
    assert C.KernelCache(tmp_path).get(KEY, ("tf::k<float>",)) == _program()


# --- the toolchain record -------------------------------------------------------------------

def test_a_record_with_a_nul_byte_in_its_path_is_ignored(tmp_path, monkeypatch):
    """A damaged ``nvrtc-*.id`` record (a NUL byte in the path field, as a zero-filled
    block after a crash can leave) is ignored (``os.stat`` raises ValueError for it)."""
    monkeypatch.setattr(sys, "platform", "linux")
    toolchain.record_path(tmp_path).write_text("12.4\t/usr/lib/libnv\x00rtc.so\t1\t2\t3\n")
    assert toolchain._read_record(tmp_path) is None


def test_a_record_with_a_nul_byte_does_not_break_compilation(tmp_path, monkeypatch):
    """The same record seen through the public compile path."""
    monkeypatch.setattr(toolchain, "_known", toolchain._Known())
    toolchain.record_path(tmp_path).write_text("12.4\t/x/\x00/libnvrtc.so\t1\t2\t3\n")
    src = 'extern "C" __global__ void k(float* x) { x[0] = 1.0f; }'
    prog = compiler.compile_cached(src, "k.cu", (), 80, cache=C.KernelCache(tmp_path))
    assert prog.image


# --- disk usage and the install check ---------------------------------------------------------

def test_disk_usage_survives_a_dangling_symlink_entry(tmp_path):
    """A dangling ``*.tfk`` symlink (or an entry removed between the listing and the
    stat by another process) must not crash ``disk_usage``."""
    cache = C.KernelCache(tmp_path)
    cache.put(KEY, _program())
    (tmp_path / ("0" * 64 + ".tfk")).symlink_to(tmp_path / "gone")
    entries, size = cache.disk_usage()
    assert entries >= 1 and size > 0


def test_disk_usage_does_not_count_temporary_files_as_entries(tmp_path):
    """A writer's temporary file (``.tmp-*.tfk``: one in flight, or one left by a writer
    killed mid-write) is not an entry."""
    cache = C.KernelCache(tmp_path)
    cache.put(KEY, _program())
    (tmp_path / ".tmp-abc123.tfk").write_bytes(b"partial")
    assert cache.disk_usage()[0] == 1


def test_install_check_with_a_dangling_symlink_in_the_cache(tmp_path):
    """``python -m tenferro_cuda`` with a damaged cache (one dangling entry symlink)
    must still run the check and exit 0 without a traceback (README: exits 0 with "no GPU"
    on a machine without one)."""
    (tmp_path / ("f" * 64 + ".tfk")).symlink_to(tmp_path / "nowhere")
    env = {**os.environ, "TENFERRO_CUDA_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "tenferro_cuda", "--arch", "80",
                           "--family", "copy"], capture_output=True, text=True, env=env,
                          timeout=600, cwd=ROOT)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 0
    assert "compiled 1, from the cache 0" in proc.stdout


@pytest.mark.parametrize("damage", ["empty", "garbage", "directory", "other-key"])
def test_install_check_recompiles_a_damaged_entry(tmp_path, damage):
    """Fill the cache, damage the one entry, rerun: it is recompiled, exit 0."""
    env = {**os.environ, "TENFERRO_CUDA_CACHE_DIR": str(tmp_path)}
    args = [sys.executable, "-m", "tenferro_cuda", "--arch", "80", "--family", "copy"]
    first = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600,
                           cwd=ROOT)
    assert first.returncode == 0, first.stderr
    (entry,) = [p for p in tmp_path.glob("*.tfk") if not p.name.startswith(".")]
    if damage == "empty":
        entry.write_bytes(b"")
    elif damage == "garbage":
        entry.write_bytes(os.urandom(1000))
    elif damage == "directory":
        entry.unlink()
        entry.mkdir()
    else:
        blob = C.encode_entry(_program(), C.cache_key(("someone else",)))
        entry.write_bytes(blob)
    proc = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600,
                          cwd=ROOT)
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.returncode == 0
    assert "compiled 1, from the cache 0" in proc.stdout
    if damage != "directory":
        third = subprocess.run(args, capture_output=True, text=True, env=env, timeout=600,
                               cwd=ROOT)
        assert "compiled 0, from the cache 1" in third.stdout


# --- the key -----------------------------------------------------------------------------------

def test_a_user_header_change_is_not_served_a_stale_image(tmp_path):
    """``raw.compile_nvrtc(source, options)`` goes through ``compile_cached``: after the
    user edits a header in an ``-I`` directory, the cache must not serve the image
    compiled from the old one (the key covers the headers the source reaches there)."""
    inc = tmp_path / "inc"
    inc.mkdir()
    src = ('#include "val.h"\n'
           'extern "C" __global__ void k(int* x) { x[0] = VAL; }\n')
    cache = C.KernelCache(tmp_path / "cache")
    (inc / "val.h").write_text("#define VAL 11111\n")
    first = compiler.compile_cached(src, "k.cu", (), 80, (f"-I{inc}",), cache=cache)
    (inc / "val.h").write_text("#define VAL 22222\n")
    fresh = compiler.compile_cached(src, "k.cu", (), 80, (f"-I{inc}",),
                                    cache=C.KernelCache(tmp_path / "fresh"))
    assert first.image != fresh.image  # the header really changes the program
    again = compiler.compile_cached(src, "k.cu", (), 80, (f"-I{inc}",),
                                    cache=C.KernelCache(tmp_path / "cache"))
    assert again.image == fresh.image, "stale image from the old header was served"


# --- concurrency -------------------------------------------------------------------------------

_WRITER = """
import sys
from tenferro_cuda._nvrtc import CompiledProgram
from tenferro_cuda.kernels import cache as C
d, tag = sys.argv[1], sys.argv[2]
key = C.cache_key(("shared",))
c = C.KernelCache(__import__("pathlib").Path(d))
for i in range(300):
    c.put(key, CompiledProgram(tag.encode() * 4000, {"tf::k<float>": tag}, ""))
    got = C.KernelCache(__import__("pathlib").Path(d)).get(key, ("tf::k<float>",))
    assert got is not None, "a concurrent writer left a corrupt entry"
print(c.stats["corrupt"])
"""


def test_two_processes_writing_one_entry_never_corrupt_it(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path), tag],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              cwd=ROOT) for tag in ("A", "B")]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err
    got = C.KernelCache(tmp_path).get(C.cache_key(("shared",)), ("tf::k<float>",))
    assert got is not None and got.lowered["tf::k<float>"] in ("A", "B")
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []


def test_the_include_digest_follows_headers_transitively_and_every_option_form(tmp_path):
    """``includes.digest``: every spelling of an include directory and a pre-included
    header; a header reached through another (a quoted name next to its includer first);
    a name found nowhere, which counts once it appears; no include option, no digest."""
    from tenferro_cuda.kernels import includes

    a, b = tmp_path / "a", tmp_path / "b"
    (a / "sub").mkdir(parents=True)
    b.mkdir()
    (a / "top.h").write_text('#include "sub/mid.h"\n')
    (a / "sub" / "mid.h").write_text('#  include "leaf.h"\n#include <later.h>\n')
    (a / "sub" / "leaf.h").write_text("#define LEAF 1\n")
    (b / "pre.h").write_text("#define PRE 1\n")
    src = '#include "top.h"\n'
    forms = [(f"-I{a}", "-include", str(b / "pre.h")), ("-I", str(a), f"--pre-include={b}/pre.h"),
             (f"--include-path={a}", "--pre-include", str(b / "pre.h"))]
    assert includes.include_dirs(forms[1]) == ([str(a)], [f"{b}/pre.h"])
    first = {includes.digest(src, f) for f in forms}
    assert len(first) == 1 and "" not in first
    assert includes.digest(src, ("-O3", "--use_fast_math")) == ""
    digest = first.pop()
    (a / "sub" / "leaf.h").write_text("#define LEAF 2\n")  # two includes down
    after_leaf = includes.digest(src, forms[0])
    assert after_leaf != digest
    (b / "later.h").write_text("#define LATER 1\n")  # appears in no -I directory yet
    assert includes.digest(src, forms[0]) == after_leaf
    (a / "later.h").write_text("#define LATER 1\n")  # now it is found
    found = includes.digest(src, forms[0])
    assert found != after_leaf
    (b / "pre.h").write_text("#define PRE 2\n")
    assert includes.digest(src, forms[0]) != found
