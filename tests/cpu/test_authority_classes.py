"""Every class whose objects hold something released exactly once derives from
``Authority``, and every such class refuses ``copy.copy``, ``copy.deepcopy`` and
``pickle`` with ``TypeError`` (a copy would be a second owner of a context, a stream,
memory or a driver handle).

The classes are found by importing every module of the package and walking
``Authority``'s subclasses; the table below is the floor, so that a class that stops
deriving from ``Authority`` fails here. Instances are made without ``__init__`` (the
refusal comes before any state is read), through a subclass whose finalizer does
nothing: an uninitialized object must not run the real one.
"""

from __future__ import annotations

import copy
import importlib
import pickle
import pkgutil

import pytest

import tenferro_cuda
from tenferro_cuda.authority import Authority

# (module, class): objects that own a release (the pool and its arenas, a scope's saved
# context stack, a capture in progress, a graph's executable graphs) or lend authority
EXPECTED = {
    ("tenferro_cuda.memory", "MemoryPool"),
    ("tenferro_cuda.memory", "_Arena"),
    ("tenferro_cuda.memory", "DeviceBuffer"),
    ("tenferro_cuda.graph_rebind", "Executables"),
    ("tenferro_cuda.graph", "CudaGraph"),
    ("tenferro_cuda.graph", "CaptureScope"),
    ("tenferro_cuda.exec.guard", "ScopeGuard"),
    ("tenferro_cuda.exec.capture", "CaptureState"),
    ("tenferro_cuda.exec.capture", "GraphMemory"),
    ("tenferro_cuda.exec.context", "ExecContext"),
    ("tenferro_cuda.exec.blas", "Blas"),
    ("tenferro_cuda.exec.blas_groups", "PinnedRing"),
    ("tenferro_cuda.exec.peer", "Link"),
    ("tenferro_cuda.kernels.launch", "PreparedLaunch"),
    ("tenferro_cuda.kernels.launch", "WatchedLaunch"),
    ("tenferro_cuda.runtime", "CudaRuntime"),
    ("tenferro_cuda.session", "CudaExecSession"),
    ("tenferro_cuda.raw", "RawSession"),
    ("tenferro_cuda.raw_lent", "DevicePointer"),
    ("tenferro_cuda.raw_lent", "StreamHandle"),
    ("tenferro_cuda.raw_lent", "Module"),
    ("tenferro_cuda.raw_lent", "Function"),
    ("tenferro_cuda.kernel_session", "KernelSession"),
    ("tenferro_cuda.dlpack", "ForeignOwner"),
    ("tenferro_cuda.cai", "HeldProducer"),
    ("tenferro_cuda._cublas", "Handle"),
    ("tenferro_cuda._cublas_lt", "_LtHandle"),
    ("tenferro_cuda._cublas_lt", "LtGemm"),
    ("tenferro_cuda.collectives.communicator", "Communicator"),
}


def _all_subclasses() -> set[type]:
    for info in pkgutil.walk_packages(tenferro_cuda.__path__, "tenferro_cuda."):
        if info.name != "tenferro_cuda.__main__":
            importlib.import_module(info.name)
    found: set[type] = set()
    todo = [Authority]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in found and sub.__module__.startswith("tenferro_cuda."):
                found.add(sub)
                todo.append(sub)
    return found


CLASSES = sorted(_all_subclasses(), key=lambda c: (c.__module__, c.__qualname__))


def test_the_owners_of_a_release_carry_authority():
    names = {(c.__module__, c.__qualname__) for c in CLASSES}
    assert EXPECTED <= names, sorted(EXPECTED - names)


def _bare(cls: type) -> object:
    """An instance of ``cls`` with no state and a finalizer that does nothing."""
    inert = type(f"Inert{cls.__name__}", (cls,), {"__slots__": (), "__del__": lambda self: None})
    return object.__new__(inert)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: f"{c.__module__}.{c.__qualname__}")
@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, pickle.dumps],
                         ids=["copy", "deepcopy", "pickle"])
def test_copy_and_pickle_are_refused(cls, how):
    obj = _bare(cls)
    with pytest.raises(TypeError, match="authority"):
        how(obj)
