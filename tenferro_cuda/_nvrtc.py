"""The only module that imports ``cuda.bindings.nvrtc``.

``compile_program`` is the whole NVRTC life cycle: create program -> add name
expressions -> compile -> read cubin (or PTX) and lowered names -> destroy program. The
program is destroyed on every path, failures included. A rejected source raises
``CompileError`` whose message begins with the NVRTC log and names the source, options,
target and NVRTC version, so that the failure can be reproduced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from cuda import bindings as _bindings
from cuda.bindings import nvrtc as _n

from .errors import BackendSourceError, CompileError, NvrtcError

__all__ = ["version", "origin", "compile_program", "CompiledProgram", "nvrtc_error_for"]


def _name(code: int) -> str:
    try:
        return _n.nvrtcResult(code).name
    except ValueError:
        return f"nvrtcResult({code})"


def nvrtc_error_for(api: str, code: int, op: str = "") -> BackendSourceError:
    cause = NvrtcError(api, int(code), _name(int(code)))
    err = BackendSourceError(str(cause), op=op)
    err.__cause__ = cause
    return err


def _check(result, api: str, op: str = ""):
    if result[0]:
        raise nvrtc_error_for(api, int(result[0]), op)
    return result[1] if len(result) == 2 else None


def version() -> tuple[int, int]:
    """The NVRTC library version (major, minor)."""
    result = _n.nvrtcVersion()
    if result[0]:
        raise nvrtc_error_for("nvrtcVersion", int(result[0]))
    return int(result[1]), int(result[2])


def supported_archs() -> tuple[int, ...]:
    """The ``sm_XX`` numbers this NVRTC compiles for (``nvrtcGetSupportedArchs``)."""
    return tuple(int(a) for a in _check(_n.nvrtcGetSupportedArchs(), "nvrtcGetSupportedArchs"))


def origin() -> str:
    """The bindings that load libnvrtc: their version and directory (calls no NVRTC)."""
    return f"{getattr(_bindings, '__version__', '?')} {os.path.dirname(_bindings.__file__ or '')}"


@dataclass(frozen=True)
class CompiledProgram:
    """The output of one NVRTC compile."""

    image: bytes  # cubin (or PTX text bytes when ``ptx=True``)
    lowered: dict[str, str]  # name expression -> mangled symbol
    log: str


# NVRTC writes into the buffers below, so they are fresh ``bytearray``s: an immutable
# ``bytes`` of length 1 (the size of an empty log) is CPython's shared ``b" "``, and
# writing its NUL there made every later 1-byte " " in the process (print's separator)
# come out as NUL.
def _log(prog) -> str:
    size = _check(_n.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
    buf = bytearray(max(int(size), 1))
    _check(_n.nvrtcGetProgramLog(prog, buf), "nvrtcGetProgramLog")
    return bytes(buf).rstrip(b"\0 ").decode(errors="replace")


def _image(prog, ptx: bool) -> bytes:
    if ptx:
        size = _check(_n.nvrtcGetPTXSize(prog), "nvrtcGetPTXSize")
        buf = bytearray(max(int(size), 1))
        _check(_n.nvrtcGetPTX(prog, buf), "nvrtcGetPTX")
    else:
        size = _check(_n.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        buf = bytearray(max(int(size), 1))
        _check(_n.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN")
    return bytes(buf[:int(size)])


def compile_program(
    source: str,
    source_name: str,
    options: tuple[str, ...],
    name_expressions: tuple[str, ...] = (),
    *,
    ptx: bool = False,
    op: str = "",
) -> CompiledProgram:
    """Compile ``source``; return the image and the lowered names of ``name_expressions``."""
    prog = _check(
        _n.nvrtcCreateProgram(source.encode(), source_name.encode(), 0, [], []),
        "nvrtcCreateProgram",
        op,
    )
    try:
        for expr in name_expressions:
            _check(_n.nvrtcAddNameExpression(prog, expr.encode()), "nvrtcAddNameExpression", op)
        opts = [o.encode() for o in options]
        status = _n.nvrtcCompileProgram(prog, len(opts), opts)[0]
        log = _log(prog)
        if status:
            vmaj, vmin = version()
            raise CompileError(
                f"{log}\nNVRTC {vmaj}.{vmin} could not compile {source_name} "
                f"({_name(int(status))}); options: {' '.join(options)}",
                op=op,
                log=log,
                source_name=source_name,
                options=options,
            ) from NvrtcError("nvrtcCompileProgram", int(status), _name(int(status)))
        lowered = {}
        for expr in name_expressions:
            mangled = _check(_n.nvrtcGetLoweredName(prog, expr.encode()), "nvrtcGetLoweredName")
            lowered[expr] = mangled.decode() if isinstance(mangled, bytes) else str(mangled)
        return CompiledProgram(_image(prog, ptx), lowered, log)
    finally:
        _n.nvrtcDestroyProgram(prog)
