"""The only module that imports NCCL's bindings (NVIDIA's nccl4py), lazily.

Contract:
- Importing this module loads nothing. ``load()`` imports ``nccl.bindings.nccl`` (the
  low-level bindings of nccl4py: pointers and streams are plain ints; its high-level
  ``nccl.core``, which imports cuda.core, is never imported), checks the ABI constants
  used here against the bindings' enums, and asks libnccl for its version, which loads
  the library. A failure raises ``UnsupportedError`` naming what is missing and how to
  install it (``pip install 'tenferro-cuda[nccl]'``); it is remembered, so every later
  call reports the same error.
- Every NCCL call goes through a wrapper here that turns the bindings' ``NCCLError``
  into a typed error naming the API and the ``ncclResult_t``, with an ``NcclError`` as
  ``__cause__``: ``ValidationError`` for ``ncclInvalidArgument`` and
  ``ncclInvalidUsage`` (NCCL refused the call before enqueueing anything),
  ``BackendSourceError`` otherwise (CUDA, system, internal, remote and timeout failures).
  The communicator's last error text (``ncclGetLastError``) is added when there is one.
- Communicators are the bindings' ``Comm`` objects, opaque above this module. NCCL reads
  its own environment (``NCCL_*``) when a communicator is made; nothing here sets it.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

from ._library import load_once
from .errors import BackendSourceError, NcclError, UnsupportedError, ValidationError

__all__ = ["load", "available", "version", "error_for", "c_name", "unique_id", "init_all",
           "init_rank", "all_reduce", "all_gather", "reduce_scatter", "broadcast", "send",
           "recv", "group_start", "group_end", "finalize", "destroy", "abort",
           "DTYPES", "REDUCE_OPS", "UNIQUE_ID_BYTES", "INSTALL"]

# ABI constants of nccl.h (ncclDataType_t, ncclRedOp_t); load() checks them.
DTYPES = {"int8": 0, "uint8": 1, "int32": 2, "uint32": 3, "int64": 4, "uint64": 5,
          "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}
REDUCE_OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
RESULTS = {0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError",
           3: "ncclInternalError", 4: "ncclInvalidArgument", 5: "ncclInvalidUsage",
           6: "ncclRemoteError", 7: "ncclInProgress", 8: "ncclTimeout"}
CALLER_CODES = frozenset({4, 5})
UNIQUE_ID_BYTES = 128
INSTALL = "pip install 'tenferro-cuda[nccl]'"
_MODULE = "nccl.bindings.nccl"
_DIST = "nccl4py>=0.6,<0.7"

_lock = threading.Lock()
_state: dict = {}  # "lib": the bindings module, "version": (major, minor, patch), "error"


def _missing(what: str, exc: BaseException | None) -> UnsupportedError:
    detail = f" ({type(exc).__name__}: {str(exc).strip()})" if exc is not None else ""
    err = UnsupportedError(f"collectives need NCCL: {what}{detail}; install it with "
                           f"{INSTALL}", op="nccl")
    err.__cause__ = exc
    return err


def _import_bindings() -> Any:
    try:
        return importlib.import_module(_MODULE)
    except ImportError as exc:
        if exc.name is None or (_MODULE + ".").startswith(exc.name + "."):
            raise _missing(f"nccl4py is not installed ({_DIST})", exc) from exc
        raise _missing("nccl4py could not be imported", exc) from exc


def _load_now() -> tuple[Any, tuple[int, int, int]]:
    lib = _import_bindings()
    if not hasattr(lib, "Comm") or not hasattr(lib, "comm_init_all"):
        raise _missing(f"the installed nccl4py is not {_DIST}", None)
    for enum, table in ((lib.DataType, DTYPES), (lib.RedOp, REDUCE_OPS)):
        for name, code in table.items():
            member = getattr(enum, name.capitalize())
            if int(member) != code:
                raise _missing(f"unexpected NCCL ABI ({member!r} is not {code})", None)
    try:
        code = int(lib.get_version())
    except Exception as exc:  # noqa: BLE001 - the loader's DynamicLibNotFoundError and kin
        raise _missing("libnccl.so.2 could not be loaded (install the NCCL library, e.g. "
                       "the nvidia-nccl-cu13 wheel)", exc) from exc
    return lib, (code // 10000, code // 100 % 100, code % 100)


def load() -> Any:
    """The bindings module, loaded on first use (``UnsupportedError`` when nccl4py or
    libnccl is missing; the failure is remembered)."""
    return load_once(_state, _lock, _load_now, UnsupportedError)


def available() -> bool:
    """Whether NCCL can be used (nccl4py and libnccl load)."""
    try:
        load()
    except UnsupportedError:
        return False
    return True


def version() -> tuple[int, int, int]:
    """libnccl's version, e.g. ``(2, 28, 9)``."""
    load()
    return _state["version"]


def error_for(api: str, code: int, op: str = "", detail: str = "") -> Exception:
    """The tenferro error for a failed NCCL call (pure: usable without NCCL)."""
    code = int(code)
    cause = NcclError(api, code, RESULTS.get(code, f"ncclResult({code})"))
    text = f"{cause}: {detail}" if detail else str(cause)
    err: Exception
    if code in CALLER_CODES:
        err = ValidationError(text, op=op)
    else:
        err = BackendSourceError(text, op=op)
    err.__cause__ = cause
    return err


def _last_error(lib: Any, comm: Any) -> str:
    if comm is None:
        return ""
    try:
        return str(lib.get_last_error(comm) or "").strip()
    except Exception:  # noqa: BLE001 - only a detail of the error being raised
        return ""


def c_name(name: str) -> str:
    """The C name of a binding function: ``all_reduce`` -> ``ncclAllReduce``."""
    return "nccl" + "".join(part.capitalize() for part in name.split("_"))


def _call(name: str, op: str, comm: Any, *args: Any) -> Any:
    """``lib.<name>(*args)``, its NCCLError turned into ours (``comm`` for the detail)."""
    lib = load()
    try:
        return getattr(lib, name)(*args)
    except lib.NCCLError as exc:
        status = getattr(exc, "status", None)
        if status is None:
            raise BackendSourceError(f"{c_name(name)} failed: {exc}", op=op) from exc
        err = error_for(c_name(name), int(status), op, _last_error(lib, comm))
        raise err from err.__cause__  # the NcclError, not nccl4py's exception


# --- communicators -----------------------------------------------------------------------

def unique_id(op: str = "nccl_unique_id") -> bytes:
    """A new ``ncclUniqueId`` (``UNIQUE_ID_BYTES`` bytes) for ``init_rank``."""
    return bytes(_call("get_unique_id", op, None))


def init_all(ordinals: list[int], op: str) -> list:
    """One communicator per device of ``ordinals`` (rank i on ``ordinals[i]``), in this
    process (``ncclCommInitAll``)."""
    return list(_call("comm_init_all", op, None, len(ordinals), list(ordinals)))


def init_rank(nranks: int, uid: bytes, rank: int, op: str) -> Any:
    """Rank ``rank`` of ``nranks`` on the current device (``ncclCommInitRank``); blocks
    until every rank has joined."""
    return _call("comm_init_rank", op, None, nranks, bytearray(uid), rank)


def finalize(comm: Any, op: str) -> None:
    _call("comm_finalize", op, comm, comm)


def destroy(comm: Any, op: str) -> None:
    _call("comm_destroy", op, comm, comm)


def abort(comm: Any) -> None:
    """``ncclCommAbort``; never raises (used by finalizers)."""
    try:
        lib = _state.get("lib")
        if lib is not None:
            lib.comm_abort(comm)
    except Exception:  # noqa: BLE001 - a finalizer must never raise
        pass


def group_start(op: str) -> None:
    _call("group_start", op, None)


def group_end(op: str) -> None:
    _call("group_end", op, None)


# --- collectives and point-to-point (pointers, counts, codes and streams are ints) -------

def all_reduce(send: int, recv: int, count: int, dtype: int, red: int, comm: Any,
               stream: int, op: str) -> None:
    _call("all_reduce", op, comm, send, recv, count, dtype, red, comm, stream)


def all_gather(send: int, recv: int, count: int, dtype: int, comm: Any, stream: int,
               op: str) -> None:
    _call("all_gather", op, comm, send, recv, count, dtype, comm, stream)


def reduce_scatter(send: int, recv: int, count: int, dtype: int, red: int, comm: Any,
                   stream: int, op: str) -> None:
    _call("reduce_scatter", op, comm, send, recv, count, dtype, red, comm, stream)


def broadcast(send: int, recv: int, count: int, dtype: int, root: int, comm: Any,
              stream: int, op: str) -> None:
    _call("broadcast", op, comm, send, recv, count, dtype, root, comm, stream)


def send(buf: int, count: int, dtype: int, peer: int, comm: Any, stream: int,
         op: str) -> None:
    _call("send", op, comm, buf, count, dtype, peer, comm, stream)


def recv(buf: int, count: int, dtype: int, peer: int, comm: Any, stream: int,
         op: str) -> None:
    _call("recv", op, comm, buf, count, dtype, peer, comm, stream)
