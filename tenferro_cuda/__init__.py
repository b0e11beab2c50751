"""tenferro_cuda: a CUDA execution layer for tensor operations.

Importing this package does no CUDA work: the driver is initialised by the first
session (``cuda_exec_session``), NVRTC by the first compile, and NCCL by the first
``Communicator``.
"""

from __future__ import annotations

from ._version import __version__
from .configs.dot import DotGeneralAccumulation, DotGeneralConfig, GemmJob, GroupedGemmConfig
from .configs.elementwise import CompareDir, ElementwiseReadOp
from .configs.fusion import ElementwiseFusionPlan, FusionInstruction
from .configs.indexing import GatherConfig, PadConfig, ScatterCombiner, ScatterConfig, SliceConfig
from .dtypes import ALL_DTYPES, DType, as_dtype, lattice_allows
from .errors import (
    BackendSourceError,
    CompileError,
    ContextLostError,
    CudaDeviceError,
    OutOfMemoryError,
    RuntimeStateError,
    SessionEntryError,
    TenferroError,
    UnsupportedDTypeConversionError,
    UnsupportedDTypeError,
    UnsupportedError,
    ValidationError,
)
from .fusion_views import broadcast_view
from .tensor import Tensor, TensorView

bool_ = DType.BOOL
int8 = DType.INT8
uint8 = DType.UINT8
int16 = DType.INT16
uint16 = DType.UINT16
int32 = DType.INT32
uint32 = DType.UINT32
int64 = DType.INT64
uint64 = DType.UINT64
float16 = DType.FLOAT16
bfloat16 = DType.BFLOAT16
float32 = DType.FLOAT32
float64 = DType.FLOAT64
complex64 = DType.COMPLEX64
complex128 = DType.COMPLEX128

_LAZY = {
    "cuda_exec_session": ("session", "cuda_exec_session"),
    "with_cuda_exec_session": ("session", "with_cuda_exec_session"),
    "CudaExecSession": ("session", "CudaExecSession"),
    "CudaRuntime": ("runtime", "CudaRuntime"),
    "CudaDeviceInfo": ("runtime", "CudaDeviceInfo"),
    "CudaRuntimeIdentity": ("runtime", "CudaRuntimeIdentity"),
    "AllocationDomainId": ("runtime", "AllocationDomainId"),
    "GpuExtensionCapability": ("runtime", "GpuExtensionCapability"),
    "Capability": ("runtime", "Capability"),
    "RawSession": ("raw", "RawSession"),
    "LaunchConfig": ("raw", "LaunchConfig"),
    "KernelArg": ("raw", "KernelArg"),
    "KernelSession": ("kernel_session", "KernelSession"),
    "CudaGraph": ("graph", "CudaGraph"),
    "Communicator": ("collectives", "Communicator"),
    "nccl_unique_id": ("collectives", "unique_id"),
}


def __getattr__(name: str):
    # Session machinery imports cuda.bindings; load it on first use, not at import.
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(f"{__name__}.{module}"), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'tenferro_cuda' has no attribute {name!r}")


__all__ = [
    "__version__", "CudaGraph", "DType", "ALL_DTYPES", "as_dtype", "lattice_allows", "Tensor",
    "TensorView",
    "bool_", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
    "float16", "bfloat16", "float32", "float64", "complex64", "complex128",
    "TenferroError", "ValidationError", "UnsupportedDTypeError",
    "UnsupportedDTypeConversionError", "UnsupportedError", "RuntimeStateError",
    "SessionEntryError", "BackendSourceError", "OutOfMemoryError", "CompileError",
    "ContextLostError", "CudaDeviceError", "CompareDir", "ElementwiseReadOp",
    "DotGeneralConfig", "DotGeneralAccumulation", "GemmJob", "GroupedGemmConfig",
    "GatherConfig", "ScatterConfig", "ScatterCombiner", "SliceConfig", "PadConfig",
    "ElementwiseFusionPlan", "FusionInstruction", "broadcast_view", *_LAZY,
]
