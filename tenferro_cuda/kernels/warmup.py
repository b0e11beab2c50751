"""The host-side work every first kernel of a process needs, done while the driver starts.

The first library kernel of a process pays, besides loading its own cache entry, for
things that are the same for every kernel: the NVRTC version from the cache directory's
record (``toolchain.version``: a digest of what steers the library search, a few ``stat``
calls and ``dlopen`` probes), the digest of ``ptx/include`` (``compiler.headers_digest``),
the import of the kernel-family modules (``registry.family``) and the read of their
sources (``Family.read_source``, part of every cache key), and the parameter layouts of
the launches most programs start with (``launch.layout`` of the codes listed in
``LAYOUTS`` by the op families that use them). Together about 2 ms,
which made the first kernel from the disk cache cost 3 ms, against under 1 ms for each
later one.

``start()`` does that work once per process in a daemon thread. The first runtime calls it
just before it initialises the driver and retains the primary context, which takes
hundreds of milliseconds with the GIL released, so the work is done by the time a first
kernel is looked up. It is file and import work only: no CUDA call, no NVRTC load (a
missing or stale record is left to the caller, which asks NVRTC as before). Every step
is the memoised function the caller would run itself, each safe to run from two threads,
so a caller that gets there first only repeats a digest. Nothing here raises: a failure
is logged at debug level and the caller does the work on first use, as without a
warm-up. ``TENFERRO_CUDA_WARMUP=0`` turns it off.
"""

from __future__ import annotations

import logging
import os
import threading

__all__ = ["start", "started", "LAYOUTS"]

log = logging.getLogger("tenferro_cuda")
_lock = threading.Lock()
_thread: list[threading.Thread] = []
# (argument codes, tail length) of launches worth laying out before the first kernel; an
# op family adds its own when it is imported (the warm-up never imports one)
LAYOUTS: list[tuple[str, int]] = []


def _work() -> None:
    from . import compiler, launch, registry, toolchain

    try:
        for codes, ntail in tuple(LAYOUTS):
            launch.layout(codes, ntail)
        directory = compiler.shared_cache().directory
        toolchain.version_from_record(directory)  # never loads NVRTC
        compiler.headers_digest()
        for fam in registry.families().values():
            fam.read_source()
    except Exception as exc:  # noqa: BLE001 - the caller does the work on first use
        log.debug("kernel warm-up failed: %r", exc)


def start() -> None:
    """Run the warm-up in a daemon thread, once per process (see the module docstring)."""
    if _thread or os.environ.get("TENFERRO_CUDA_WARMUP", "1") == "0":
        return
    with _lock:
        if _thread:
            return
        thread = threading.Thread(target=_work, name="tenferro-kernel-warmup", daemon=True)
        _thread.append(thread)
    thread.start()


def started() -> threading.Thread | None:
    """The warm-up thread of this process (None: not started)."""
    return _thread[0] if _thread else None
