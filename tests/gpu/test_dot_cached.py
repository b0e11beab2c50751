"""dot_general_read_into_accum_cached on the device: a warm slot gives correct results
with new data and new scalars; a change of shape, strides, config or conjugation re-plans;
staged plans reuse their temporaries correctly; slots are independent; clearing works."""

from __future__ import annotations

import numpy as np
import pytest
from dot_reference import accum_ref, check_close, device_view, sample
from gpu_util import down

import tenferro_cuda as tc
from tenferro_cuda.configs.dot import DotGeneralAccumulation as Acc
from tenferro_cuda.configs.dot import DotGeneralConfig as C

MM = C((1,), (0,))


def _call(s, slot, dtype, rng, ls, ll, rs, rl, cfg, ol, alpha, beta, conj=(False, False)):
    lhs, lv = device_view(s, sample(dtype, ls, rng), ll)
    rhs, rv = device_view(s, sample(dtype, rs, rng), rl)
    o = sample(dtype, accum_ref(lv, rv, cfg, 1, 0, None, *conj).shape, rng)
    out, _ = device_view(s, o, ol)
    s.dot_general_read_into_accum_cached(slot, lhs, rhs, cfg, Acc(alpha, beta, *conj), out)
    want = accum_ref(lv, rv, cfg, alpha, beta, o, *conj)
    k = int(np.prod([ls[a] for a in cfg.lhs_contracting_dims]))
    name = "tf32" if cfg.precision == "tf32" else dtype.value
    check_close(down(s, out), want, name, k)


@pytest.mark.parametrize("dtype", [tc.float32, tc.float64, tc.complex64, tc.bfloat16, tc.int32],
                         ids=lambda d: d.value)
def test_warm_slot_new_data_and_scalars(s, rng, dtype):
    scalars = [(1, 0), (2, 1), (-1, 3)] if dtype.is_integer else [(1.0, 0.0), (0.5, 2.0),
                                                                   (-1.5, 1.0)]
    for i in range(6):
        alpha, beta = scalars[i % 3]
        _call(s, 0, dtype, rng, (20, 9), "c", (9, 14), "T", MM, "c", alpha, beta)


@pytest.mark.parametrize("dtype", [tc.float32, tc.complex128], ids=lambda d: d.value)
def test_warm_slot_reused_accumulation_objects(s, rng, dtype):
    """The same accumulation objects again and again (alternating): each call uses its
    own scalars and the new data."""
    accs = [Acc(1.0, 0.0), Acc(0.5, 2.0), Acc(-1.5, 1.0)]
    for i in range(7):
        acc = accs[i % 2] if i < 4 else accs[i % 3]
        lhs, lv = device_view(s, sample(dtype, (20, 9), rng), "s")
        rhs, rv = device_view(s, sample(dtype, (9, 14), rng), "T")
        o = sample(dtype, (20, 14), rng)
        out, _ = device_view(s, o, "s")
        s.dot_general_read_into_accum_cached(5, lhs, rhs, MM, acc, out)
        want = accum_ref(lv, rv, MM, acc.alpha, acc.beta, o, False, False)
        check_close(down(s, out), want, dtype.value, 9)


def test_invalidation_on_shape_strides_config(s, rng):
    f32 = tc.float32
    bmm = C((2,), (1,), (0,), (0,))
    steps = [
        ((20, 9), "c", (9, 14), "c", MM, "c"),
        ((20, 5), "c", (5, 14), "c", MM, "c"),       # k changes
        ((20, 5), "c", (5, 14), "c", MM, "T"),       # out strides change
        ((20, 5), "T", (5, 14), "c", MM, "T"),       # lhs strides change
        ((3, 4, 5), "c", (3, 5, 6), "c", bmm, "c"),  # rank and config change
        ((20, 9), "c", (9, 14), "c", MM, "c"),       # back to the first
        ((20, 9), "c", (9, 14), "c", C((1,), (0,), precision="tf32"), "c"),
    ]
    for ls, ll, rs, rl, cfg, ol in steps:
        _call(s, 7, f32, rng, ls, ll, rs, rl, cfg, ol, 1.5, 0.5)


def test_staged_plan_twice(s, rng):
    """Staged lhs (contracting axes that do not merge) and a staged output: the slot keeps
    its temporaries; the second call must not see the first call's data."""
    cfg = C((0, 2), (0, 1))
    for _ in range(3):
        _call(s, 1, tc.float64, rng, (6, 10, 7), "c", (6, 7, 9), "c", cfg, "S", 1.0, 1.0)
        _call(s, 1, tc.float64, rng, (6, 10, 7), "c", (6, 7, 9), "c", cfg, "S", 2.0, 0.0)


def test_conjugation_change_replans(s, rng):
    for conj in ((False, False), (True, False), (True, True), (False, True)):
        _call(s, 2, tc.complex128, rng, (8, 5), "c", (5, 6), "c", MM, "c", 1 - 1j, 0.5j, conj)


def test_independent_slots_and_clear(s, rng):
    for _ in range(2):
        _call(s, 10, tc.float32, rng, (8, 5), "c", (5, 6), "c", MM, "c", 1.0, 0.0)
        _call(s, 11, tc.float32, rng, (3, 8, 5), "c", (5, 2), "T", C((2,), (0,)), "c", 1.0,
              1.0)
        _call(s, None, tc.float32, rng, (4, 4), "c", (4, 4), "c", MM, "c", 1.0, 0.0)
    s.dot_general_cache_clear(10)
    _call(s, 10, tc.float32, rng, (8, 5), "c", (5, 6), "c", MM, "c", 1.0, 0.0)
    s.dot_general_cache_clear()
    _call(s, 11, tc.float32, rng, (3, 8, 5), "c", (5, 2), "T", C((2,), (0,)), "c", 1.0, 1.0)


def test_warm_slot_errors_change_nothing(s, rng):
    x, y = sample(tc.float32, (8, 5), rng), sample(tc.float32, (5, 4), rng)
    lhs, rhs = s.upload_host_tensor(x), s.upload_host_tensor(y)
    out = s.upload_host_tensor(np.zeros((8, 4), np.float32))
    s.dot_general_read_into_accum_cached(3, lhs, rhs, MM, Acc(), out)
    snapshot = down(s, out).tobytes()
    with pytest.raises(tc.ValidationError, match="real"):
        s.dot_general_read_into_accum_cached(3, lhs, rhs, MM, Acc(1j), out)
    with pytest.raises(tc.ValidationError):
        s.dot_general_read_into_accum_cached(-3, lhs, rhs, MM, Acc(), out)
    b = np.zeros((8, 12), np.float32)
    b[:4, :5] = x[:4]
    big = s.upload_host_tensor(b)
    s.dot_general_read_into_accum_cached(4, big[:4, :5], rhs, MM, Acc(), big[4:, 8:])
    with pytest.raises(tc.ValidationError, match="overlaps"):  # same layout, now aliasing
        s.dot_general_read_into_accum_cached(4, big[:4, :5], rhs, MM, Acc(), big[:4, 5:9])
    assert down(s, out).tobytes() == snapshot
    after = down(s, big).copy()
    check_close(after[4:, 8:], x[:4].astype(np.float64) @ y, "float32", 5)
    after[4:, 8:] = 0
    assert after.tobytes() == b.tobytes()
