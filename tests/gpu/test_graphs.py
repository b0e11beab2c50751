"""CUDA graphs: capture, replay equal to eager bit for bit, rebinding without copies, what
cannot be captured, graph memory, cuBLAS, deferred errors, threads (issue 14)."""

from __future__ import annotations

import numpy as np
import pytest
from cuda.bindings import driver as d

import tenferro_cuda as tc
from tenferro_cuda import _driver_graph
from tenferro_cuda.configs.dot import DotGeneralConfig
from tenferro_cuda.raw import KernelArg, LaunchConfig

MM = DotGeneralConfig((1,), (0,))
SCALE_SRC = r'''
extern "C" __global__ void twice(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}
'''


def up(s, a):
    return s.upload_host_tensor(np.ascontiguousarray(a))


def down(s, t):
    return s.download_to_host(t).numpy()


def capturing(s) -> int:
    return _driver_graph.is_capturing(s.stream_handle)


def chain(s, x, w):
    """A small MLP-like step over several families."""
    h = s.dot_general(x, w, MM)
    h = s.tanh(s.add(h, h))
    r = s.reduce_sum(h, (1,))
    t = s.to_contiguous_read(s.transpose(h, (1, 0)))
    return s.sub(s.exp(s.neg(r)), s.reduce_max(t, (0,)))


def test_replay_equals_eager_and_follows_new_contents(s, rng):
    x = up(s, rng.standard_normal((16, 32), dtype=np.float32))
    w = up(s, rng.standard_normal((32, 8), dtype=np.float32))
    eager = down(s, chain(s, x, w))
    with s.capture() as g:
        out = chain(s, x, w)
    assert capturing(s) == 0
    for _ in range(3):
        g.replay()
    assert np.array_equal(down(s, out), eager)
    x2 = rng.standard_normal((16, 32), dtype=np.float32)
    s.copy_read_into(up(s, x2), x)
    g.replay()
    assert np.array_equal(down(s, out), down(s, chain(s, x, w)))
    assert "dot_general" in g.ops and len(g.ops) >= 8
    g.close()


def _random_program(s, rng, steps, x0):
    """``steps`` ops over elementwise, analytic, structural, reduction, indexing, cast."""
    vals = [x0]
    for _ in range(steps):
        a = vals[rng.integers(len(vals))]
        b = vals[rng.integers(len(vals))]
        k = rng.integers(9)
        if k == 0:
            v = s.add(a, b)
        elif k == 1:
            v = s.mul(a, b)
        elif k == 2:
            v = s.tanh(a)
        elif k == 3:
            v = s.to_contiguous_read(s.transpose(a, (1, 0)))
            v = s.to_contiguous_read(s.transpose(v, (1, 0)))
        elif k == 4:
            v = s.broadcast_in_dim(s.reduce_sum(a, (1,)), a.shape, (0,))
        elif k == 5:
            v = s.maximum(a, s.neg(b))
        elif k == 6:
            v = s.cast(s.cast(a, tc.float64), tc.float32)
        elif k == 7:
            v = s.exp(s.mul(a, b))
        else:
            v = s.sub(a, b)
        vals.append(v)
    return vals[-1]


@pytest.mark.parametrize("seed", range(8))
def test_random_programs_replay_bit_for_bit(s, seed):
    rng = np.random.default_rng(seed)
    steps = int(rng.integers(1, 51))
    host = rng.standard_normal((8, 8)).astype(np.float32) * 0.5
    x = up(s, host)
    eager = down(s, _random_program(s, np.random.default_rng(seed + 100), steps, x))
    with s.capture() as g:
        out = _random_program(s, np.random.default_rng(seed + 100), steps, x)
    g.replay()
    got = down(s, out)
    assert np.array_equal(got, eager, equal_nan=True)
    # rebinding: the same program on other data
    other = rng.standard_normal((8, 8)).astype(np.float32) * 0.5
    x2 = up(s, other)
    g.replay(inputs={x: x2})
    got2 = down(s, out)
    want2 = down(s, _random_program(s, np.random.default_rng(seed + 100), steps, x2))
    assert np.array_equal(got2, want2, equal_nan=True)
    g.replay()  # back on x
    assert np.array_equal(down(s, out), eager, equal_nan=True)
    g.close()


def test_rebinding_inputs_and_into_outputs(s, rng):
    a = up(s, rng.standard_normal(1024, dtype=np.float32))
    b = up(s, rng.standard_normal(1024, dtype=np.float32))
    out = up(s, np.zeros(1024, np.float32))
    with s.capture() as g:
        s.add_into(s.mul(a, b), b, out)
    a2, b2 = up(s, np.arange(1024, dtype=np.float32)), up(s, np.ones(1024, np.float32))
    out2 = up(s, np.zeros(1024, np.float32))
    g.replay(inputs={a: a2, b: b2, out: out2})
    assert np.array_equal(down(s, out2), np.arange(1024, dtype=np.float32) + 1)
    assert np.array_equal(down(s, out), np.zeros(1024, np.float32))
    g.replay()
    ha, hb = down(s, a), down(s, b)
    assert np.array_equal(down(s, out), ha * hb + hb)
    assert set(map(id, g.inputs)) >= {id(a), id(b), id(out)}


def test_rebinding_cycles_through_more_inputs_than_executable_graphs(s, rng):
    """Replays over 12 inputs and 3 outputs in a random order (more placements than a
    graph keeps executable graphs for: bound, reused and repurposed ones all run), each
    checked against numpy, with plain replays in between."""
    from tenferro_cuda.graph_rebind import MAX_EXECS

    a = up(s, rng.standard_normal(256, dtype=np.float32))
    w = up(s, rng.standard_normal(256, dtype=np.float32))
    out = up(s, np.zeros(256, np.float32))
    with s.capture() as g:
        s.mul_into(s.add(a, w), w, out)
    hosts = [rng.standard_normal(256, dtype=np.float32) for _ in range(12)]
    xs = [up(s, h) for h in hosts]
    outs = [up(s, np.zeros(256, np.float32)) for _ in range(3)]
    hw = down(s, w)
    order = [int(i) for i in rng.integers(0, 12, 60)] + list(range(12)) * 2
    for step, i in enumerate(order):
        if step % 7 == 3:
            g.replay()
            assert np.array_equal(down(s, out), (down(s, a) + hw) * hw)
        o = outs[i % 3]
        g.replay(inputs={a: xs[i], out: o})
        assert np.array_equal(down(s, o), (hosts[i] + hw) * hw), step
    assert len(g._execs.handles()) == MAX_EXECS
    g.close()
    assert g.closed


def test_rebinding_is_validated_before_anything_is_enqueued(s, rng):
    a = up(s, rng.standard_normal((4, 8), dtype=np.float32))
    with s.capture() as g:
        y = s.add(a, a)
    stranger = up(s, np.zeros((4, 8), np.float32))
    bad = [({stranger: a}, "captured with"),
           ({a: up(s, np.zeros((8, 4), np.float32))}, "dtype, shape and strides"),
           ({a: up(s, np.zeros((4, 8), np.float64))}, "dtype, shape and strides"),
           ({a: up(s, np.zeros((8, 4), np.float32)).T}, "strides"),
           ({a: y}, "graph owns"),
           ({a: np.zeros((4, 8), np.float32)}, "tensors"),
           ([(a, a)], "mapping")]
    for inputs, words in bad:
        with pytest.raises(tc.ValidationError, match=words):
            g.replay(inputs=inputs)
    g.replay()
    assert np.array_equal(down(s, y), 2 * down(s, a))


def test_raw_and_kernel_bodies_are_captured_and_rebound(s):
    x = up(s, np.arange(256, dtype=np.float32))
    y = up(s, np.zeros(256, np.float32))
    with s.capture() as g:
        with s.raw("test.graph.raw") as raw:
            fn = raw.compile_nvrtc(SCALE_SRC).function("twice")
            raw.launch(fn, LaunchConfig(1, 256), [KernelArg.pointer(raw.tensor(x)),
                                                   KernelArg.pointer(raw.tensor_mut(y)),
                                                   KernelArg.i32(256)])
        s.with_kernels("test.graph.ks", lambda ks: ks.scale_tensor_write(y, 3.0))
    assert np.array_equal(down(s, y), np.zeros(256, np.float32))  # recorded, not run
    g.replay()
    assert np.array_equal(down(s, y), 6 * np.arange(256, dtype=np.float32))


@pytest.mark.parametrize("what", ["synchronize", "download_to_host", "upload_host_tensor",
                                  "reclaim_buffer", "capture", "release_cached_memory",
                                  "raw.download_tensor", "from_dlpack"])
def test_not_allowed_during_capture(s, what):
    x = up(s, np.ones(64, np.float32))
    with pytest.raises(tc.RuntimeStateError, match="not allowed during capture") as info:
        with s.capture():
            s.add(x, x)
            if what == "synchronize":
                s.synchronize()
            elif what == "download_to_host":
                s.download_to_host(x)
            elif what == "upload_host_tensor":
                s.upload_host_tensor(np.ones(4, np.float32))
            elif what == "reclaim_buffer":
                s.reclaim_buffer(x)
            elif what == "capture":
                with s.capture():
                    pass
            elif what == "release_cached_memory":
                s.release_cached_memory()
            elif what == "raw.download_tensor":
                with s.raw("test.graph") as raw:
                    raw.download_tensor(x)
            else:
                s.from_dlpack(np.ones(3))
    assert what.split(".")[-1] in str(info.value)
    assert capturing(s) == 0
    y = s.add(x, x)  # the session stays usable
    assert np.array_equal(down(s, y), np.full(64, 2, np.float32))


def test_caught_refusal_still_fails_the_scope(s):
    x = up(s, np.ones(8, np.float32))
    with pytest.raises(tc.RuntimeStateError, match="synchronize"):
        with s.capture() as g:
            try:
                s.synchronize()
            except tc.RuntimeStateError:
                pass
    with pytest.raises(tc.RuntimeStateError):
        g.replay()
    assert np.array_equal(down(s, s.add(x, x)), np.full(8, 2, np.float32))


def test_exception_in_body_discards_the_graph(s):
    x = up(s, np.ones(8, np.float32))
    with pytest.raises(KeyError):
        with s.capture() as g:
            s.add(x, x)
            raise KeyError("body")
    assert capturing(s) == 0
    with pytest.raises(tc.RuntimeStateError, match="closed"):
        g.replay()
    s.synchronize()


def test_deferred_device_error_surfaces_after_replay(s):
    a = up(s, np.array([4, 5, 6], np.int32))
    z = up(s, np.array([1, 0, 2], np.int32))
    with s.capture() as g:
        s.div(a, z)
    s.synchronize()  # capturing recorded, ran nothing
    g.replay()
    with pytest.raises(tc.ValidationError, match="div") as info:
        s.synchronize()
    assert info.value.kind == "device_data"
    s.synchronize()


def test_cublas_runs_on_a_workspace_the_graph_owns(s, rng):
    a = up(s, rng.standard_normal((64, 48), dtype=np.float32))
    b = up(s, rng.standard_normal((48, 32), dtype=np.float32))
    eager = down(s, s.dot_general(a, b, MM))
    blas = s._ctx.blas("test")
    own = blas.handle.owner.ptr
    with s.capture() as g:
        c = s.dot_general(a, b, MM)
        assert blas.handle.workspace != own
        assert any(p == blas.handle.workspace for p, _ in g._memory.blocks)
    assert blas.handle.workspace == own
    g.replay()
    assert np.array_equal(down(s, c), eager)


def test_graph_memory_lifetime(s):
    x = up(s, np.ones(1 << 16, np.float32))
    before = s.memory_stats()["live_bytes"]
    with s.capture() as g:
        y = s.add(x, x)
        for _ in range(5):
            y = s.add(y, x)
    g.replay()
    assert np.array_equal(down(s, y), np.full(1 << 16, 7, np.float32))
    assert s.memory_stats()["live_bytes"] > before
    g.close()
    g.close()
    with pytest.raises(tc.RuntimeStateError):
        s.add(y, y)
    with pytest.raises(tc.RuntimeStateError, match="closed"):
        g.replay()
    del y
    s.synchronize()
    assert s.memory_stats()["live_bytes"] == before


def test_reclaimed_input_blocks_replay(s):
    x = up(s, np.ones(16, np.float32))
    with s.capture() as g:
        s.add(x, x)
    s.reclaim_buffer(x)
    with pytest.raises(tc.RuntimeStateError, match="reclaimed"):
        g.replay()


def test_grouped_gemm_is_captured_with_its_table_in_graph_memory(s, rng):
    from tenferro_cuda.configs.dot import GemmJob, GroupedGemmConfig

    shapes = [(16, 8, 12), (16, 8, 12), (4, 6, 5)]
    ops = []
    for m, k, n in shapes:
        ops.append((up(s, rng.standard_normal((m, k), dtype=np.float32)),
                    up(s, rng.standard_normal((k, n), dtype=np.float32)),
                    up(s, np.zeros((m, n), np.float32))))
    config = GroupedGemmConfig(tuple(GemmJob(a, b, c) for a, b, c in ops))
    with s.capture() as g:
        s.grouped_gemm(config)
    assert all(np.array_equal(down(s, c), np.zeros_like(down(s, c))) for _, _, c in ops)
    g.replay()
    for a, b, c in ops:
        np.testing.assert_allclose(down(s, c), down(s, a) @ down(s, b), rtol=1e-5, atol=1e-5)
    with pytest.raises(tc.ValidationError, match="pointer table"):
        g.replay(inputs={ops[0][0]: up(s, np.zeros((16, 8), np.float32))})
    s.grouped_gemm(config)  # eager again after the capture: its own plan
    g.close()
    s.grouped_gemm(config)
    s.synchronize()


def test_a_capture_scope_that_never_exits_ends_with_the_session():
    with tc.cuda_exec_session(0) as s:
        x = up(s, np.ones(16, np.float32))
        scope = s.capture()
        g = scope.__enter__()  # never exited
        s.add(x, x)
        assert capturing(s) == 1
    with tc.cuda_exec_session(0) as s:
        assert capturing(s) == 0
        y = s.add(up(s, np.ones(4, np.float32)), up(s, np.ones(4, np.float32)))
        assert np.array_equal(down(s, y), np.full(4, 2, np.float32))
    with pytest.raises(tc.RuntimeStateError):
        g.replay()
    del scope
    import gc

    gc.collect()  # collecting the scope touches nothing


def test_an_abandoned_scope_left_capturing_is_ended_by_the_next_session():
    with tc.cuda_exec_session(0) as s:
        stream = s.stream_handle
    scope = tc.cuda_exec_session(0)
    s = scope.__enter__()  # a session scope never exited, with a capture left open
    s.capture().__enter__()
    s._scope.alive = False  # as the scope's collection would leave it
    s._ctx.session_open = False
    try:
        with tc.cuda_exec_session(0) as s2:
            assert _driver_graph.is_capturing(stream) == 0
            x = up(s2, np.ones(4, np.float32))
            assert np.array_equal(down(s2, s2.add(x, x)), np.full(4, 2, np.float32))
    finally:
        # the abandoned scopes' entries on the stack: the session's and the capture's (a
        # capture scope pushes ours like a raw scope)
        assert int(d.cuCtxPopCurrent()[0]) == 0
        assert int(d.cuCtxPopCurrent()[0]) == 0


def test_every_replay_of_a_fallible_graph_is_checked(s):
    """The error word is read after each replay of a graph that captured a kernel that may
    write it, also when the synchronize before the replay read the word already."""
    a = up(s, np.array([4, 5, 6], np.int32))
    z = up(s, np.array([1, 0, 2], np.int32))
    with s.capture() as g:
        s.div(a, z)
    for _ in range(3):
        s.add(a, a)  # a kernel that cannot fail, between the replays
        s.synchronize()
        g.replay()
        with pytest.raises(tc.ValidationError, match="division by zero"):
            s.synchronize()
    s.synchronize()
    g.close()
