"""Compile kernel sources with NVRTC through the kernel cache.

``compile_cached`` is the one path by which library families, fusion plans and
extension sources are compiled. The cache key covers the source, all headers under
``ptx/include``, the options (include paths excluded: the headers' contents are hashed
instead), the target arch, the NVRTC version, the tenferro_cuda version and the name
expressions.

A cache hit calls no NVRTC: the NVRTC version comes from a record in the cache directory
when it is valid (``toolchain.py``), the header digest is computed once per process.
``fresh=True`` compiles without reading the cache and replaces its entry: the loader asks
for it when an image read from the cache does not load (an entry whose checksum and key
are right but whose image the driver refuses, or which lacks a lowered name).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from pathlib import Path

from .. import _nvrtc
from .._nvrtc import CompiledProgram
from .._version import __version__
from . import includes, toolchain
from .cache import KernelCache, cache_dir_setting, cache_key
from .registry import INCLUDE_DIR, family

log = logging.getLogger("tenferro_cuda")
BASE_OPTIONS = ("-std=c++17", "-default-device")
_caches: dict[tuple[str, str | None], KernelCache] = {}
compile_count = {"n": 0}  # NVRTC compiles in this process (observable by tests)


@functools.lru_cache(maxsize=1)
def headers_digest() -> str:
    """Digest of every file under ``ptx/include`` (relative path and bytes, in path order)."""
    parts: list[str | bytes] = []
    for rel in sorted(_files(str(INCLUDE_DIR), ())):
        with open(os.path.join(INCLUDE_DIR, *rel), "rb") as fh:
            parts += [os.sep.join(rel), fh.read()]
    return cache_key(tuple(parts))


def _files(root: str, rel: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The files under ``root`` as relative path parts."""
    out = []
    with os.scandir(os.path.join(root, *rel)) as entries:
        for entry in entries:
            if entry.is_dir():
                out += _files(root, (*rel, entry.name))
            elif entry.is_file():
                out.append((*rel, entry.name))
    return out


def nvrtc_version(directory: Path | None = None) -> str:
    """``major.minor`` of NVRTC, without loading it when the record in ``directory`` (the
    shared cache's by default) is valid (``toolchain.py``)."""
    return toolchain.version(directory if directory is not None else shared_cache().directory)


def shared_cache() -> KernelCache:
    """The process-wide cache for the current cache directory setting (looked up by the
    setting's text: no path is built once the cache exists)."""
    setting = cache_dir_setting()
    cache = _caches.get(setting)
    if cache is None:  # setdefault: two threads asking at once get one cache
        from .cache import default_cache_dir  # (looked up now: tests replace it)

        cache = _caches.setdefault(setting, KernelCache(default_cache_dir()))
    return cache


def options_for(arch: int, extra: tuple[str, ...] = ()) -> tuple[str, ...]:
    return BASE_OPTIONS + (f"--gpu-architecture=sm_{arch}",) + tuple(extra)


def compile_cached(
    source: str,
    source_name: str,
    expressions: tuple[str, ...],
    arch: int,
    extra_options: tuple[str, ...] = (),
    *,
    cache: KernelCache | None = None,
    op: str = "",
    fresh: bool = False,
) -> CompiledProgram:
    """The compiled program for ``source`` (from the cache when present, unless
    ``fresh``)."""
    return _compile(source, source_name, expressions, arch, extra_options, cache, op,
                    fresh)[0]


def _compile(source: str, source_name: str, expressions: tuple[str, ...], arch: int,
             extra_options: tuple[str, ...], cache: KernelCache | None,
             op: str, fresh: bool = False) -> tuple[CompiledProgram, bool]:
    """``compile_cached``, and whether NVRTC compiled the program (False: a cache hit)."""
    cache = cache if cache is not None else shared_cache()
    options = options_for(arch, extra_options)
    nvrtc = toolchain.version(cache.directory)
    # the headers a caller's include options reach (none for the package's own families)
    user = includes.digest(source, extra_options) if extra_options else ""
    tail = (__version__, *expressions, *((user,) if user else ()))
    key = cache_key((source, headers_digest(), *options, nvrtc, *tail))
    prog = None if fresh else cache.get(key, expressions)
    if prog is not None:
        return prog, False
    start = time.perf_counter()
    prog = _nvrtc.compile_program(
        source, source_name, options + (f"-I{INCLUDE_DIR}",), expressions, op=op
    )
    compile_count["n"] += 1
    log.info("compiled %s [%s] for sm_%d in %.1f ms", source_name,
             ", ".join(expressions)[:200], arch, 1e3 * (time.perf_counter() - start))
    real = toolchain.confirm()  # NVRTC is loaded now: check the version the key used
    if real != nvrtc:
        key = cache_key((source, headers_digest(), *options, real, *tail))
    cache.put(key, prog)
    toolchain.record(cache.directory)
    return prog, True


def compile_family(name: str, expressions: tuple[str, ...], arch: int,
                   cache: KernelCache | None = None, fresh: bool = False) -> CompiledProgram:
    """The program of ``expressions`` of the registered family ``name`` (cached)."""
    return _compile_family(name, expressions, arch, cache, fresh)[0]


def warm_family(name: str, expressions: tuple[str, ...], arch: int,
                cache: KernelCache | None = None) -> bool:
    """Put the program of ``expressions`` of family ``name`` in the cache; True when NVRTC
    compiled it, False when the cache had it."""
    return _compile_family(name, expressions, arch, cache)[1]


def _compile_family(name: str, expressions: tuple[str, ...], arch: int,
                    cache: KernelCache | None,
                    fresh: bool = False) -> tuple[CompiledProgram, bool]:
    fam = family(name)
    return _compile(fam.read_source(), fam.source, expressions, arch, (), cache,
                    f"compile:{name}", fresh)
