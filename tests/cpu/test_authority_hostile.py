"""Authority and finalizers against a hostile extension author.

- Every owner of something released once derives from Authority (copies and pickles
  refused), the cuBLASLt owners included.
- A communicator never closed is aborted when collected, on whatever thread collects it;
  NCCL sets the current device, so the abort runs under ``guard.foreign_call`` and the
  collecting thread's context is left as it was.
- Lent objects keep refusing after their scope, ones reached through attributes too.
"""

from __future__ import annotations

import copy
import gc
import pickle
import threading

import pytest
from reference.fake_context import HostMemory
from reference.fake_ctx_stack import Ctx as StackCtx
from reference.fake_ctx_stack import install as install_stack
from reference.fake_nccl import FakeNccl
from reference.fake_sessions import Ctx, Session

import tenferro_cuda as tc
from tenferro_cuda import _nccl
from tenferro_cuda.collectives import Communicator
from tenferro_cuda.exec import entry

# --- 1. the cuBLASLt owners ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["_LtHandle", "LtGemm"])
@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, pickle.dumps],
                         ids=["copy", "deepcopy", "pickle"])
def test_cublas_lt_owners_refuse_copies(name, how):
    """``_LtHandle`` owns a cublasLtHandle_t and ``LtGemm`` its matmul descriptor and
    matrix layouts, each destroyed once by a ``weakref.finalize``; a copy holds the same
    handle values without the finalizer (a second, dangling owner)."""
    from tenferro_cuda import _cublas_lt

    cls = getattr(_cublas_lt, name)
    obj = object.__new__(cls)  # no __init__: no handle made (neither class has __del__)
    with pytest.raises(TypeError):
        how(obj)


# --- 2. a communicator collected on a thread with a foreign context ------------------------

PRIMARY = {0: StackCtx(0x1000), 1: StackCtx(0x1100)}
FOREIGN0 = StackCtx(0x2000)  # a (non-primary) context of device 0, made by another library
DEVICE_OF = {int(PRIMARY[0]): 0, int(PRIMARY[1]): 1, int(FOREIGN0): 0}


class NcclLikeAbort(FakeNccl):
    """``comm_abort`` does what ncclCommAbort does with the CUDA runtime:
    ``cudaGetDevice(&saved); cudaSetDevice(comm's device); ...; cudaSetDevice(saved)``,
    where cudaSetDevice makes the device's primary context current (cuCtxSetCurrent)."""

    def __init__(self, model) -> None:
        super().__init__()
        self.model = model

    def comm_abort(self, comm) -> None:
        super().comm_abort(comm)
        m = self.model
        top = m.stack[-1] if m.stack else None
        saved = DEVICE_OF[int(top)] if top is not None else 0
        if comm.device != saved:
            m.cuCtxSetCurrent(PRIMARY[comm.device])
            m.cuCtxSetCurrent(PRIMARY[saved])


@pytest.fixture
def lib(monkeypatch):
    model = install_stack(monkeypatch)
    fake = NcclLikeAbort(model)
    monkeypatch.setattr(_nccl, "_state", {"lib": fake, "version": (2, 28, 9)})
    monkeypatch.setattr(entry, "_session_types", [Session])
    yield fake
    gc.collect()


def _communicator_on_device_1():
    session = Session(Ctx(HostMemory(), 1))
    return Communicator.from_sessions([session])


def test_explicit_abort_leaves_the_callers_context(lib):
    """Control: ``abort()`` runs NCCL under ``guard.foreign_call``."""
    lib.model.stack[:] = [FOREIGN0]
    comm = _communicator_on_device_1()
    comm.abort()
    assert lib.model.stack == [FOREIGN0]


def test_a_collected_communicator_leaves_the_collecting_threads_context(lib):
    """The finalizer (``_abort_all`` from ``weakref.finalize``) runs ncclCommAbort with no
    guard: the thread that happens to collect it finds its foreign context replaced by
    device 0's primary context."""
    lib.model.stack[:] = [FOREIGN0]
    comm = _communicator_on_device_1()
    del comm
    gc.collect()
    assert lib.log[-1][0] == "comm_abort"
    assert lib.model.stack == [FOREIGN0]


def test_a_communicator_collected_on_another_thread_leaves_that_threads_context(lib):
    comm = _communicator_on_device_1()
    seen = {}

    def other():
        lib.model.stack[:] = [FOREIGN0]
        holder.pop()  # the last reference goes on this thread
        gc.collect()
        seen["stack"] = list(lib.model.stack)

    holder = [comm]
    del comm
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert lib.log[-1][0] == "comm_abort"
    assert seen["stack"] == [FOREIGN0]


# --- 3. lent objects reached through attributes (gap: passing) ------------------------------

def test_objects_reached_through_a_kernel_sessions_attributes_die_with_it(monkeypatch):
    """A KernelSession's ``_raw`` and a kernel Function's ``_module`` share the scope: all
    refuse after the scope and from another thread, and none can be copied."""
    import threading as th

    from reference.fake_ctx_stack import install

    from tenferro_cuda import session as session_module
    from tenferro_cuda.exec import guard
    from tenferro_cuda.raw import Function, Module

    install(monkeypatch)
    P = StackCtx(0x1000)

    class Runtime:
        context, context_id, ordinal = P, int(P), 0

        def __init__(self):
            self._tls = th.local()

        def check_alive(self, op=""):
            pass

        def current(self):
            return guard.within(P, int(P))

        def exec_context(self):
            from types import SimpleNamespace

            ctx = getattr(self._tls, "ctx", None)
            if ctx is None:
                ctx = self._tls.ctx = SimpleNamespace(
                    runtime=self, context=P, context_id=int(P), thread=th.get_ident(),
                    session_open=False, capture=None, closed=False, stream=0x77,
                    eager=True, ordinal=0, flush=lambda: None)
            return ctx

    rt = Runtime()
    monkeypatch.setattr(session_module.CudaRuntime, "get", classmethod(lambda cls, o=0: rt))
    with tc.cuda_exec_session(0) as s:
        with s.kernels("test") as ks:
            raw = ks._raw
            fn = Function(object(), Module(None, ks._ctx, ks._scope), "k")
            handle = raw.stream()
            errors = []

            def other():
                for use in (raw.stream, fn.attributes, lambda: fn._module.function("k"),
                            lambda: int(handle)):
                    try:
                        use()
                    except tc.RuntimeStateError:
                        errors.append(use)

            t = th.Thread(target=other)
            t.start()
            t.join()
            assert len(errors) == 4
            for obj in (raw, fn, fn._module, handle):
                for how in (copy.copy, copy.deepcopy, pickle.dumps):
                    with pytest.raises(TypeError):
                        how(obj)
        for use in (raw.stream, fn.attributes, lambda: fn._module.function("k"),
                    lambda: int(handle)):
            with pytest.raises(tc.RuntimeStateError):
                use()
