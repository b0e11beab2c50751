"""Python protocols of tensors and views (len, iteration, truth value, membership, DLPack
export of a degenerate view), dtype normalisation, and ``from_numpy``, against the
documented contract (docs/api.md, docs/dtypes.md, docs/errors.md, docs/interop.md)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from reference.fake_context import FakeContext, FakeSession, HostMemory

from tenferro_cuda import _driver
from tenferro_cuda.dtypes import DType, as_dtype
from tenferro_cuda.errors import (
    RuntimeStateError,
    TenferroError,
    UnsupportedDTypeError,
    UnsupportedError,
    ValidationError,
)
from tenferro_cuda.memory import _Arena
from tenferro_cuda.ops import transfer
from tenferro_cuda.tensor import Tensor


def fake_device(arr: np.ndarray) -> Tensor:
    """A device-looking tensor over ``arr``'s host memory (as tests/cpu/test_dlpack_capsule)."""
    arr = np.ascontiguousarray(arr)
    pool = SimpleNamespace(domain=-7, ordinal=0, closed=False, limit=None)
    arena = _Arena(pool, _driver.stream_handle(0x5150))  # type: ignore[arg-type]
    buf = arena.adopt(arr.ctypes.data, arr.nbytes, arr)
    return Tensor._make(as_dtype(arr.dtype), tuple(arr.shape), buffer=buf)

# --- iteration --------------------------------------------------------------------------
# Tensor defines __getitem__ but neither __iter__ nor __len__, so Python falls back to the
# legacy sequence protocol, which stops only on IndexError. __getitem__ raises
# ValidationError (a ValueError) past the end, so every iteration blows up after the last
# row: list(t), tuple(t), `for row in t`, `x in t`, unpacking.


def _host():
    return Tensor.from_numpy(np.arange(6.0).reshape(3, 2))


def test_iterating_a_host_tensor_terminates():
    t = _host()
    try:
        rows = list(t)
    except TypeError:
        return  # refusing to iterate up front would also be a coherent contract
    assert len(rows) == 3


def test_unpacking_a_host_tensor():
    t = _host()
    try:
        a, b, c = t
    except TypeError:
        return
    assert a.shape == (2,)


def test_iterating_a_rank0_tensor_is_a_type_error():
    # numpy: "iteration over a 0-d array" is TypeError; here iter() succeeds and the first
    # next() raises ValidationError("too many indices")
    with pytest.raises(TypeError):
        iter(Tensor.from_numpy(np.array(1.0)))


def test_membership_test_does_not_raise_validation_error():
    t = _host()
    try:
        found = 99.0 in t
    except TypeError:
        return
    assert found is False


# --- truth value ------------------------------------------------------------------------
# docs/api.md / README: nothing converts a device tensor to host data implicitly (numpy's
# conversion refuses with TypeError, download first). bool() has no __bool__/__len__ and
# is silently True for every tensor: for a device tensor that is a host read that neither
# refuses nor downloads, for a host tensor holding False it is simply the wrong answer.


def test_bool_of_device_tensor_refuses():
    t = fake_device(np.zeros((), np.bool_))
    with pytest.raises((TypeError, RuntimeStateError)):
        bool(t)


@pytest.mark.parametrize("value", [np.array(False), np.array(0.0), np.zeros((0,))],
                         ids=["False", "0.0", "empty"])
def test_bool_of_falsy_host_tensor_is_not_true(value):
    t = Tensor.from_numpy(value)
    try:
        truth = bool(t)
    except (TypeError, ValueError):
        return  # refusing is fine; answering True is not
    assert truth is False


# --- DLPack export of a view the constructor accepted ------------------------------------

@pytest.mark.parametrize(("shape", "strides"), [((0, 2 ** 70), (1, 1)), ((0, 3), (2 ** 70, 1))],
                         ids=["extent-2**70", "stride-2**70"])
def test_dlpack_of_empty_view_with_huge_extent(shape, strides):
    t = fake_device(np.arange(12, dtype=np.float32).reshape(3, 4))
    try:
        v = t.view(shape, strides, 0)
    except ValidationError:
        return  # rejected where it was built: fine
    # accepted as a view, so exporting it must work or raise a typed error (never
    # struct.error from packing the DLTensor's int64 shape and strides)
    try:
        v.__dlpack__(stream=-1, max_version=(1, 0))
    except (TenferroError, BufferError):
        pass


# --- dtypes -----------------------------------------------------------------------------

def test_as_dtype_of_a_tensor_is_unsupported_dtype_error():
    # docs/dtypes.md: DTypes, their names and numpy dtypes name dtypes; anything else is
    # UnsupportedDTypeError. numpy's np.dtype(obj) reads obj.dtype (a DType, not a numpy
    # dtype) and raises a bare ValueError that as_dtype does not catch; the callers that
    # re-raise with the op (shapes/creation.dtype_of, shapes/elementwise.cast_target)
    # catch UnsupportedDTypeError only, so zeros((3,), some_tensor) leaks it too.
    t = Tensor.from_numpy(np.zeros(3, np.float32))
    with pytest.raises(UnsupportedDTypeError):
        as_dtype(t)
    with pytest.raises(UnsupportedDTypeError):
        DType.of(t[0])


def test_as_dtype_of_object_with_non_numpy_dtype_attribute():
    class Weird:
        dtype = "not a dtype"

    with pytest.raises(UnsupportedDTypeError):
        as_dtype(Weird())


@pytest.mark.parametrize("npd", [">f4", "U2", "f4,f4"], ids=["big-endian", "str", "struct"])
def test_from_numpy_unsupported_dtype_names_the_op(npd):
    # docs/errors.md: every error carries op, "the name of the method or operation that
    # raised it"; str(err) starts with it. from_numpy re-raises nothing: op is ''.
    with pytest.raises(UnsupportedDTypeError) as info:
        Tensor.from_numpy(np.zeros(2, dtype=npd))
    assert info.value.op


# --- from_numpy of a masked array ----------------------------------------------------------

def test_masked_array_cannot_reach_the_device_through_from_numpy():
    # docs/errors.md: UnsupportedError for "uploading a numpy masked array" (the values
    # under the mask would be taken as data); upload_host_tensor refuses the array itself,
    # but Tensor.from_numpy(masked) drops the mask silently and the upload then goes through
    ctx = FakeContext(HostMemory(), None)
    s = FakeSession(ctx, transfer.METHODS)
    m = np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0])
    with pytest.raises(UnsupportedError):
        s.upload_host_tensor(m)
    with pytest.raises(UnsupportedError):
        s.upload_host_tensor(Tensor.from_numpy(m))
