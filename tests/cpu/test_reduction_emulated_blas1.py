"""BLAS-1 end to end on the CPU: vdot_read, norm_squared_read and axpby_read_into_accum,
the real op code with the real kernels run by the host emulation of
tests/cpu/reduction_emu.py, against numpy, for compact, strided and unaligned inputs
(skipped when no C++17 compiler is present); and axpby's rejection of a ``y`` that shares
device memory with ``x`` through any tensor object (no compiler needed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tenferro_cuda.errors import ValidationError
from tenferro_cuda.tensor import Tensor

_spec = importlib.util.spec_from_file_location("reduction_emu",
                                               Path(__file__).with_name("reduction_emu.py"))
emu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(emu)
close, sample, wide = emu.close, emu.sample, emu.wide


s = emu.session_fixture(__name__)


@pytest.mark.parametrize("size", [0, 1, 37, 5000])
@pytest.mark.parametrize("dt", emu.DTYPES)
def test_vdot_and_norm_squared(s, dt, size):
    a, b = sample(dt, (size,), seed=1), sample(dt, (size,), seed=2)
    wa, wb = a.astype(wide(dt)), b.astype(wide(dt))
    real = np.dtype(np.dtype(dt).type(0).real.dtype)
    close(s.down(s.vdot_read(s.up(a), s.up(b))), np.asarray(np.sum(np.conj(wa) * wb)).astype(dt),
          np.sum(np.abs(wa * wb)) + 1e-30)
    n2 = np.sum((wa * np.conj(wa)).real)
    close(s.down(s.norm_squared_read(s.up(a))), np.asarray(n2).astype(real), n2 + 1e-30)


@pytest.mark.parametrize("dt", emu.DTYPES)
def test_vdot_of_views(s, dt):
    a = sample(dt, (30, 41), seed=4)
    ta = s.up(a)
    x, y = a[::2, 1:].astype(wide(dt)), a.T[1:, ::2].T.astype(wide(dt))
    got = s.down(s.vdot_read(ta[::2, 1:], ta.T[1:, ::2].T))
    close(got, np.asarray(np.sum(np.conj(x) * y)).astype(dt), np.sum(np.abs(x * y)))


@pytest.mark.parametrize("beta", [0, 2])
@pytest.mark.parametrize("dt", emu.DTYPES)
def test_axpby(s, dt, beta):
    x, y = sample(dt, (9, 70), seed=5), sample(dt, (9, 70), seed=6)
    if beta == 0 and np.dtype(dt).kind not in "iu":
        y[0, 0] = np.nan  # not read when beta == 0
    wx, wy = x.astype(wide(dt)), y.astype(wide(dt))
    ty = s.up(y)
    s.axpby_read_into_accum(3, s.up(x), beta, ty)
    ref = 3 * wx + (beta * wy if beta else 0)
    close(s.down(ty), ref.astype(dt), np.abs(3 * wx) + (np.abs(beta * wy) if beta else 0))
    ty2 = s.up(y)
    s.axpby_read_into_accum(2, s.up(x).T[::-1].T, 1, ty2.T[::-1].T)  # strided views
    close(s.down(ty2), (2 * wx + wy).astype(dt), np.abs(2 * wx) + np.abs(wy) + 1e-30)


@pytest.mark.parametrize("dt", ["int8", "float32", "complex64"])
def test_unaligned_buffers(s, dt):
    a = sample(dt, (37, 24), seed=8)
    shift = np.dtype(dt).itemsize  # like an adopted foreign buffer
    t = s.up(a, shift=shift)
    wa = a.astype(wide(dt))
    close(s.down(s.vdot_read(t, t)), np.asarray(np.sum(np.conj(wa) * wa)).astype(dt),
          np.sum(np.abs(wa) ** 2))
    y = s.up(a, shift=shift)
    s.axpby_read_into_accum(2, t, 1, y)
    close(s.down(y), (3 * wa).astype(dt), np.abs(3 * wa))


# --- axpby's output must share no memory with x (issue 13 item 5) ---------------------------
# Overlap is judged by device addresses: another Tensor object over the same memory (a
# reshape alias, a slice of one, two adoptions of one foreign array) is the same memory.
# These run on a recording context (no compiler needed): nothing may be launched.
def _aliases(s):
    """(t, {case: (x, y)}): every case's x and y share memory of the float32 tensor t."""
    t = s.up(np.arange(8, dtype=np.float32))
    alias = Tensor._make(t.dtype, t.shape, buffer=t.buffer)  # what reshape returns
    matrix = Tensor._make(t.dtype, (2, 4), buffer=t.buffer)
    b1 = s.ctx.adopt(t.buffer.ptr, t.nbytes, None)  # two adoptions of one foreign array
    b2 = s.ctx.adopt(t.buffer.ptr, t.nbytes, None)
    a1, a2 = (Tensor._make(t.dtype, t.shape, buffer=b) for b in (b1, b2))
    return t, {
        "second_tensor_object": (t, alias),
        "reshape_alias": (matrix.view((8,), (1,), 0), t),
        "shifted_view_of_alias": (t[1:4], alias[:3]),
        "shifted_view_same_object": (t[1:4], t[:3]),
        "strided_interleave": (t[::2], alias[1::2]),
        "two_adoptions": (a1, a2),
        "same_view": (t, t),
        "same_view_other_object": (t[2:5], alias[2:5]),
    }


ALIAS_CASES = ["second_tensor_object", "reshape_alias", "shifted_view_of_alias",
               "shifted_view_same_object", "strided_interleave", "two_adoptions", "same_view",
               "same_view_other_object"]


@pytest.mark.parametrize("case", ALIAS_CASES)
def test_axpby_rejects_y_aliasing_x(case):
    s = emu.EmuSession()  # launches recorded only
    t, cases = _aliases(s)
    assert sorted(cases) == sorted(ALIAS_CASES)
    x, y = cases[case]
    before = s.down(t).tobytes()
    with pytest.raises(ValidationError, match="y overlaps x") as err:
        s.axpby_read_into_accum(2, x, 1, y)
    assert err.value.kind == "invalid_argument" and err.value.op == "axpby_read_into_accum"
    assert s.launched == []
    assert s.down(t).tobytes() == before


def test_axpby_rejects_y_addressing_an_element_twice():
    s = emu.EmuSession()
    x, y = s.up(np.ones(3, np.float32)), s.up(np.ones(1, np.float32))
    with pytest.raises(ValidationError, match="more than once"):
        s.axpby_read_into_accum(1, x, 1, y.view((3,), (0,), 0))
    assert s.launched == []


def test_axpby_accepts_disjoint_parts_of_one_buffer():
    s = emu.EmuSession()
    t = s.up(np.arange(8, dtype=np.float32))
    alias = Tensor._make(t.dtype, t.shape, buffer=t.buffer)
    s.axpby_read_into_accum(1, t[:4], 1, alias[4:])
    s.axpby_read_into_accum(1, t[:3], 1, t[5:])
    assert s.launched == ["tf::axpby_contig", "tf::axpby_strided"]
