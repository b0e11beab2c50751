"""A Python int too large for a float dtype (``10**400``) given as a scalar -- axpby's
alpha/beta, ``full``'s value, ``scale_tensor_write``'s factor, a dot's alpha/beta on every
path (general, cached first and warm, grouped) -- is a ValidationError (kind
``overflow``) raised before anything is launched, as for an elementwise scalar operand.
"""

from __future__ import annotations

import pytest
from dot_fakes import MM, Rec, session
from reference.fake_context import FakeContext, FakeSession, HostMemory

from tenferro_cuda.configs.dot import DotGeneralAccumulation, GemmJob, GroupedGemmConfig
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import TenferroError, ValidationError

F32 = DType.FLOAT32
HUGE = 10 ** 400


@pytest.fixture
def env():
    launches: list = []
    ctx = FakeContext(HostMemory(), lambda *call: launches.append(call))
    return ctx, FakeSession(ctx), launches


def test_elementwise_scalar_too_large_is_typed(env):
    """For contrast (passes)."""
    ctx, s, launches = env
    x = ctx.alloc(F32, (4,), "t")
    with pytest.raises(ValidationError):
        s.add(x, HUGE)


@pytest.mark.parametrize("which", ["alpha", "beta"])
def test_axpby_scalar_too_large_for_float32_is_a_validation_error(env, which):
    ctx, s, launches = env
    x, y = ctx.alloc(F32, (4,), "t"), ctx.alloc(F32, (4,), "t")
    alpha, beta = (HUGE, 1.0) if which == "alpha" else (1.0, HUGE)
    with pytest.raises(TenferroError):
        s.axpby_read_into_accum(alpha, x, beta, y)
    assert launches == []


@pytest.mark.parametrize("dtype", [DType.FLOAT32, DType.COMPLEX64])
def test_full_value_too_large_is_a_validation_error(env, dtype):
    ctx, s, launches = env
    before = ctx.home.allocations
    with pytest.raises(TenferroError):
        s.full((4,), HUGE, dtype)
    assert launches == [] and ctx.home.allocations == before


@pytest.mark.parametrize("value", [HUGE, 1e300], ids=["int", "float"])
@pytest.mark.parametrize("form", ["accum", "cached_first", "cached_warm", "grouped"])
def test_dot_alpha_too_large_for_float32_is_a_validation_error(form, value):
    ctx = Rec()
    s = session(ctx)
    lhs, rhs, out = ctx.dev((4, 3)), ctx.dev((3, 5)), ctx.dev((4, 5))
    acc = DotGeneralAccumulation(value, 0)
    if form == "cached_warm":
        s.dot_general_read_into_accum_cached(1, lhs, rhs, MM, DotGeneralAccumulation(1.0, 0.0),
                                             out)
    n = len(ctx.calls)
    with pytest.raises(TenferroError):
        if form == "accum":
            s.dot_general_read_into_accum(lhs, rhs, MM, acc, out)
        elif form == "grouped":
            s.grouped_gemm(GroupedGemmConfig((GemmJob(lhs, rhs, out, accumulation=acc),)))
        else:
            s.dot_general_read_into_accum_cached(1, lhs, rhs, MM, acc, out)
    assert len(ctx.calls) == n


@pytest.mark.parametrize("dtype", [DType.FLOAT32, DType.COMPLEX64, DType.FLOAT16])
@pytest.mark.parametrize("which", ["alpha", "beta"])
def test_a_float_beyond_the_float32_scale_of_a_product_is_a_validation_error(dtype, which):
    """cuBLAS takes the alpha and beta of a float32, float16, bfloat16 or complex64 product
    as float32 (parts): a finite float64 beyond that range is refused, naming it, before
    anything runs; infinities are values, and float64 products take any float."""
    from tenferro_cuda.shapes import dot as shapes_dot

    kwargs = {"alpha": 1.0, "beta": 0.0, which: 1e300}
    acc = DotGeneralAccumulation(**kwargs)
    with pytest.raises(ValidationError, match=rf"{which}=\(?1e\+300(\+0j\))? overflows") as info:
        shapes_dot.scalars(acc, dtype, "dot_general_read_into_accum")
    assert info.value.kind == "overflow"
    assert shapes_dot.scalars(acc, DType.FLOAT64, "op") == (kwargs["alpha"], kwargs["beta"])
    inf = DotGeneralAccumulation(**{**kwargs, which: float("inf")})
    assert shapes_dot.scalars(inf, dtype, "op")[which == "beta"] == float("inf")
    # the imaginary part of a complex64 product's scale is a float32 too
    if dtype.is_complex:
        with pytest.raises(ValidationError, match="overflows"):
            shapes_dot.scalars(DotGeneralAccumulation(alpha=1e300j), dtype, "op")
