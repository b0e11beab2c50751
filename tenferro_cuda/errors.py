"""The exception hierarchy of tenferro_cuda.

Every error carries ``op``: the name of the operation that raised it. Errors are
classified by whose fault they are (caller, environment, device, backend) and keep the
native status they came from. All of them pickle.
"""

from __future__ import annotations

__all__ = [
    "TenferroError",
    "ValidationError",
    "UnsupportedDTypeError",
    "UnsupportedDTypeConversionError",
    "UnsupportedError",
    "RuntimeStateError",
    "SessionEntryError",
    "BackendSourceError",
    "OutOfMemoryError",
    "CompileError",
    "ContextLostError",
    "CudaDeviceError",
    "CudaError",
    "NvrtcError",
    "CublasError",
    "NcclError",
    "VALIDATION_KINDS",
]

VALIDATION_KINDS = (
    "shape_mismatch",
    "rank_mismatch",
    "axis_out_of_bounds",
    "duplicate_axis",
    "dtype_mismatch",
    "invalid_argument",
    "overflow",
    "device_data",
)


class TenferroError(Exception):
    """Base of every tenferro_cuda error; ``op`` names the operation."""

    def __init__(self, message: str, *, op: str = "") -> None:
        super().__init__(message)
        self.op = op

    def __reduce__(self):  # keep keyword-only fields when pickled
        return (_rebuild, (type(self), self.args, self.__dict__))

    def __str__(self) -> str:
        text = super().__str__()
        return f"{self.op}: {text}" if self.op else text

    def __repr__(self) -> str:
        """``ValidationError('...', op='add', kind='shape_mismatch')``: the message and every
        field (a compile log by its length only)."""
        fields = [repr(self.args[0]) if self.args else "''"]
        for name, value in self.__dict__.items():
            if name.startswith("_"):
                continue
            if name == "log":
                fields.append(f"log=<{len(value)} characters>")
            else:
                fields.append(f"{name}={value!r}")
        return f"{type(self).__name__}({', '.join(fields)})"


def _rebuild(cls, args, state):
    obj = cls.__new__(cls)
    Exception.__init__(obj, *args)
    obj.__dict__.update(state)
    return obj


class ValidationError(TenferroError, ValueError):
    """The caller passed something invalid; nothing was allocated or launched."""

    def __init__(self, message: str, *, op: str = "", kind: str = "invalid_argument") -> None:
        if kind not in VALIDATION_KINDS:
            raise ValueError(f"unknown validation kind {kind!r}")
        super().__init__(message, op=op)
        self.kind = kind


class UnsupportedDTypeError(TenferroError, TypeError):
    """The operation is not defined for this dtype."""


class UnsupportedDTypeConversionError(TenferroError, TypeError):
    """``convert`` was asked for a conversion the promotion lattice does not allow."""


class UnsupportedError(TenferroError, NotImplementedError):
    """A well-formed request this backend does not offer (stated precisely)."""


class RuntimeStateError(TenferroError, RuntimeError):
    """Residency, wrong thread, closed scope or reclaimed buffer."""


class SessionEntryError(RuntimeStateError):
    """A session could not be entered; ``kind`` is ``reentered`` or ``contended``."""

    def __init__(self, message: str, *, op: str = "", kind: str = "reentered") -> None:
        super().__init__(message, op=op)
        self.kind = kind


class BackendSourceError(TenferroError, RuntimeError):
    """A native library failed; ``__cause__`` holds the CudaError/NvrtcError/CublasError/
    NcclError."""


class OutOfMemoryError(BackendSourceError, MemoryError):
    """The device could not provide ``requested_bytes``; the session stays usable."""

    def __init__(self, message: str, *, op: str = "", requested_bytes: int = 0) -> None:
        super().__init__(message, op=op)
        self.requested_bytes = requested_bytes


class CompileError(BackendSourceError):
    """NVRTC rejected a source; ``log`` comes first so the failure can be reproduced."""

    def __init__(
        self,
        message: str,
        *,
        op: str = "",
        log: str = "",
        source_name: str = "",
        options: tuple[str, ...] = (),
    ) -> None:
        super().__init__(message, op=op)
        self.log = log
        self.source_name = source_name
        self.options = tuple(options)


class ContextLostError(BackendSourceError):
    """A sticky CUDA error: the context is lost and the runtime is unusable."""


class CudaDeviceError(TenferroError, RuntimeError):
    """The environment lacks what is needed: no driver, no device, or a bad ordinal."""


class _NativeError(Exception):
    """A native status; the ``__cause__`` of a BackendSourceError."""

    def __init__(self, api: str, code: int, name: str) -> None:
        super().__init__(f"{api} failed: {name} ({code})")
        self.api = api
        self.code = code
        self.name = name

    def __reduce__(self):
        return (type(self), (self.api, self.code, self.name))


class CudaError(_NativeError):
    """A CUresult other than CUDA_SUCCESS."""


class NvrtcError(_NativeError):
    """An nvrtcResult other than NVRTC_SUCCESS."""


class CublasError(_NativeError):
    """A cublasStatus_t other than CUBLAS_STATUS_SUCCESS."""


class NcclError(_NativeError):
    """An ncclResult_t other than ncclSuccess."""
