"""tenferro_cuda.tensor, host side: construction, strides, bounds-checked views, indexing
against numpy's basic slicing, permute/T, span, is_contiguous."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.errors import RuntimeStateError, UnsupportedDTypeError, ValidationError
from tenferro_cuda.tensor import Tensor, TensorView, compact_strides

NAMES = [d.value for d in ALL_DTYPES]


def _sample(d: DType, shape=(2, 3)) -> np.ndarray:
    n = int(np.prod(shape))
    if d.is_bool:
        return (np.arange(n) % 3 == 0).reshape(shape)
    if d.is_complex:
        return (np.arange(n) + 0.5j * np.arange(n)).astype(d.numpy).reshape(shape)
    return (np.arange(n) - (n // 2 if d.is_signed_integer or d.is_float else 0)).astype(
        d.numpy).reshape(shape)


def _equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        a.astype(np.complex128), b.astype(np.complex128))


# --- construction --------------------------------------------------------------------------

@pytest.mark.parametrize("args", [(), (np.zeros(3),), ("float32", (2,))], ids=["none", "array",
                                                                            "dtype-shape"])
def test_tensor_not_constructible(args):
    with pytest.raises(TypeError, match="from_numpy"):
        Tensor(*args)


@pytest.mark.parametrize("d", ALL_DTYPES, ids=NAMES)
def test_from_numpy_every_dtype(d):
    arr = _sample(d)
    t = Tensor.from_numpy(arr)
    assert t.dtype is d
    assert (t.shape, t.strides, t.offset) == ((2, 3), (3, 1), 0)
    assert (t.ndim, t.size, t.itemsize, t.nbytes) == (2, 6, d.itemsize, 6 * d.itemsize)
    assert t.is_host and not t.is_device and t.is_contiguous
    assert t.base is t and not t.reclaimed
    assert _equal(t.numpy(), arr)
    assert "host" in repr(t) and d.value in repr(t)


@pytest.mark.parametrize("d", ALL_DTYPES, ids=NAMES)
def test_from_numpy_non_contiguous_is_compacted(d):
    arr = _sample(d, (4, 6))[::2, ::-3]
    t = Tensor.from_numpy(arr)
    assert t.strides == compact_strides(arr.shape)
    assert _equal(t.numpy(), arr)


SHAPES = [(), (0,), (1,), (7,), (0, 3), (3, 0, 2), (2, 3, 4), (1, 1, 1, 1, 5)]


@pytest.mark.parametrize("shape", SHAPES, ids=[str(s) for s in SHAPES])
def test_from_numpy_shapes(shape):
    arr = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    t = Tensor.from_numpy(arr)
    assert t.shape == shape
    assert _equal(t.numpy(), arr)


def test_from_numpy_accepts_sequences_and_scalars():
    assert Tensor.from_numpy([[1.0, 2.0]]).shape == (1, 2)
    assert Tensor.from_numpy(np.float32(3)).shape == ()


@pytest.mark.parametrize("npd", [">u2", ">i8", np.float128 if hasattr(np, "float128")
                                 else np.longdouble, "U2", object])
def test_from_numpy_unsupported_dtype(npd):
    with pytest.raises(UnsupportedDTypeError):
        Tensor.from_numpy(np.zeros(2, dtype=npd))


NONEMPTY = [s for s in SHAPES if 0 not in s] + [(5, 1, 3)]


@pytest.mark.parametrize("shape", NONEMPTY, ids=str)
def test_compact_strides_match_numpy(shape):
    ref = np.empty(shape, np.float64)
    assert compact_strides(shape) == tuple(s // 8 for s in ref.strides)


# Zero extents count as 1 so that strides stay positive and distinct.
EMPTY_STRIDES = [((0,), (1,)), ((0, 3), (3, 1)), ((3, 0, 2), (2, 2, 1)), ((2, 0), (1, 1))]


@pytest.mark.parametrize(("shape", "strides"), EMPTY_STRIDES,
                         ids=[str(s) for s, _ in EMPTY_STRIDES])
def test_compact_strides_of_empty_shapes(shape, strides):
    assert compact_strides(shape) == strides


# --- views ---------------------------------------------------------------------------------

BASE = Tensor.from_numpy(np.arange(24, dtype=np.int64).reshape(4, 6))

GOOD_VIEWS = [
    ((24,), (1,), 0),
    ((6, 4), (1, 6), 0),
    ((3,), (-1,), 2),
    ((4,), (-6,), 18),
    ((2, 2), (12, 2), 9),
    ((0,), (1,), 1000),  # addresses nothing: allowed anywhere
    ((5, 0), (100, 1), 0),
    ((), (), 23),
    ((3, 3), (0, 1), 0),  # broadcast stride
]
BAD_VIEWS = [
    ((25,), (1,), 0, "axis_out_of_bounds"),
    ((3,), (1,), 22, "axis_out_of_bounds"),
    ((3,), (-1,), 1, "axis_out_of_bounds"),
    ((), (), 24, "axis_out_of_bounds"),
    ((), (), -1, "axis_out_of_bounds"),
    ((2, 2), (23, 1), 0, "axis_out_of_bounds"),
    ((2,), (1, 1), 0, "rank_mismatch"),
    ((2, 2), (1,), 0, "rank_mismatch"),
    ((-1,), (1,), 0, "invalid_argument"),
]


@pytest.mark.parametrize(("shape", "strides", "offset"), GOOD_VIEWS,
                         ids=[f"{s}:{st}+{o}" for s, st, o in GOOD_VIEWS])
def test_view_in_bounds(shape, strides, offset):
    v = BASE.view(shape, strides, offset)
    assert isinstance(v, TensorView)
    assert (v.shape, v.strides, v.offset) == (shape, strides, offset)
    assert v.base is BASE and v.dtype is BASE.dtype
    flat = BASE.numpy().reshape(-1)
    idx = np.full(shape, offset, dtype=np.int64)
    for axis, grid in enumerate(np.indices(shape, dtype=np.int64)):
        idx += grid * strides[axis]
    assert _equal(v.numpy(), flat[idx] if v.size else np.empty(shape, flat.dtype))


@pytest.mark.parametrize(("shape", "strides", "offset", "kind"), BAD_VIEWS,
                         ids=[f"{s}:{st}+{o}" for s, st, o, _ in BAD_VIEWS])
def test_view_out_of_bounds_rejected(shape, strides, offset, kind):
    with pytest.raises(ValidationError) as info:
        BASE.view(shape, strides, offset)
    assert info.value.kind == kind
    assert info.value.op == "view"


def test_view_needs_tensor_base():
    with pytest.raises(ValidationError):
        TensorView(np.zeros(3), (3,), (1,))


def test_view_of_view_uses_base_elements():
    v = BASE[1:]
    w = v.view((2,), (1,), 0)  # strides/offset are in elements of the base
    assert w.base is BASE
    assert list(w.numpy()) == [0, 1]


# --- __getitem__ against numpy ----------------------------------------------------------

REF = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
S = slice
KEYS = [
    0, -1, 1, S(None), S(1, None), S(None, None, -1), S(None, None, 2), S(5, 10), S(1, 1),
    (0, 1), (-2, -3, -4, -5), (1, 2, 3, 4), (Ellipsis,), (..., 0), (0, ..., -1),
    (S(None, None, -2), 1, ...), (1, S(3, 0, -1)), (S(1, 2), ..., S(None, None, -3)),
    (..., S(4, -10, -1)), (S(None), S(None), S(None), S(None)), (np.int64(1), np.int32(-1)),
    (..., S(3, None, -1), S(1, 4, 2)), (S(-1, None, -1), S(None, None, -1), ..., 2),
    (S(None, None, -1), S(None, None, -1), S(None, None, -1), S(None, None, -1)),
    (0, S(2, 0, -1), S(None, None, 3), S(-2, None)), (..., S(0, 0)),
]


def _key_id(key) -> str:
    return repr(key).replace("slice", "s").replace("Ellipsis", "...").replace(" ", "")


def _numpy_offset(view: np.ndarray, base: np.ndarray) -> int:
    diff = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return diff // base.itemsize


@pytest.mark.parametrize("key", KEYS, ids=[_key_id(k) for k in KEYS])
def test_getitem_matches_numpy(key):
    t = Tensor.from_numpy(REF)
    v = t[key]
    ref = REF[key]
    if not isinstance(ref, np.ndarray):  # all-int keys give a numpy scalar; take a 0-d view
        ref = REF[(*key, ...)]
    assert v.shape == ref.shape
    assert _equal(v.numpy(), np.asarray(ref))
    if ref.size:
        assert v.strides == tuple(s // REF.itemsize for s in ref.strides)
        assert v.offset == _numpy_offset(ref, t.numpy())
    assert v.span()[1] <= t.size and v.span()[0] >= 0


CHAINS = [
    (S(None, None, -1), (S(1, None), S(None, None, 2))),
    ((..., S(None, None, -1)), (0, S(None, None, -2))),
    (1, (S(None, None, -1), 3)),
]


@pytest.mark.parametrize(("k1", "k2"), CHAINS, ids=[f"{_key_id(a)}-{_key_id(b)}"
                                                    for a, b in CHAINS])
def test_getitem_chained(k1, k2):
    v = Tensor.from_numpy(REF)[k1][k2]
    assert _equal(v.numpy(), np.asarray(REF[k1][k2]))


BAD_KEYS = [
    (2, "axis_out_of_bounds"),
    (-3, "axis_out_of_bounds"),
    ((0, 3), "axis_out_of_bounds"),
    ((0, 0, 0, 5), "axis_out_of_bounds"),
    ((0, 0, 0, 0, 0), "rank_mismatch"),
    ((..., ...), "invalid_argument"),
    (None, "invalid_argument"),
    ([0, 1], "invalid_argument"),
    (1.0, "invalid_argument"),
    ("a", "invalid_argument"),
]


@pytest.mark.parametrize(("key", "kind"), BAD_KEYS, ids=[_key_id(k) for k, _ in BAD_KEYS])
def test_getitem_rejects(key, kind):
    with pytest.raises(ValidationError) as info:
        Tensor.from_numpy(REF)[key]
    assert info.value.kind == kind


# --- permute / T ----------------------------------------------------------------------------

PERMS = list(itertools.permutations(range(3)))


@pytest.mark.parametrize("perm", PERMS, ids=str)
def test_permute_matches_numpy(perm):
    arr = REF[0]
    v = Tensor.from_numpy(arr).permute(perm)
    assert _equal(v.numpy(), np.transpose(arr, perm))
    assert v.strides == tuple(s // arr.itemsize for s in np.transpose(arr, perm).strides)


@pytest.mark.parametrize("shape", [(), (4,), (2, 3), (2, 3, 4)], ids=str)
def test_transpose_property(shape):
    arr = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    assert _equal(Tensor.from_numpy(arr).T.numpy(), arr.T)


def test_permute_of_strided_view():
    v = Tensor.from_numpy(REF)[:, ::-1, 1:3].permute((2, 0, 3, 1))
    assert _equal(v.numpy(), np.transpose(REF[:, ::-1, 1:3], (2, 0, 3, 1)))


@pytest.mark.parametrize("perm", [(0, 1), (0, 0, 1), (0, 1, 3), (1, 2, 0, 0), (-1, 0, 1)],
                         ids=str)
def test_permute_rejects(perm):
    with pytest.raises(ValidationError, match="permutation"):
        Tensor.from_numpy(REF[0]).permute(perm)


# --- span / is_contiguous / addresses -------------------------------------------------------

T24 = Tensor.from_numpy(np.arange(24.0).reshape(4, 6))
SPANS = [
    (T24, (0, 24)),
    (T24[1], (6, 12)),
    (T24[:, 2], (2, 21)),
    (T24[::-1], (0, 24)),
    (T24[::-1, ::-1], (0, 24)),
    (T24[2:0:-1, 4:1:-2], (8, 17)),
    (T24[1:1], (0, 0)),  # empty: (offset, offset)
    (T24[3, 5], (23, 24)),
]


@pytest.mark.parametrize(("v", "span"), SPANS, ids=[str(i) for i in range(len(SPANS))])
def test_span(v, span):
    assert v.span() == span


CONTIGUOUS = [
    (T24, True),
    (T24[:2], True),
    (T24[0], True),
    (T24.T, False),
    (T24[:, :3], False),
    (T24[::2], False),
    (T24[::-1], False),
    (T24[:, 0:1], False),
    (T24[1:1], True),  # empty
    (Tensor.from_numpy(np.zeros((3, 1))).T, True),  # extent-1 axes ignore their stride
    (T24.view((2, 1, 3), (3, 99, 1), 0), True),
]


@pytest.mark.parametrize(("v", "expected"), CONTIGUOUS,
                         ids=[str(i) for i in range(len(CONTIGUOUS))])
def test_is_contiguous(v, expected):
    assert v.is_contiguous is expected


def test_host_tensor_has_no_device_address():
    with pytest.raises(RuntimeStateError):
        T24.data_ptr()


def test_device_tensor_address_and_no_numpy():
    # A stand-in buffer: only ``ptr`` and ``freed`` are read on the host side.
    buf = SimpleNamespace(ptr=0x10000, freed=False)
    t = Tensor._make(DType.FLOAT32, (4, 6), buffer=buf)
    assert t.is_device and not t.is_host
    assert t.data_ptr() == 0x10000
    assert t[1, 2:].data_ptr() == 0x10000 + (6 + 2) * 4
    assert "device" in repr(t)
    with pytest.raises(RuntimeStateError, match="download_to_host"):
        t.numpy()
    buf.freed = True
    assert t.reclaimed
