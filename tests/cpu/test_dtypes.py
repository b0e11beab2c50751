"""tenferro_cuda.dtypes: the 15 dtypes, numpy mapping, as_dtype, and the promotion lattice."""

from __future__ import annotations

import itertools
import math
import warnings

import ml_dtypes
import numpy as np
import pytest

from tenferro_cuda.dtypes import ALL_DTYPES, DType, as_dtype, lattice_allows
from tenferro_cuda.errors import UnsupportedDTypeError

D = DType
# name -> (itemsize, host dtype, category)
TABLE = {
    "bool": (1, np.dtype(np.bool_), "bool"),
    "int8": (1, np.dtype(np.int8), "int"),
    "uint8": (1, np.dtype(np.uint8), "int"),
    "int16": (2, np.dtype(np.int16), "int"),
    "uint16": (2, np.dtype(np.uint16), "int"),
    "int32": (4, np.dtype(np.int32), "int"),
    "uint32": (4, np.dtype(np.uint32), "int"),
    "int64": (8, np.dtype(np.int64), "int"),
    "uint64": (8, np.dtype(np.uint64), "int"),
    "float16": (2, np.dtype(np.float16), "float"),
    "bfloat16": (2, np.dtype(ml_dtypes.bfloat16), "float"),
    "float32": (4, np.dtype(np.float32), "float"),
    "float64": (8, np.dtype(np.float64), "float"),
    "complex64": (8, np.dtype(np.complex64), "complex"),
    "complex128": (16, np.dtype(np.complex128), "complex"),
}
NAMES = list(TABLE)


def test_exactly_fifteen_dtypes():
    assert [d.value for d in ALL_DTYPES] == NAMES
    assert len(set(ALL_DTYPES)) == 15


@pytest.mark.parametrize("name", NAMES)
def test_itemsize_and_numpy(name):
    itemsize, npd, _ = TABLE[name]
    d = DType(name)
    assert d.itemsize == itemsize
    assert d.numpy == npd
    assert np.zeros(3, d.numpy).itemsize == itemsize


@pytest.mark.parametrize("name", NAMES)
def test_category(name):
    cat = TABLE[name][2]
    d = DType(name)
    assert d.is_bool == (cat == "bool")
    assert d.is_integer == (cat == "int")
    assert d.is_float == (cat == "float")
    assert d.is_complex == (cat == "complex")
    assert d.is_inexact == (cat in ("float", "complex"))
    assert d.is_numeric == (cat != "bool")
    assert d.is_signed_integer == (name in ("int8", "int16", "int32", "int64"))
    assert d.is_unsigned_integer == (name in ("uint8", "uint16", "uint32", "uint64"))


@pytest.mark.parametrize("name", NAMES)
def test_code_and_ctype(name):
    d = DType(name)
    assert ALL_DTYPES[d.code] is d
    assert isinstance(d.ctype, str) and d.ctype


def test_real_and_complex_counterparts():
    assert D.COMPLEX64.real is D.FLOAT32
    assert D.COMPLEX128.real is D.FLOAT64
    assert D.FLOAT32.real is D.FLOAT32
    assert D.FLOAT32.complex is D.COMPLEX64
    assert D.FLOAT64.complex is D.COMPLEX128
    assert D.COMPLEX64.complex is D.COMPLEX64


@pytest.mark.parametrize("name", ["bool", "int8", "uint16", "int32", "uint64", "float16",
                                  "bfloat16"])
def test_no_complex_counterpart(name):
    with pytest.raises(UnsupportedDTypeError, match="no complex counterpart"):
        _ = DType(name).complex


# --- as_dtype ----------------------------------------------------------------------------

AS_DTYPE = (
    [(name, DType(name)) for name in NAMES]
    + [(TABLE[name][1], DType(name)) for name in NAMES]
    + [(DType(name), DType(name)) for name in NAMES]
    + [
        (np.float32, D.FLOAT32),
        (np.bool_, D.BOOL),
        (ml_dtypes.bfloat16, D.BFLOAT16),
        (bool, D.BOOL),
        (float, D.FLOAT64),
        (complex, D.COMPLEX128),
        ("f4", D.FLOAT32),
        ("<c16", D.COMPLEX128),
        ("i8", D.INT64),
        ("u1", D.UINT8),
        (np.int16, D.INT16),
        (np.uint16, D.UINT16),
        ("<u4", D.UINT32),
        ("u8", D.UINT64),
        (np.uintp, D.UINT64),
    ]
)


@pytest.mark.parametrize(("value", "expected"), AS_DTYPE, ids=[repr(v) for v, _ in AS_DTYPE])
def test_as_dtype(value, expected):
    assert as_dtype(value) is expected
    assert DType.of(value) is expected


UNSUPPORTED = [
    np.float128 if hasattr(np, "float128") else "g", ">u2", ">i4",
    "U3", object, np.dtype("datetime64[s]"), ml_dtypes.float8_e4m3fn, "not_a_dtype",
    "Float32", 3.5,
]


@pytest.mark.parametrize("value", UNSUPPORTED, ids=[repr(v) for v in UNSUPPORTED])
def test_unsupported_dtype(value):
    with pytest.raises(UnsupportedDTypeError):
        as_dtype(value)


def test_unsupported_dtype_is_type_error_naming_value():
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        as_dtype(ml_dtypes.float8_e4m3fn)


# --- lattice -----------------------------------------------------------------------------

PAIRS = list(itertools.product(ALL_DTYPES, repeat=2))
PAIR_IDS = [f"{a.value}->{b.value}" for a, b in PAIRS]


@pytest.mark.parametrize("d", ALL_DTYPES, ids=NAMES)
def test_reflexive(d):
    assert lattice_allows(d, d)


@pytest.mark.parametrize("a", ALL_DTYPES, ids=NAMES)
def test_transitive(a):
    for b, c in itertools.product(ALL_DTYPES, repeat=2):
        if lattice_allows(a, b) and lattice_allows(b, c):
            assert lattice_allows(a, c), f"{a.value}->{b.value}->{c.value}"


@pytest.mark.parametrize(("a", "b"), [p for p in PAIRS if p[0] != p[1]],
                         ids=[i for (a, b), i in zip(PAIRS, PAIR_IDS, strict=True) if a != b])
def test_antisymmetric(a, b):
    assert not (lattice_allows(a, b) and lattice_allows(b, a))


@pytest.mark.parametrize("d", ALL_DTYPES, ids=NAMES)
def test_bool_converts_to_everything(d):
    assert lattice_allows(D.BOOL, d)


@pytest.mark.parametrize("d", [d for d in ALL_DTYPES if d is not D.BOOL],
                         ids=[n for n in NAMES if n != "bool"])
def test_nothing_converts_to_bool(d):
    assert not lattice_allows(d, D.BOOL)


@pytest.mark.parametrize(
    ("src", "dst"),
    [(c, r) for c in (D.COMPLEX64, D.COMPLEX128) for r in ALL_DTYPES if not r.is_complex],
    ids=[f"{c}->{r.value}" for c in ("complex64", "complex128")
         for r in ALL_DTYPES if not r.is_complex],
)
def test_complex_never_to_real(src, dst):
    assert not lattice_allows(src, dst)


DISALLOWED = [
    (D.FLOAT64, D.FLOAT32), (D.INT64, D.FLOAT64), (D.INT64, D.FLOAT32), (D.INT32, D.FLOAT32),
    (D.FLOAT32, D.FLOAT16), (D.FLOAT16, D.BFLOAT16), (D.BFLOAT16, D.FLOAT16),
    (D.INT8, D.UINT8), (D.UINT8, D.INT8), (D.INT64, D.INT32), (D.FLOAT16, D.INT32),
    (D.INT32, D.COMPLEX64), (D.COMPLEX128, D.COMPLEX64), (D.FLOAT64, D.COMPLEX64),
    (D.INT16, D.UINT16), (D.UINT16, D.INT16), (D.INT8, D.UINT16), (D.INT16, D.FLOAT16),
    (D.UINT16, D.BFLOAT16), (D.UINT32, D.INT32), (D.UINT32, D.FLOAT32), (D.INT64, D.UINT64),
    (D.UINT64, D.INT64), (D.UINT64, D.FLOAT64), (D.UINT64, D.COMPLEX128), (D.INT32, D.UINT32),
    (D.UINT16, D.INT8), (D.INT16, D.INT8),
]
ALLOWED = [
    (D.INT8, D.INT64), (D.INT8, D.FLOAT16), (D.UINT8, D.BFLOAT16), (D.INT32, D.FLOAT64),
    (D.INT32, D.COMPLEX128), (D.FLOAT16, D.COMPLEX64), (D.BFLOAT16, D.FLOAT64),
    (D.FLOAT32, D.COMPLEX128), (D.UINT8, D.INT32), (D.INT8, D.COMPLEX64),
    (D.INT8, D.INT16), (D.UINT8, D.INT16), (D.UINT8, D.UINT64), (D.INT16, D.FLOAT32),
    (D.UINT16, D.INT32), (D.UINT16, D.FLOAT32), (D.UINT16, D.COMPLEX64), (D.UINT32, D.INT64),
    (D.UINT32, D.UINT64), (D.UINT32, D.FLOAT64), (D.UINT32, D.COMPLEX128), (D.BOOL, D.UINT64),
]


@pytest.mark.parametrize(("src", "dst"), DISALLOWED,
                         ids=[f"{a.value}->{b.value}" for a, b in DISALLOWED])
def test_disallowed(src, dst):
    assert not lattice_allows(src, dst)


@pytest.mark.parametrize(("src", "dst"), ALLOWED, ids=[f"{a.value}->{b.value}" for a, b in ALLOWED])
def test_allowed(src, dst):
    assert lattice_allows(src, dst)


# Values that probe each dtype's range, precision and special values. The lattice is
# "value preserving": an edge exists exactly when all of these survive the conversion.
PROBES = {
    D.BOOL: [False, True],
    D.INT8: [-128, -1, 0, 127],
    D.UINT8: [0, 200, 255],
    D.INT16: [-(2**15), 2**15 - 1, 2049, -129],
    D.UINT16: [0, 2**16 - 1, 2049, 40000],
    D.INT32: [-(2**31), 2**31 - 1, 2**24 + 1, -129],
    D.UINT32: [0, 2**32 - 1, 2**24 + 1],
    D.INT64: [-(2**63), 2**63 - 1, 2**53 + 1],
    D.UINT64: [0, 2**64 - 1, 2**53 + 1, 2**63],
    D.FLOAT16: [65504.0, 2.0**-24, 1 + 2.0**-10, -0.5, math.inf, math.nan],
    D.BFLOAT16: [3.3895313892515355e38, 2.0**-133, 1 + 2.0**-7, -0.5, math.inf],
    D.FLOAT32: [0.1, 3.4028234663852886e38, 1.401298464324817e-45, 16777217.0, -0.5],
    D.FLOAT64: [0.1, 1e300, 5e-324, 2.0**53 + 2, -0.5],
    D.COMPLEX64: [1j, 0.1 + 0.2j, -0.5],
    D.COMPLEX128: [1j, 0.1 + 1e300j, -0.5],
}


def _py(x, d: DType):
    if d.is_complex:
        return complex(x)
    if d.is_float:
        return float(x)
    return int(x)


def _parts(x) -> tuple:
    return (x.real, x.imag) if isinstance(x, complex) else (x, 0)


def _same(a, b) -> bool:
    """Exact equality of two Python numbers (int vs float compares exactly); NaN == NaN."""
    for pa, pb in zip(_parts(a), _parts(b), strict=True):
        nan_a = isinstance(pa, float) and math.isnan(pa)
        nan_b = isinstance(pb, float) and math.isnan(pb)
        if nan_a or nan_b:
            if not (nan_a and nan_b):
                return False
        elif pa != pb:
            return False
    return True


def _preserved(src: DType, dst: DType) -> bool:
    arr = np.array(PROBES[src], dtype=src.numpy)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        out = arr.astype(dst.numpy)
    return all(_same(_py(x, src), _py(y, dst)) for x, y in zip(arr, out, strict=True))


@pytest.mark.parametrize(("src", "dst"), PAIRS, ids=PAIR_IDS)
def test_lattice_is_exactly_value_preserving(src, dst):
    assert lattice_allows(src, dst) == _preserved(src, dst)


def test_documented_lattice_is_the_lattice():
    """docs/dtypes.md's closure table, row by row, is ``lattice_allows``."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "docs" / "dtypes.md").read_text()
    rows = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 1 + len(ALL_DTYPES) and cells[0] in NAMES:
            rows[cells[0]] = cells[1:]
    assert list(rows) == NAMES
    for src in ALL_DTYPES:
        want = ["Y" if lattice_allows(src, dst) else "." for dst in ALL_DTYPES]
        assert rows[src.value] == want, src.value
