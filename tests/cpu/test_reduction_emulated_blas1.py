"""BLAS-1 end to end on the CPU: vdot_read, norm_squared_read and axpby_read_into_accum,
the real op code with the real kernels run by the host emulation of
tests/cpu/reduction_emu.py, against numpy, for compact, strided and unaligned inputs.
Skipped when no C++17 compiler is present."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

_spec = importlib.util.spec_from_file_location("reduction_emu",
                                               Path(__file__).with_name("reduction_emu.py"))
emu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(emu)
close, sample, wide = emu.close, emu.sample, emu.wide


@pytest.fixture(scope="module")
def s(tmp_path_factory):
    with emu.session(emu.build(tmp_path_factory)) as session:
        yield session


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
