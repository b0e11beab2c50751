"""Compile kernel sources with NVRTC through the kernel cache.

``compile_cached`` is the one path by which library families, fusion plans and
extension sources are compiled. The cache key covers the source, all headers under
``ptx/include``, the options (include paths excluded: the headers' contents are hashed
instead), the target arch, the NVRTC version, the tenferro_cuda version and the name
expressions.
"""

from __future__ import annotations

import functools
import logging
import time

from .. import _nvrtc
from .._nvrtc import CompiledProgram
from .cache import KernelCache, cache_key
from .registry import INCLUDE_DIR, family

log = logging.getLogger("tenferro_cuda")
BASE_OPTIONS = ("-std=c++17", "-default-device")
_caches: dict[str, KernelCache] = {}
compile_count = {"n": 0}  # NVRTC compiles in this process (observable by tests)


@functools.lru_cache(maxsize=1)
def headers_digest() -> str:
    parts: list[str | bytes] = []
    for path in sorted(INCLUDE_DIR.rglob("*")):
        if path.is_file():
            parts += [str(path.relative_to(INCLUDE_DIR)), path.read_bytes()]
    return cache_key(tuple(parts))


@functools.lru_cache(maxsize=1)
def nvrtc_version() -> str:
    major, minor = _nvrtc.version()
    return f"{major}.{minor}"


def shared_cache() -> KernelCache:
    """The process-wide cache for the current cache directory setting."""
    from .cache import default_cache_dir

    directory = default_cache_dir()
    key = str(directory)
    if key not in _caches:
        _caches[key] = KernelCache(directory)
    return _caches[key]


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
) -> CompiledProgram:
    """The compiled program for ``source`` (from the cache when present)."""
    from .. import __version__

    cache = cache if cache is not None else shared_cache()
    options = options_for(arch, extra_options)
    key = cache_key(
        (source, headers_digest(), *options, nvrtc_version(), __version__, *expressions)
    )
    prog = cache.get(key)
    if prog is not None:
        return prog
    start = time.perf_counter()
    prog = _nvrtc.compile_program(
        source, source_name, options + (f"-I{INCLUDE_DIR}",), expressions, op=op
    )
    compile_count["n"] += 1
    log.info("compiled %s [%s] for sm_%d in %.1f ms", source_name,
             ", ".join(expressions)[:200], arch, 1e3 * (time.perf_counter() - start))
    cache.put(key, prog)
    return prog


def compile_family(name: str, expressions: tuple[str, ...], arch: int,
                   cache: KernelCache | None = None) -> CompiledProgram:
    fam = family(name)
    return compile_cached(fam.read_source(), fam.source, expressions, arch, cache=cache,
                          op=f"compile:{name}")
