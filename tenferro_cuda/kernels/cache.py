"""The kernel cache: a bounded in-memory map plus a disk directory.

Key: sha256 over the kernel source, every header under ``ptx/include``, the compile
options, the target arch, the NVRTC version, the tenferro_cuda version and the name
expressions (``cache_key``). Disk entries live under ``$TENFERRO_CUDA_CACHE_DIR``
(default ``~/.cache/tenferro_cuda``) as ``<key>.tfk``: a magic, the sha256 of the
payload, then the payload (JSON header with the entry's full key and the lowered names,
then the image). Writes are atomic (temporary file + ``os.replace``). On read an entry
must carry the key it is read for and lower every name expression asked for: a file whose
checksum or structure is wrong, or that holds another key's program (files swapped or
copied over each other, or rewritten with another key), reads as a miss and is
recompiled; so does an entry that is not a regular file (a directory, a FIFO, a device) or
is larger than ``MAX_ENTRY``, which is never read, and one that cannot be read (its
permissions, a symlink loop). An entry that cannot be replaced (a directory in its place)
keeps its program in memory only. A directory that cannot be written gives one warning and
the cache continues in memory.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import stat
import struct
import tempfile
import threading
import warnings
from pathlib import Path

from .._nvrtc import CompiledProgram
from ..memo import BoundedCache

log = logging.getLogger("tenferro_cuda")
MAGIC = b"TFK2"  # TFK1 entries carried no key: read as misses
_HEADER = struct.Struct("<4s32sI")  # magic, sha256(payload), len(json)
_TEMP = ".tmp-"  # the prefix of a writer's temporary files
# what reading an entry fails with when the directory itself cannot be one
_DIRECTORY_ERRORS = frozenset((errno.ENOTDIR, errno.ENAMETOOLONG))
# what replacing one entry may fail with when the directory itself is writable
_ENTRY_ERRORS = frozenset((errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST, errno.ELOOP,
                           errno.EBUSY, errno.EACCES, errno.EPERM, errno.ENOTDIR))
MAX_ENTRY = 1 << 28  # bytes; the largest program (every instantiation of a family) is ~10 MB


def cache_dir_setting() -> tuple[str, str | None]:
    """What ``default_cache_dir`` depends on, as text: the ``TENFERRO_CUDA_CACHE_DIR``
    setting, and the home directory when that is unset (a key that builds no path)."""
    env = os.environ.get("TENFERRO_CUDA_CACHE_DIR") or ""
    return env, None if env else os.environ.get("HOME")


def default_cache_dir() -> Path:
    env = cache_dir_setting()[0]
    if env:
        return Path(env)
    return Path(os.path.expanduser("~")) / ".cache" / "tenferro_cuda"


def cache_key(parts: tuple[str | bytes, ...]) -> str:
    h = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        h.update(struct.pack("<Q", len(data)))
        h.update(data)
    return h.hexdigest()


def encode_entry(program: CompiledProgram, key: str) -> bytes:
    """The disk image of ``program`` stored under ``key`` (the key is part of it)."""
    meta = json.dumps({"key": key, "lowered": program.lowered, "log": program.log}).encode()
    payload = meta + program.image
    return _HEADER.pack(MAGIC, hashlib.sha256(payload).digest(), len(meta)) + payload


def decode_entry(blob: bytes, key: str, names: tuple[str, ...] = ()) -> CompiledProgram | None:
    """The program in ``blob`` if it is intact, was stored under ``key`` and lowers every
    name expression of ``names``; else None."""
    if len(blob) < _HEADER.size:
        return None
    magic, digest, meta_len = _HEADER.unpack_from(blob)
    payload = memoryview(blob)[_HEADER.size:]  # no copy of the image until it is checked
    if magic != MAGIC or meta_len > len(payload) or hashlib.sha256(payload).digest() != digest:
        return None
    try:
        meta = json.loads(bytes(payload[:meta_len]))
        if meta["key"] != key:
            return None
        lowered = {str(k): str(v) for k, v in dict(meta["lowered"]).items()}
        if any(name not in lowered for name in names):
            return None
        return CompiledProgram(bytes(payload[meta_len:]), lowered, str(meta["log"]))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None


def read_regular(path: str | Path, limit: int) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes, else None.
    Opened without blocking (a FIFO put in a file's place must not hang the reader)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        # Ask for the size fstat gave (+1 to see a file that grew): a read of the limit
        # would allocate that much first and cost more than the file.
        chunks, left, ask = [], limit + 1, info.st_size + 1
        while left > 0 and (chunk := os.read(fd, min(left, ask, 1 << 24))):
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


class KernelCache:
    """Thread-safe memory + disk cache of compiled programs."""

    def __init__(self, directory: Path | None = None, memory_limit: int = 4096) -> None:
        self.directory = directory if directory is not None else default_cache_dir()
        self._prefix = os.path.join(os.fspath(self.directory), "")  # entries: prefix + key
        self.memory_limit = memory_limit
        self._memory: BoundedCache = BoundedCache(memory_limit)
        self._lock = threading.Lock()
        self._disk_ok = True
        self._warned = False
        self.stats = {"memory_hits": 0, "disk_hits": 0, "misses": 0, "corrupt": 0,
                      "compiles": 0, "writes": 0}

    def path_for(self, key: str) -> Path:
        return Path(self._entry(key))

    def _entry(self, key: str) -> str:
        """The entry file of ``key`` (a string: no path object on the read path)."""
        return f"{self._prefix}{key}.tfk"

    def get(self, key: str, names: tuple[str, ...] = ()) -> CompiledProgram | None:
        """The program stored under ``key`` (memory, then disk), or None. A disk entry
        must also lower every name expression of ``names``."""
        with self._lock:
            prog = self._memory.get(key)
            if prog is not None:
                self.stats["memory_hits"] += 1
                return prog
        prog = self._read_disk(key, names)
        with self._lock:
            if prog is None:
                self.stats["misses"] += 1
                return None
            self.stats["disk_hits"] += 1
            self._remember(key, prog)
        return prog

    def put(self, key: str, program: CompiledProgram) -> None:
        with self._lock:
            self.stats["compiles"] += 1
            self._remember(key, program)
        self._write_disk(key, program)

    def _remember(self, key: str, program: CompiledProgram) -> None:
        self._memory.put(key, program)

    def _read_disk(self, key: str, names: tuple[str, ...]) -> CompiledProgram | None:
        if not self._disk_ok:
            return None
        path = self._entry(key)
        try:
            blob = read_regular(path, MAX_ENTRY)
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno in _DIRECTORY_ERRORS:  # no such directory can exist: a plain miss
                return None  # (the write that follows warns once and goes memory-only)
            blob = None  # this entry only (unreadable, a symlink loop, ...): a bad entry
        prog = decode_entry(blob, key, names) if blob is not None else None
        if prog is None:
            with self._lock:
                self.stats["corrupt"] += 1
            log.warning("kernel cache entry %s is corrupt or holds another key's program; "
                        "recompiling", path)
        return prog

    def _write_disk(self, key: str, program: CompiledProgram) -> None:
        if not self._disk_ok:
            return
        try:  # the directory: a failure here turns the disk cache off
            self.directory.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=_TEMP, suffix=".tfk")
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(encode_entry(program, key))
            except BaseException:
                os.unlink(tmp)
                raise
        except OSError as exc:
            self._disable(f"cannot write to {self.directory}: {exc}")
            return
        path = self._entry(key)
        try:
            os.replace(tmp, path)
        except OSError as exc:
            os.unlink(tmp)
            if exc.errno not in _ENTRY_ERRORS:  # the directory (full, read-only, ...)
                self._disable(f"cannot write to {self.directory}: {exc}")
                return
            # this entry only: something in its place (a directory, another user's file)
            log.warning("kernel cache entry %s cannot be written (%s); this program stays "
                        "in memory", path, exc)
            return
        with self._lock:
            self.stats["writes"] += 1

    def _disable(self, why: str) -> None:
        self._disk_ok = False
        if not self._warned:
            self._warned = True
            warnings.warn(
                f"tenferro_cuda kernel cache disabled ({why}); compiling in memory only",
                RuntimeWarning,
                stacklevel=3,
            )

    def disk_usage(self) -> tuple[int, int]:
        """(number of entries, total bytes) on disk: the regular ``*.tfk`` files, not a
        writer's temporary ones; what cannot be examined (removed meanwhile, a dangling
        link) is not counted."""
        count = total = 0
        try:
            with os.scandir(self.directory) as it:
                for item in it:
                    if not item.name.endswith(".tfk") or item.name.startswith(_TEMP):
                        continue
                    try:
                        if item.is_file():
                            total += item.stat().st_size
                            count += 1
                    except OSError:
                        continue
        except OSError:  # no directory (or not one we can list)
            return 0, 0
        return count, total

    def clear_memory(self) -> None:
        with self._lock:
            self._memory.clear()
