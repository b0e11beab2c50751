"""The NVRTC version that names kernel cache entries, known without loading NVRTC.

Every cache key names the NVRTC version (``major.minor``). Asking NVRTC for it
(``nvrtcVersion``) loads libnvrtc, about 140 MB: 10 to 25 ms, which a process whose
kernels all come from the disk cache would pay for nothing else. So a process that has
loaded NVRTC records what it found in each cache directory it compiles into:
``nvrtc-<where>.id`` holds the version and the path, size, mtime and inode of the library
file that was mapped. ``<where>`` is a digest of everything that steers which libnvrtc the
bindings load (``where``): the cuda.bindings version and location, the Python prefixes
and site-packages directories, ``LD_LIBRARY_PATH``, ``LD_PRELOAD``, ``CUDA_HOME``,
``CUDA_PATH`` and ``CONDA_PREFIX`` with the real paths of their directories, and the size
and mtime of ``/etc/ld.so.cache``.

A later process with the same ``<where>`` takes the version from the record when the
recorded file still has that size, mtime and inode and no libnvrtc is loaded in the
process already (by another library: the bindings would use that one): a few ``stat``
calls, NVRTC untouched. Anything else (no record, a changed file, another platform than
Linux, an unwritable directory) asks NVRTC as before. After a compile the version is
checked against NVRTC itself (loaded by then; the first compile of a process does it);
a record that was wrong is replaced and the right version is used from then on. See
docs/internals.md, "The kernel cache and NVRTC".
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import re
import site
import sys
import tempfile
import threading
from pathlib import Path

from .. import _nvrtc
from .cache import cache_key, read_regular

log = logging.getLogger("tenferro_cuda")
SONAMES = ("libnvrtc.so.13", "libnvrtc.so.12")  # besides the recorded file's own name
STEERING = ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CONDA_PREFIX")
_VERSION_RE = re.compile(r"\d+\.\d+")


class _Known:
    """This process's answer: the version, and whether NVRTC itself gave it."""

    version: str | None = None
    asked = False


_known = _Known()
_lock = threading.Lock()
_recorded: set[str] = set()  # directories this process has recorded into


def version(directory: Path) -> str:
    """``major.minor`` of the NVRTC this process compiles with (memoised): from the record
    in ``directory`` when it is valid, else from NVRTC."""
    known = version_from_record(directory)
    if known is not None:
        return known
    with _lock:
        if _known.version is None:
            _known.version = _ask()
        return _known.version


def version_from_record(directory: Path) -> str | None:
    """``version(directory)`` when it needs no NVRTC (memoised, or a valid record), else
    None and nothing is remembered: NVRTC is never loaded here."""
    if _known.version is not None:
        return _known.version
    with _lock:
        if _known.version is None:
            _known.version = _read_record(directory)
        return _known.version


def confirm() -> str:
    """The version NVRTC itself reports (call it after a compile, when NVRTC is loaded). A
    version that came from a wrong record is replaced for the rest of the process."""
    with _lock:
        if not _known.asked:
            real = _ask()
            if _known.version not in (None, real):
                log.warning("kernel cache: the NVRTC record said %s but NVRTC is %s; "
                            "using %s from now on", _known.version, real, real)
            _known.version = real
        return _known.version or _ask()


def record(directory: Path) -> None:
    """Record the confirmed version in ``directory`` (once per directory and process)."""
    with _lock:
        if _known.asked and _known.version is not None:
            _write_record(directory, _known.version)


def _ask() -> str:
    major, minor = _nvrtc.version()  # loads libnvrtc on first use
    _known.asked = True
    return f"{major}.{minor}"


@functools.lru_cache(maxsize=1)
def where() -> str:
    """Digest of what steers which libnvrtc gets loaded (see the module docstring)."""
    sites: list[str] = getattr(site, "getsitepackages", list)()  # (absent in embedded ones)
    parts: list[str | bytes] = ["tenferro nvrtc record 1", sys.platform, _nvrtc.origin(),
                                sys.prefix, sys.base_prefix, *sites]
    if site.ENABLE_USER_SITE:
        parts.append(site.getusersitepackages())
    for var in STEERING:
        value = os.environ.get(var, "")
        parts += [var, value, *(os.path.realpath(p) for p in value.split(os.pathsep) if p)]
    parts += ["LD_PRELOAD", os.environ.get("LD_PRELOAD", "")]
    try:
        st = os.stat("/etc/ld.so.cache")
        parts.append(f"{st.st_size} {st.st_mtime_ns}")
    except OSError:
        parts.append("-")
    return cache_key(tuple(parts))[:16]


def record_path(directory: Path) -> Path:
    return directory / f"nvrtc-{where()}.id"


def _stat_line(ver: str, path: str) -> str | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL byte in a damaged record's path
        return None
    return f"{ver}\t{path}\t{st.st_size}\t{st.st_mtime_ns}\t{st.st_ino}\n"


def _read_record(directory: Path) -> str | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        data = read_regular(record_path(directory), 4096)
        text = data.decode() if data is not None else ""
    except (OSError, UnicodeDecodeError):
        return None
    fields = text.split("\t")
    if len(fields) != 5 or not _VERSION_RE.fullmatch(fields[0]):
        return None
    ver, path = fields[0], fields[1]
    if _stat_line(ver, path) != text or _loaded(os.path.basename(path)):
        return None
    return ver


def _loaded(recorded: str) -> bool:
    """Whether a libnvrtc is mapped in this process already (RTLD_NOLOAD probes)."""
    for name in dict.fromkeys((recorded, *SONAMES)):
        try:
            ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        except OSError:
            continue
        return True
    return False


@functools.lru_cache(maxsize=1)
def loaded_library() -> str | None:
    """The path of the one libnvrtc mapped in this process (None: none, several, or no
    ``/proc/self/maps``). Asked once a compile has loaded NVRTC, and read once: the maps
    of a process with many libraries take milliseconds to read."""
    try:
        with open("/proc/self/maps") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    paths = set()
    for line in lines:
        if "/libnvrtc.so" in line:
            fields = line.split(None, 5)  # address perms offset dev inode path
            if len(fields) == 6 and os.path.basename(fields[5]).startswith("libnvrtc.so"):
                paths.add(fields[5])
    return paths.pop() if len(paths) == 1 else None


def _write_record(directory: Path, ver: str) -> None:
    key = str(directory)
    if key in _recorded or not sys.platform.startswith("linux"):
        return
    _recorded.add(key)
    path = loaded_library()
    line = _stat_line(ver, path) if path is not None else None
    if line is None:
        return
    target = record_path(directory)
    try:
        if target.exists() and read_regular(target, 4096) == line.encode():
            return
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=".id")
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(line)
            os.replace(tmp, target)
        except BaseException:
            os.unlink(tmp)
            raise
    except (OSError, UnicodeDecodeError):
        pass  # no record: later processes ask NVRTC, as without one
