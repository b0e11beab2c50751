"""Read-only memory is never an output: every ``*_into`` method of the session refuses a
tensor adopted read-only (a DLPack capsule flagged READ_ONLY, a CAI with ``data[1]``
True) with ValidationError before anything is launched, while the same call with a
writable output of the same shape and dtype runs. The rule lives in
``shapes/aliasing.check_writable``; the methods run on the emulated context
(``reference.fake_context``), launches recorded, not executed."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from reference.fake_context import FakeContext, FakeSession, HostMemory

from tenferro_cuda._session_ops import all_methods
from tenferro_cuda.configs.dot import (
    DotGeneralAccumulation,
    DotGeneralConfig,
    GemmJob,
    GroupedGemmConfig,
)
from tenferro_cuda.configs.elementwise import CompareDir, ElementwiseReadOp
from tenferro_cuda.dlpack import ForeignOwner
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import UnsupportedDTypeError, ValidationError
from tenferro_cuda.ops import interop
from tenferro_cuda.shapes.aliasing import check_writable

METHODS = dict(all_methods())
INTO = sorted(name for name in METHODS if "_into" in name)
SPECIAL = {"elementwise_read_into", "copy_read_into", "axpby_read_into_accum",
           "dot_general_read_into", "dot_general_read_into_accum",
           "dot_general_read_into_accum_cached"}
GENERIC = [name for name in INTO if name not in SPECIAL]
CANDIDATES = (DType.FLOAT32, DType.INT32, DType.BOOL, DType.COMPLEX64, DType.UINT8)
SHAPE = (2, 3)


@pytest.fixture
def env():
    launches: list = []
    memory = HostMemory()
    ctx = FakeContext(memory, lambda *call: launches.append(call))
    return ctx, FakeSession(ctx), launches


def _tensor(ctx, dtype, shape=SHAPE):
    return ctx.alloc(dtype, shape, "test")


def _read_only(ctx, dtype, shape=SHAPE):
    """A tensor adopted read-only, the way ``from_dlpack`` adopts a flagged capsule."""
    nbytes = int(np.prod(shape)) * dtype.itemsize
    ptr = ctx.memory.alloc(nbytes)
    owner = ForeignOwner(0, None, readonly=True)
    return interop._adopt(ctx, ptr, dtype, shape, None, owner)


def _arguments(ctx, name, dtype):
    """Arguments (without the output) of ``name`` for operands of ``dtype``."""
    params = list(inspect.signature(METHODS[name]).parameters.values())[1:]
    args = []
    for p in params:
        if p.name == "out":
            continue
        if p.name == "direction":
            args.append(CompareDir.EQ)
        elif p.name == "pred":
            args.append(_tensor(ctx, DType.BOOL))
        else:
            args.append(_tensor(ctx, dtype))
    return args


def _owned(name: str) -> str:
    return name.replace("_read_into", "_read").replace("_into", "")


def test_the_generic_list_covers_the_elementwise_forms():
    assert {"add_into", "add_read_into", "neg_into", "compare_into", "select_into",
            "clamp_into"} <= set(GENERIC)
    for name in GENERIC:
        assert _owned(name) in METHODS, name


@pytest.mark.parametrize("name", GENERIC)
def test_into_refuses_a_read_only_output(env, name):
    ctx, s, launches = env
    for dtype in CANDIDATES:
        args = _arguments(ctx, name, dtype)
        try:
            want = getattr(s, _owned(name))(*args)
        except (ValidationError, UnsupportedDTypeError):
            continue
        break
    else:
        pytest.fail(f"{name}: no operand dtype among {CANDIDATES} is accepted")
    before = len(launches)
    getattr(s, name)(*args, _tensor(ctx, want.dtype, want.shape))  # writable: it runs
    assert len(launches) > before
    before = len(launches)  # a second call takes the prepared fast path where one exists
    with pytest.raises(ValidationError, match="read-only"):
        getattr(s, name)(*args, _read_only(ctx, want.dtype, want.shape))
    assert len(launches) == before


def test_elementwise_read_into(env):
    ctx, s, launches = env
    args = [_tensor(ctx, DType.FLOAT32), _tensor(ctx, DType.FLOAT32)]
    with pytest.raises(ValidationError, match="read-only"):
        s.elementwise_read_into(ElementwiseReadOp.ADD, args, _read_only(ctx, DType.FLOAT32))
    assert launches == []
    s.elementwise_read_into(ElementwiseReadOp.ADD, args, _tensor(ctx, DType.FLOAT32))
    assert launches


def test_copy_read_into(env):
    ctx, s, launches = env
    src = _tensor(ctx, DType.INT32)
    with pytest.raises(ValidationError, match="read-only"):
        s.copy_read_into(src, _read_only(ctx, DType.INT32))
    with pytest.raises(ValidationError, match="read-only"):
        s.copy_read_into(src.T, _read_only(ctx, DType.INT32, SHAPE[::-1]))
    assert launches == [] and ctx.memory  # nothing copied either (no memory model call)
    s.copy_read_into(src.T, _tensor(ctx, DType.INT32, SHAPE[::-1]))
    assert launches


def test_axpby_read_into_accum(env):
    ctx, s, launches = env
    x = _tensor(ctx, DType.FLOAT32)
    with pytest.raises(ValidationError, match="read-only"):
        s.axpby_read_into_accum(2.0, x, 1.0, _read_only(ctx, DType.FLOAT32))
    assert launches == []
    s.axpby_read_into_accum(2.0, x, 1.0, _tensor(ctx, DType.FLOAT32))
    assert launches


MATMUL = DotGeneralConfig((1,), (0,))


@pytest.mark.parametrize("form", ["read_into", "accum", "accum_cached"])
def test_dot_general_forms(env, form):
    ctx, s, launches = env
    lhs, rhs = _tensor(ctx, DType.INT32, (2, 3)), _tensor(ctx, DType.INT32, (3, 4))
    acc = DotGeneralAccumulation(1, 0)

    def call(out):
        if form == "read_into":
            return s.dot_general_read_into(lhs, rhs, MATMUL, out)
        if form == "accum":
            return s.dot_general_read_into_accum(lhs, rhs, MATMUL, acc, out)
        return s.dot_general_read_into_accum_cached(3, lhs, rhs, MATMUL, acc, out)

    call(_tensor(ctx, DType.INT32, (2, 4)))  # writable: runs (and fills the cache slot)
    before = len(launches)
    assert before
    with pytest.raises(ValidationError, match="read-only"):
        call(_read_only(ctx, DType.INT32, (2, 4)))  # the cached form takes its fast path
    assert len(launches) == before


def test_grouped_gemm_job_output(env):
    ctx, s, launches = env
    lhs, rhs = _tensor(ctx, DType.FLOAT32, (2, 3)), _tensor(ctx, DType.FLOAT32, (3, 4))
    job = GemmJob(lhs, rhs, _read_only(ctx, DType.FLOAT32, (2, 4)))
    with pytest.raises(ValidationError, match="read-only"):
        s.grouped_gemm(GroupedGemmConfig((job,)))
    assert launches == []


def test_check_writable_reads_the_owner_flag(env):
    ctx, _, _ = env
    check_writable(_tensor(ctx, DType.FLOAT32), "t")
    writable = interop._adopt(ctx, ctx.memory.alloc(24), DType.FLOAT32, SHAPE, None,
                              ForeignOwner(0, None))
    check_writable(writable[:, ::2], "t")
    with pytest.raises(ValidationError, match="out is read-only") as info:
        check_writable(_read_only(ctx, DType.FLOAT32)[1], "t")
    assert info.value.op == "t"
