"""tenferro_cuda.kernels.cache: keys, the entry format, disk robustness, memory bound."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tenferro_cuda._nvrtc import CompiledProgram
from tenferro_cuda.kernels import cache as C

BASE_PARTS = (
    "source text of ptx/elementwise.cu",
    b"digest of every header",
    "-std=c++17 -default-device",
    "sm_90",
    "nvrtc 13.0",
    "tenferro_cuda 0.1.0",
    "tf::add<float>;tf::add<double>",
)


def _program(tag: str = "a") -> CompiledProgram:
    return CompiledProgram(
        image=b"\x7fELF" + tag.encode() * 64 + bytes(range(256)),
        lowered={f"tf::add<{tag}>": f"_ZN2tf3addI{tag}EEvPv", "tf::neg<float>": "_Z3negf"},
        log=f"warning: {tag}",
    )


# --- keys ----------------------------------------------------------------------------------

@pytest.mark.parametrize("index", range(len(BASE_PARTS)))
def test_key_changes_with_every_part(index):
    parts = list(BASE_PARTS)
    changed = parts[index] + (b"!" if isinstance(parts[index], bytes) else "!")
    parts[index] = changed
    assert C.cache_key(tuple(parts)) != C.cache_key(BASE_PARTS)


def test_key_is_deterministic_sha256_hex():
    key = C.cache_key(BASE_PARTS)
    assert key == C.cache_key(BASE_PARTS)
    assert len(key) == 64 and all(c in "0123456789abcdef" for c in key)


SPLITS = [
    (("ab", "c"), ("a", "bc")),
    (("abc",), ("ab", "c")),
    (("", "x"), ("x", "")),
    (("x",), ("x", "")),
]


@pytest.mark.parametrize(("a", "b"), SPLITS, ids=[f"{a}|{b}" for a, b in SPLITS])
def test_key_part_boundaries_matter(a, b):
    assert C.cache_key(a) != C.cache_key(b)


def test_key_str_and_bytes_of_same_text_agree():
    assert C.cache_key(("abc",)) == C.cache_key((b"abc",))


# --- entry format ------------------------------------------------------------------------

PROGRAMS = [
    _program("a"),
    CompiledProgram(image=b"", lowered={}, log=""),
    CompiledProgram(image=b"\0" * 10, lowered={"k": "m"}, log="unicode \u2713 log"),
]


@pytest.mark.parametrize("program", PROGRAMS, ids=["typical", "empty", "unicode-log"])
def test_encode_decode_round_trip(program):
    blob = C.encode_entry(program, KEY)
    assert blob[:4] == C.MAGIC
    assert C.decode_entry(blob, KEY) == program


KEY = "ab" * 32
_BLOB = C.encode_entry(_program(), KEY)
# Byte positions covering the magic, the checksum, the JSON header and the image.
CORRUPT_AT = [0, 3, 4, 20, 35, 40, 41, 60, len(_BLOB) // 2, len(_BLOB) - 1]


@pytest.mark.parametrize("pos", CORRUPT_AT)
def test_decode_rejects_corrupt_byte(pos):
    blob = bytearray(_BLOB)
    blob[pos] ^= 0x5A
    assert C.decode_entry(bytes(blob), KEY) is None


TRUNCATE_TO = [0, 1, 4, 39, 40, 41, 60, len(_BLOB) - 1]


@pytest.mark.parametrize("length", TRUNCATE_TO)
def test_decode_rejects_truncated(length):
    assert C.decode_entry(_BLOB[:length], KEY) is None


def test_decode_rejects_an_entry_of_another_key():
    """An intact entry read for a key it was not stored under is a miss (issue 13, 6)."""
    assert C.decode_entry(_BLOB, "cd" * 32) is None


def test_decode_rejects_old_format_without_key():
    import hashlib
    import json
    import struct

    meta = json.dumps({"lowered": {"k": "m"}, "log": ""}).encode()
    payload = meta + b"image"
    blob = struct.pack("<4s32sI", b"TFK1", hashlib.sha256(payload).digest(),
                       len(meta)) + payload
    assert C.decode_entry(blob, KEY) is None


def test_swapped_cache_files_are_misses_and_recompiled(tmp_path):
    """Swapping the contents of two entries: each reads as a miss (never the other
    program, never a KeyError), and the recompiled program replaces it."""
    a, b = C.cache_key(("a",)), C.cache_key(("b",))
    first = C.KernelCache(tmp_path)
    first.put(a, _program("A"))
    first.put(b, _program("B"))
    pa, pb = first.path_for(a), first.path_for(b)
    blob_a, blob_b = pa.read_bytes(), pb.read_bytes()
    pa.write_bytes(blob_b)
    pb.write_bytes(blob_a)
    second = C.KernelCache(tmp_path)  # a new process
    assert second.get(a) is None and second.get(b) is None
    assert second.stats["corrupt"] == 2 and second.stats["disk_hits"] == 0
    second.put(a, _program("A"))
    assert C.KernelCache(tmp_path).get(a) == _program("A")


# --- KernelCache on disk -----------------------------------------------------------------

def test_put_get_memory_then_disk(tmp_path):
    key = C.cache_key(BASE_PARTS)
    first = C.KernelCache(tmp_path)
    first.put(key, _program())
    assert first.get(key) == _program()
    assert first.stats["memory_hits"] == 1
    assert first.path_for(key).is_file()

    second = C.KernelCache(tmp_path)  # a new process: memory empty, disk warm
    assert second.get(key) == _program()
    assert second.stats["disk_hits"] == 1
    assert second.get(key) == _program()
    assert second.stats["memory_hits"] == 1


def test_miss_counts(tmp_path):
    cache = C.KernelCache(tmp_path)
    assert cache.get("0" * 64) is None
    assert cache.stats["misses"] == 1
    assert cache.stats["corrupt"] == 0


def test_default_directory_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("TENFERRO_CUDA_CACHE_DIR", str(tmp_path / "here"))
    assert C.default_cache_dir() == tmp_path / "here"
    assert C.KernelCache().directory == tmp_path / "here"


def test_default_directory_without_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("TENFERRO_CUDA_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert C.default_cache_dir() == tmp_path / ".cache" / "tenferro_cuda"


def _damage(path: Path, how: str) -> None:
    data = bytearray(path.read_bytes())
    if how == "flip-image-byte":
        data[-1] ^= 0xFF
    elif how == "flip-checksum-byte":
        data[10] ^= 0xFF
    elif how == "bad-magic":
        data[0:4] = b"XXXX"
    elif how == "truncate-half":
        data = data[: len(data) // 2]
    elif how == "truncate-header":
        data = data[:10]
    elif how == "empty":
        data = bytearray()
    path.write_bytes(bytes(data))


DAMAGE = ["flip-image-byte", "flip-checksum-byte", "bad-magic", "truncate-half",
          "truncate-header", "empty"]


@pytest.mark.parametrize("how", DAMAGE)
def test_damaged_file_is_a_miss_then_rewritten(tmp_path, how):
    key = C.cache_key(BASE_PARTS)
    C.KernelCache(tmp_path).put(key, _program())
    _damage(C.KernelCache(tmp_path).path_for(key), how)

    cache = C.KernelCache(tmp_path)
    assert cache.get(key) is None
    assert cache.stats["corrupt"] == 1
    assert cache.stats["misses"] == 1
    assert cache.stats["disk_hits"] == 0

    cache.put(key, _program())  # the recompiled program replaces the bad entry
    assert C.KernelCache(tmp_path).get(key) == _program()


@pytest.mark.parametrize("what", ["fifo", "directory", "device", "oversized"])
def test_an_entry_that_is_not_a_plain_file_of_sane_size_is_a_miss(tmp_path, monkeypatch, what):
    key = C.cache_key(BASE_PARTS)
    cache = C.KernelCache(tmp_path)
    path = cache.path_for(key)
    if what == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        os.mkfifo(path)  # opening it for reading would block until a writer came
    elif what == "directory":
        path.mkdir()
    elif what == "device":
        if not os.path.exists("/dev/zero"):
            pytest.skip("no /dev/zero here")
        path.symlink_to("/dev/zero")  # endless: read_bytes() would never return
    else:
        C.KernelCache(tmp_path).put(key, _program())
        monkeypatch.setattr(C, "MAX_ENTRY", path.stat().st_size - 1)
    assert cache.get(key) is None
    assert cache.stats["corrupt"] == 1 and cache.stats["misses"] == 1
    assert cache._disk_ok  # one bad entry does not turn the disk cache off


def _temp_files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if not p.name.endswith(".tfk")
                  or p.name.startswith(".tmp"))


def test_atomic_write_leaves_no_temp_files(tmp_path):
    cache = C.KernelCache(tmp_path / "cache")
    keys = [C.cache_key((str(i),)) for i in range(5)]
    for i, key in enumerate(keys):
        cache.put(key, _program(str(i)))
    cache.put(keys[0], _program("again"))  # overwrite an existing entry
    assert _temp_files(tmp_path / "cache") == []
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == sorted(
        f"{k}.tfk" for k in keys)
    assert cache.stats["writes"] == 6
    assert cache.disk_usage()[0] == 5
    assert C.KernelCache(tmp_path / "cache").get(keys[0]) == _program("again")


def test_failed_replace_removes_temp_file_and_keeps_old_entry(tmp_path, monkeypatch):
    key = C.cache_key(BASE_PARTS)
    C.KernelCache(tmp_path).put(key, _program("old"))

    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    cache = C.KernelCache(tmp_path)
    with pytest.warns(RuntimeWarning, match="kernel cache disabled") as record:
        cache.put(key, _program("new"))
    assert len(record) == 1
    monkeypatch.undo()
    assert _temp_files(tmp_path) == []
    assert C.KernelCache(tmp_path).get(key) == _program("old")
    assert cache.get(key) == _program("new")  # still served from memory


@pytest.mark.parametrize("first_op", ["put", "get"])
def test_unwritable_directory_warns_once_then_memory_only(tmp_path, first_op):
    (tmp_path / "afile").write_text("a regular file, so no directory can be made under it")
    cache = C.KernelCache(tmp_path / "afile" / "cache")
    keys = [C.cache_key((str(i),)) for i in range(4)]
    with pytest.warns(RuntimeWarning, match="kernel cache disabled") as record:
        if first_op == "get":
            assert cache.get(keys[0]) is None
        for i, key in enumerate(keys):
            cache.put(key, _program(str(i)))
        for i, key in enumerate(keys):
            assert cache.get(key) == _program(str(i))
        assert cache.get(C.cache_key(("absent",))) is None
    assert len(record) == 1, [str(w.message) for w in record]
    assert cache.stats["writes"] == 0
    assert cache.stats["memory_hits"] == 4
    assert cache.disk_usage() == (0, 0)


def test_memory_bound_evicts_oldest(tmp_path):
    cache = C.KernelCache(tmp_path, memory_limit=2)
    keys = [C.cache_key((str(i),)) for i in range(3)]
    for i, key in enumerate(keys):
        cache.put(key, _program(str(i)))
    assert len(cache._memory) == 2
    assert cache.get(keys[2]) == _program("2")
    assert cache.stats["memory_hits"] == 1
    assert cache.get(keys[0]) == _program("0")  # evicted from memory, still on disk
    assert cache.stats["disk_hits"] == 1
    assert len(cache._memory) == 2


def test_memory_bound_without_disk(tmp_path):
    (tmp_path / "afile").write_text("x")
    cache = C.KernelCache(tmp_path / "afile" / "cache", memory_limit=3)
    with pytest.warns(RuntimeWarning):
        for i in range(10):
            cache.put(C.cache_key((str(i),)), _program(str(i)))
    assert len(cache._memory) == 3
    assert cache.get(C.cache_key(("0",))) is None
    assert cache.get(C.cache_key(("9",))) == _program("9")


def test_clear_memory(tmp_path):
    cache = C.KernelCache(tmp_path)
    key = C.cache_key(BASE_PARTS)
    cache.put(key, _program())
    cache.clear_memory()
    assert cache.get(key) == _program()
    assert cache.stats["disk_hits"] == 1


def test_an_entry_rewritten_under_another_key_is_a_miss_not_a_key_error(tmp_path):
    """An intact entry of one program, re-labelled with another key (checksum recomputed):
    the names asked for are not in it, so it is a miss, never a KeyError later."""
    import hashlib
    import json
    import struct

    key = C.cache_key(("b",))
    meta = json.dumps({"key": key, "lowered": {"tf::a<float>": "_Z1a"}, "log": ""}).encode()
    payload = meta + b"image of a"
    blob = C.MAGIC + hashlib.sha256(payload).digest() + struct.pack("<I", len(meta)) + payload
    assert C.decode_entry(blob, key) is not None  # intact and of this key
    assert C.decode_entry(blob, key, ("tf::b<float>",)) is None
    cache = C.KernelCache(tmp_path)
    tmp_path.mkdir(exist_ok=True)
    cache.path_for(key).write_bytes(blob)
    assert cache.get(key, ("tf::b<float>",)) is None
    assert cache.stats["corrupt"] == 1
    assert C.KernelCache(tmp_path).get(key, ("tf::a<float>",)) is not None


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 70_000])
def test_read_regular_asks_for_the_file_size_not_the_limit(tmp_path, monkeypatch, size):
    """An entry is read with requests of its own size (+1 to see growth): a request of
    the limit would allocate the limit first, which cost more than the first kernel's
    whole cache read."""
    path = tmp_path / "entry.tfk"
    data = os.urandom(size)
    path.write_bytes(data)
    asked = []
    real = os.read
    monkeypatch.setattr(C.os, "read", lambda fd, n: asked.append(n) or real(fd, n))
    assert C.read_regular(path, 1 << 30) == data
    assert asked and max(asked) <= size + 1


def test_read_regular_still_bounds_a_file_that_grows(tmp_path, monkeypatch):
    """A file that grows after its size was taken is read to the limit and no further."""
    path = tmp_path / "entry.tfk"
    path.write_bytes(b"x" * 100)
    real_fstat = os.fstat

    class Small:
        def __init__(self, info):
            self.st_mode, self.st_size = info.st_mode, 10

    monkeypatch.setattr(C.os, "fstat", lambda fd: Small(real_fstat(fd)))
    assert C.read_regular(path, 1000) == b"x" * 100  # all of it, in size-sized requests
    assert C.read_regular(path, 50) == b"x" * 51  # past the limit: the caller's check fails
