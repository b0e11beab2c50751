"""The broadcast-rows plan on an emulated device (tests/gpu/test_elementwise_bcast.py runs
the same table on the GPU): every broadcast layout through the real session methods, with
the path each launch took, its vector claim (checked by the emulator against the rows'
lengths and alignment), the grid, chunking, casts (the strided kernel: cast has no
broadcast-rows form) and the values from the numpy reference."""

from __future__ import annotations

import numpy as np
import pytest
from test_elementwise_bcast import CASES, IDS, LAYOUTS, logical, run_case, run_into
from test_elementwise_emu import emulated_session, get, put
from test_elementwise_ref import mismatch

from tenferro_cuda.dtypes import DType
from tenferro_cuda.kernels.registry import family
from tenferro_cuda.ops.elementwise import engine as elementwise_engine
from tenferro_cuda.tensor import TensorView


@pytest.fixture
def emu(monkeypatch):
    return emulated_session(monkeypatch)


def _vectors(launch) -> bool:
    path, _, _, _, args = launch
    if path == "small":  # one element per thread: no vectors, whatever the flags say
        return False
    return bool(args[5] & 8) if path == "contig" else bool(args[9] & 1)


@pytest.mark.parametrize("key,dtype,slot,layout", CASES, ids=IDS)
def test_broadcast_view(emu, key, dtype, slot, layout):
    s, dev, rt = emu
    before = len(dev.launches)
    got, want, tol = run_case(s, put, get, key, dtype, slot, layout)
    assert mismatch(got, want, tol) is None
    _, _, path, vectors = LAYOUTS[layout]
    (launch,) = dev.launches[before:]
    assert launch[0] == path
    if dtype is DType.FLOAT32:
        assert _vectors(launch) == vectors
    assert all(expr in set(family("elementwise").all_expressions()) for _, expr in rt.compiled)


@pytest.mark.parametrize("layout", ["row", "row odd", "column", "middle", "leading"])
@pytest.mark.parametrize("in_place", [False, True], ids=["padded out", "in place"])
def test_into_outputs(emu, layout, in_place):
    s, dev, rt = emu
    got, want, tol = run_into(s, put, get, layout, in_place)
    assert mismatch(got, want, tol) is None
    launch = dev.launches[-1]
    assert launch[0] == "bcast"
    # the padded output's rows are 8 elements longer and start 4 in: still vectors
    assert _vectors(launch) == LAYOUTS[layout][3]


def test_chunked_bcast_launches(emu, monkeypatch):
    s, dev, rt = emu
    monkeypatch.setattr(elementwise_engine, "CHUNK", 256)
    x = np.arange(16 * 64, dtype=np.float32).reshape(16, 64)
    b = np.arange(64, dtype=np.float32)
    before = len(dev.launches)
    got = get(s, s.add(put(s, x), TensorView(put(s, b), (16, 64), (0, 1), 0)))
    assert np.array_equal(got, x + b)
    launches = dev.launches[before:]
    assert all(la[0] == "bcast" and _vectors(la) for la in launches)
    assert [la[4][8] for la in launches] == [192] * 5 + [64]  # 3 rows below 256, then 1


def test_cast_of_a_broadcast_view_is_strided(emu):
    s, dev, rt = emu
    b = np.arange(8, dtype=np.float32)
    got = get(s, s.cast(TensorView(put(s, b), (4, 8), (0, 1), 0), DType.FLOAT64))
    assert np.array_equal(got, np.broadcast_to(b, (4, 8)).astype(np.float64))
    assert dev.launches[-1][0] == "strided"


def test_plain_views_with_unit_rows_take_the_bcast_path(emu):
    """Not only broadcasts: any layout of at most 3 axes after merging whose rows are
    unit-stride everywhere (a slice of the columns, rows reversed) runs on the
    broadcast-rows kernel, in vectors when the rows allow."""
    s, dev, rt = emu
    a = np.arange(8 * 72, dtype=np.float32).reshape(8, 72)
    x = put(s, a)
    got = get(s, s.neg(x[::-1, 4:68]))
    assert np.array_equal(got, -a[::-1, 4:68])
    assert dev.launches[-1][0] == "bcast" and _vectors(dev.launches[-1])
    got = get(s, s.neg(x[:, 1:65]))
    assert np.array_equal(got, -logical(a, (8, 64), (72, 1), 1))
    assert dev.launches[-1][0] == "bcast" and not _vectors(dev.launches[-1])
