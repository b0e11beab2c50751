"""Every session op refuses a tensor resident on another execution context (another
thread's stream, another runtime) with RuntimeStateError before it allocates or launches
anything -- each tensor argument in turn, over FakeContext (the op family functions run
unchanged, exactly as the facade calls them after its entry checks).

Two sweeps: every method whose required parameters all accept float32 tensors, and a
hand-made call of every other tensor-taking family (configs, index tensors, sequences of
tensors, grouped GEMM jobs, fusion inputs, ``_into`` outputs)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from reference.fake_context import FakeContext, HostMemory, host_upload

from tenferro_cuda._session_ops import TABLES
from tenferro_cuda.configs.dot import (
    DotGeneralAccumulation,
    DotGeneralConfig,
    GemmJob,
    GroupedGemmConfig,
)
from tenferro_cuda.configs.elementwise import CompareDir, ElementwiseReadOp
from tenferro_cuda.configs.fusion import ElementwiseFusionPlan as P
from tenferro_cuda.configs.fusion import FusionInstruction as Ins
from tenferro_cuda.configs.indexing import GatherConfig, PadConfig, ScatterConfig, SliceConfig
from tenferro_cuda.errors import RuntimeStateError

M = {n: f for _, t in TABLES for n, f in t}
C = [None]  # the calling context of the case being run


def f32():
    return np.arange(1, 7, dtype=np.float32).reshape(2, 3)


def i32(rows):
    return np.array(rows, np.int32)


def z22():
    return np.zeros((2, 2), np.float32)


def _dot(T, name, *rest):
    """``name``(lhs, rhs, config, *rest) of a (2, 3) x (3, 2) product."""
    return M[name](C[0], T(f32()), T(f32().T.copy()), DotGeneralConfig((1,), (0,)), *rest)


GATHER = dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
              index_vector_dim=1, slice_sizes=(1, 3))
SCATTER = dict(update_window_dims=(1,), inserted_window_dims=(0,),
               scatter_dims_to_operand_dims=(0,), index_vector_dim=1)

CASES = {
    "select": lambda T: M["select"](C[0], T(np.array([[1, 0, 1], [0, 1, 0]], bool)),
                                    T(f32()), T(f32())),
    "bitwise_and": lambda T: M["bitwise_and"](C[0], T(np.ones((2, 3), np.int32)),
                                              T(np.ones((2, 3), np.int32))),
    "compare": lambda T: M["compare"](C[0], T(f32()), T(f32()), CompareDir.GE),
    "elementwise_read_into": lambda T: M["elementwise_read_into"](
        C[0], ElementwiseReadOp.ADD, [T(f32()), T(f32())], T(f32())),
    "cast": lambda T: M["cast"](C[0], T(f32()), "float64"),
    "transpose": lambda T: M["transpose"](C[0], T(f32()), (1, 0)),
    "reshape": lambda T: M["reshape"](C[0], T(f32()), (3, 2)),
    "broadcast_in_dim": lambda T: M["broadcast_in_dim"](C[0], T(f32()), (4, 2, 3), (1, 2)),
    "extract_diagonal": lambda T: M["extract_diagonal"](C[0], T(f32()), 0, 1),
    "tril": lambda T: M["tril"](C[0], T(f32())),
    "reduce_sum": lambda T: M["reduce_sum"](C[0], T(f32()), (1,)),
    "argmax": lambda T: M["argmax"](C[0], T(f32()), 1),
    "cumsum": lambda T: M["cumsum"](C[0], T(f32()), 1),
    "axpby_read_into_accum": lambda T: M["axpby_read_into_accum"](C[0], 2.0, T(f32()), 1.0,
                                                                  T(f32())),
    "gather": lambda T: M["gather"](C[0], T(f32()), T(i32([[1], [0]])),
                                    GatherConfig(**GATHER)),
    "scatter": lambda T: M["scatter"](C[0], T(f32()), T(i32([[1], [0]])), T(f32()),
                                      ScatterConfig(**SCATTER)),
    "slice": lambda T: M["slice"](C[0], T(f32()), SliceConfig((0, 1), (2, 3))),
    "reverse": lambda T: M["reverse"](C[0], T(f32()), (1,)),
    "concatenate": lambda T: M["concatenate"](C[0], [T(f32()), T(f32())], 0),
    "dynamic_slice": lambda T: M["dynamic_slice"](C[0], T(f32()), T(i32([0, 1])), (1, 2)),
    "dynamic_update_slice": lambda T: M["dynamic_update_slice"](
        C[0], T(f32()), T(np.ones((1, 2), np.float32)), T(i32([0, 1]))),
    "pad": lambda T: M["pad"](C[0], T(f32()), PadConfig((1, 0), (0, 1))),
    "dot_general": lambda T: _dot(T, "dot_general"),
    "dot_general_read_into": lambda T: _dot(T, "dot_general_read_into", T(z22())),
    "dot_general_read_into_accum": lambda T: _dot(T, "dot_general_read_into_accum",
                                                  DotGeneralAccumulation(), T(z22())),
    "dot_general_read_into_accum_cached": lambda T: M["dot_general_read_into_accum_cached"](
        C[0], 0, T(f32()), T(f32().T.copy()), DotGeneralConfig((1,), (0,)),
        DotGeneralAccumulation(), T(z22())),
    "grouped_gemm": lambda T: M["grouped_gemm"](C[0], GroupedGemmConfig((
        GemmJob(T(f32()), T(f32().T.copy()), T(z22())),
        GemmJob(T(f32()), T(f32().T.copy()), T(z22()))))),
    "fusion": lambda T: M["execute_elementwise_fusion"](
        C[0], [T(f32()), T(f32())], P(2, [Ins("add", (0, 1))], (2,))),
}


def _generic():
    out = []
    for name, fn in M.items():
        if name in ("from_dlpack", "from_cuda_array_interface"):
            continue
        req = [p for p in list(inspect.signature(fn).parameters.values())[1:]
               if p.default is inspect.Parameter.empty]
        if not req:
            continue
        ctx = FakeContext(HostMemory(), lambda *a: None)
        try:
            fn(ctx, *[host_upload(ctx, np.arange(1, 5, dtype=np.float32)) for _ in req])
        except Exception:  # noqa: BLE001 - needs other arguments: the hand-made cases
            continue
        n = len(req)
        out.append((name, lambda T, fn=fn, n=n: fn(C[0], *[T(np.arange(1, 5, dtype=np.float32))
                                                         for _ in range(n)])))
    return out


def _count(case):
    C[0] = FakeContext(HostMemory(), lambda *a: None)
    made = []
    try:
        case(lambda a: made.append(1) or host_upload(C[0], a))
    except Exception:  # noqa: BLE001 - the fakes have no cuBLAS: residency comes first
        pass
    return len(made)


ALL = sorted(CASES.items()) + _generic()
PARAMS = [(name, case, i) for name, case in ALL for i in range(_count(case))]


@pytest.mark.parametrize("name,case,i", PARAMS, ids=[f"{n}-arg{i}" for n, _, i in PARAMS])
def test_a_tensor_of_another_context_is_refused_before_any_work(name, case, i):
    launches = []
    ctx = C[0] = FakeContext(HostMemory(), lambda *a: launches.append(a))
    other = FakeContext(HostMemory(), None)
    seen = [0]

    def T(a):
        j = seen[0]
        seen[0] += 1
        t = host_upload(other if j == i else ctx, a)
        return t

    made = _count(case)  # (resets C[0]: set it again)
    C[0] = ctx
    seen[0] = 0
    before = ctx.home.allocations
    with pytest.raises(RuntimeStateError, match="another thread's stream"):
        case(T)
    assert launches == []
    assert ctx.home.allocations - before == made - 1  # only the test's own uploads
