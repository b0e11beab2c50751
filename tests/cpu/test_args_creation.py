"""Argument validation of the creation ops (iota, full, zeros, ones, empty): a typed
TenferroError naming the method before any device work; nothing silently coerced."""

from __future__ import annotations

import decimal

import numpy as np
import pytest
from reference.op_args import Harness

from tenferro_cuda import _driver_memory
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import ValidationError


@pytest.fixture
def h(monkeypatch):
    return Harness(monkeypatch)


D = DType
CREATORS = {
    "zeros": lambda s, shape: s.zeros(shape, D.FLOAT64),
    "ones": lambda s, shape: s.ones(shape, D.FLOAT64),
    "empty": lambda s, shape: s.empty(shape, D.FLOAT64),
    "full": lambda s, shape: s.full(shape, 2.0, D.FLOAT64),
    "iota": lambda s, shape: s.iota(D.FLOAT64, shape, 0),
}


# --- 1. a byte size beyond any address space ------------------------------------------------
@pytest.mark.parametrize("op", list(CREATORS))
@pytest.mark.parametrize("shape", [(2 ** 62, 4), (2 ** 40, 2 ** 40), (2 ** 64,)],
                         ids=["2^67B", "2^83B", "2^67B-rank1"])
def test_creation_huge_shape_rejected_before_alloc(h, op, shape):
    h.rejects(lambda: CREATORS[op](h.s, shape), op, ValidationError)


def test_the_allocator_refuses_a_size_beyond_any_address_space():
    """Behind the shape checks, the allocation itself: a size the driver binding cannot
    even convert is an OutOfMemoryError, as a refusal of the driver is (the pool path
    catches that one), not a raw OverflowError."""
    from tenferro_cuda.errors import OutOfMemoryError

    with pytest.raises(OutOfMemoryError) as info:
        _driver_memory.mem_alloc_async(2 ** 67, None, None, "zeros")
    assert info.value.requested_bytes == 2 ** 67 and info.value.op == "zeros"


@pytest.mark.parametrize("op", ["zeros", "empty"])
def test_creation_extent_beyond_int64_even_when_empty(h, op):
    # zero elements, but an extent no int64 stride/shape field can hold
    h.rejects(lambda: CREATORS[op](h.s, (0, 2 ** 70)), op, ValidationError)


def test_an_empty_view_with_huge_extents_is_refused(h):
    # zeros((0, 2**70)) is refused (test above), and so is a view of zero elements that
    # claims such extents (no reader could describe it: numpy, DLPack's int64 fields)
    from tenferro_cuda.tensor import TensorView

    with pytest.raises(ValidationError):
        h.s.zeros((0, 2 ** 70), D.FLOAT32)
    with pytest.raises(ValidationError) as info:  # nor can a view claim such extents
        TensorView(h.s.zeros((0,), D.FLOAT32), (0, 2 ** 70), (1, 1))
    assert info.value.kind == "overflow"


# --- 2. shapes that are not sequences of ints ----------------------------------------------
@pytest.mark.parametrize("op", list(CREATORS))
def test_creation_zero_d_array_shape(h, op):
    # shape_of: a 0-d ndarray is Iterable but list() of it raises TypeError
    h.rejects(lambda: CREATORS[op](h.s, np.array(3)), op, ValidationError)


@pytest.mark.parametrize("op", list(CREATORS))
@pytest.mark.parametrize("shape", [{4, 3}, {4: 0, 3: 0}], ids=["set", "dict"])
def test_creation_unordered_shape(h, op, shape):
    # {4, 3} iterates as (3, 4): a (3, 4) tensor instead of what was written
    h.rejects(lambda: CREATORS[op](h.s, shape), op, ValidationError)


# --- 3. fill values ----------------------------------------------------------------------
def test_full_signaling_nan_decimal(h):
    # scalar_bytes: complex(Decimal('sNaN')) raises a raw ValueError
    h.rejects(lambda: h.s.full((2,), decimal.Decimal("sNaN"), D.COMPLEX64), "full",
              ValidationError)


@pytest.mark.parametrize("dtype", [D.FLOAT32, D.FLOAT64, D.COMPLEX64])
def test_full_finite_longdouble_that_overflows(h, dtype):
    # np.longdouble('1e400') is finite; float() makes it inf, and inf "fits": the tensor is
    # filled with inf instead of raising kind overflow (as 1e39 for float32 does)
    if not np.isfinite(np.longdouble("1e400")):
        pytest.skip("longdouble is float64 here")
    h.rejects(lambda: h.s.full((2,), np.longdouble("1e400"), dtype), "full", ValidationError,
              kind="overflow")
