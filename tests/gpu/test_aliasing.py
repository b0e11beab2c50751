"""Outputs never overwrite inputs through an alias (issue 13, item 5).

Overlap is judged by device memory: a reshape that shares its input's buffer, a shifted
slice of such an alias, and two DLPack adoptions of one torch tensor are the same memory
as the original. Only an elementwise op may write exactly onto one of its inputs (in
place); every other overlap raises ValidationError and writes nothing.
"""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_cuda as tc

MATMUL = tc.DotGeneralConfig((1,), (0,))
ACC = tc.DotGeneralAccumulation(alpha=1.0, beta=1.0)


def _host(s, t):
    return s.download_to_host(t).numpy()


def _check_raises_and_untouched(s, call, *watched):
    before = [_host(s, w).copy() for w in watched]
    with pytest.raises(tc.ValidationError):
        call()
    s.synchronize()
    for w, b in zip(watched, before):
        np.testing.assert_array_equal(_host(s, w), b)


@pytest.fixture
def data(s):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((32, 32)).astype(np.float32)
    return a, s.upload_host_tensor(a)


def test_copy_read_into_reshape_alias(s, data):
    a, x = data
    alias = s.reshape(x, (32 * 32,))
    _check_raises_and_untouched(s, lambda: s.copy_read_into(s.reshape(x, (1024,)), alias), x)
    same = s.reshape(x, (32, 32))  # the very same view, as another Tensor object
    _check_raises_and_untouched(s, lambda: s.copy_read_into(x, same), x)


def test_copy_read_into_shifted_slice_of_alias(s, data):
    a, x = data
    flat = s.reshape(x, (1024,))
    _check_raises_and_untouched(s, lambda: s.copy_read_into(flat[0:1000], flat[1:1001]), x)
    _check_raises_and_untouched(s, lambda: s.copy_read_into(x[:, 1:], flat[:992].view(
        (32, 31), (32, 1), 2)), x)


def test_axpby_reshape_alias_and_shift(s, data):
    a, x = data
    y = s.reshape(x, (32, 32))
    _check_raises_and_untouched(s, lambda: s.axpby_read_into_accum(2.0, x, 1.0, y), x)
    flat = s.reshape(x, (1024,))
    _check_raises_and_untouched(
        s, lambda: s.axpby_read_into_accum(2.0, flat[:1000], 1.0, flat[8:1008]), x)


def test_dot_general_accum_alias(s, data):
    a, x = data
    b = s.upload_host_tensor(np.ones((32, 32), np.float32))
    out_alias = s.reshape(x, (32, 32))
    _check_raises_and_untouched(
        s, lambda: s.dot_general_read_into_accum(x, b, MATMUL, ACC, out_alias), x)
    _check_raises_and_untouched(
        s, lambda: s.dot_general_read_into(b, x, MATMUL, out_alias), x)
    flat = s.reshape(x, (1024,))
    shifted = flat[32:].view((31, 32), (32, 1), 32)  # rows 1.. of x as the output
    lhs = x[:31]
    _check_raises_and_untouched(
        s, lambda: s.dot_general_read_into_accum(lhs, b, MATMUL, ACC, shifted), x)


def test_dot_cached_slot_warm_alias(s, data):
    a, x = data
    b = s.upload_host_tensor(np.ones((32, 32), np.float32))
    out = s.upload_host_tensor(np.zeros((32, 32), np.float32))
    s.dot_general_read_into_accum_cached(5, x, b, MATMUL, ACC, out)  # warms the slot
    s.dot_general_read_into_accum_cached(5, x, b, MATMUL, ACC, out)
    alias = s.reshape(x, (32, 32))  # same key (shape, strides, dtype): the warm path
    _check_raises_and_untouched(
        s, lambda: s.dot_general_read_into_accum_cached(5, x, b, MATMUL, ACC, alias), x)
    s.dot_general_cache_clear()


def test_two_adoptions_of_one_torch_tensor(s):
    torch = pytest.importorskip("torch")
    t = torch.arange(1024, dtype=torch.float32, device="cuda").reshape(32, 32)
    torch.cuda.synchronize()
    first, second = s.from_dlpack(t), s.from_dlpack(t)
    assert first is not second and first.base.buffer is not second.base.buffer
    b = s.upload_host_tensor(np.ones((32, 32), np.float32))
    keep = t.clone()
    calls = [
        lambda: s.copy_read_into(first, second),
        lambda: s.axpby_read_into_accum(1.0, first, 1.0, second),
        lambda: s.dot_general_read_into_accum(first, b, MATMUL, ACC, second),
        lambda: s.dot_general_read_into(b, first, MATMUL, second),
        lambda: s.dot_general_read_into_accum_cached(7, first, b, MATMUL, ACC, second),
        lambda: s.add_into(first, b, second[1:].view((31, 32), (32, 1), 32)),
    ]
    for call in calls:
        with pytest.raises(tc.ValidationError):
            call()
    s.synchronize()
    torch.cuda.synchronize()
    assert torch.equal(t, keep)
    s.dot_general_cache_clear()


def test_elementwise_in_place_is_allowed(s, data):
    a, x = data
    y = s.upload_host_tensor(np.full((32, 32), 2, np.float32))
    s.add_into(x, y, x)
    np.testing.assert_array_equal(_host(s, x), a + 2)
    alias = s.reshape(x, (32, 32))  # the same view through another object
    s.mul_into(alias, y, x)
    np.testing.assert_array_equal(_host(s, x), (a + 2) * 2)
    s.elementwise_read_into(tc.ElementwiseReadOp.NEG, [x], alias)
    np.testing.assert_array_equal(_host(s, x), -(a + 2) * 2)
    # analytic ops have no into form: elementwise_read_into covers them, in place too
    s.elementwise_read_into(tc.ElementwiseReadOp.EXP, [x.T], x.T)  # in place, transposed
    np.testing.assert_allclose(_host(s, x), np.exp(-(a + 2) * 2), rtol=1e-6)


def test_elementwise_partial_overlap_is_rejected(s, data):
    a, x = data
    y = s.upload_host_tensor(np.ones((32, 32), np.float32))
    flat = s.reshape(x, (1024,))
    _check_raises_and_untouched(
        s, lambda: s.add_into(flat[:1000], flat[:1000], flat[1:1001]), x)
    _check_raises_and_untouched(s, lambda: s.add_into(x, y, x.T), x)  # same bytes, transposed


def test_grouped_gemm_outputs_aliasing_through_other_objects(s):
    rng = np.random.default_rng(5)
    lhs = s.upload_host_tensor(rng.standard_normal((16, 8)).astype(np.float32))
    rhs = s.upload_host_tensor(rng.standard_normal((8, 16)).astype(np.float32))
    out = s.upload_host_tensor(np.zeros((16, 16), np.float32))
    twin = s.reshape(out, (16, 16))
    jobs = [tc.GemmJob(lhs, rhs, out, MATMUL, ACC), tc.GemmJob(lhs, rhs, twin, MATMUL, ACC)]
    _check_raises_and_untouched(s, lambda: s.grouped_gemm(tc.GroupedGemmConfig(tuple(jobs))), out)


def test_sign_of_negative_zero(s):
    for dt in (np.float16, np.float32, np.float64):
        x = np.array([-0.0, 0.0, -1.5, 2.0, np.nan], dt)
        got = _host(s, s.sign(s.upload_host_tensor(x)))
        assert list(np.signbit(got[:4])) == [True, False, True, False]  # as jax.lax.sign
        assert list(got[:4]) == [0, 0, -1, 1] and np.isnan(got[4])
    bf = s.cast(s.upload_host_tensor(np.array([-0.0, 0.0], np.float32)), tc.bfloat16)
    back = _host(s, s.cast(s.sign(bf), tc.float32))
    assert np.signbit(back[0]) and not np.signbit(back[1])


@pytest.mark.parametrize("adopt", ["from_dlpack", "from_cuda_array_interface"])
def test_reclaim_through_a_self_adoption_leaves_no_alias_over_freed_memory(s, adopt):
    a = s.upload_host_tensor(np.ones(1024, np.float32))
    b = getattr(s, adopt)(a)
    assert b.data_ptr() == a.data_ptr()
    s.reclaim_buffer(a)
    s.upload_host_tensor(np.full(1024, 7, np.float32))  # would reuse the released block
    with pytest.raises(tc.RuntimeStateError):
        s.add(b, b)
    view = getattr(s, adopt)(s.upload_host_tensor(np.ones((8, 8), np.float32)).T)
    assert view.shape == (8, 8) and view.strides == (1, 8)


def test_reclaim_refused_while_a_dlpack_consumer_holds_the_memory(s):
    torch = pytest.importorskip("torch")
    import gc

    a = s.upload_host_tensor(np.arange(256, dtype=np.float32))
    held = torch.from_dlpack(s.reshape(a, (16, 16)))  # through a reshape alias
    with pytest.raises(tc.RuntimeStateError, match="still hold"):
        s.reclaim_buffer(a)
    s.synchronize()
    assert float(held.sum()) == float(np.arange(256).sum())
    del held
    gc.collect()
    s.reclaim_buffer(a)
    with pytest.raises(tc.RuntimeStateError):
        s.add(a, a)
