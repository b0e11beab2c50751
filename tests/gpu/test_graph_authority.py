"""A captured graph belongs to its session's thread and scope: it cannot be copied, what it
lends checks thread and scope, captures on two threads run side by side, a replay under a
foreign context restores it, capture scopes carry authority, and a replay never rebinds
an output to read-only memory (issue 13 items 1, 4, 5; issue 14)."""

from __future__ import annotations

import copy
import pickle
import threading

import numpy as np
import pytest
from cuda.bindings import driver as d
from gpu_util import down, up

import tenferro_cuda as tc


def test_authority_and_threads(s):
    x = up(s, np.ones(16, np.float32))
    with s.capture() as g:
        s.add(x, x)
    for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError):
            attempt(g)
    with pytest.raises(TypeError):
        tc.CudaGraph()
    errors = []

    def other():
        try:
            g.replay()
        except tc.RuntimeStateError as exc:
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1 and "thread" in str(errors[0])


def test_two_threads_capture_side_by_side():
    results, errors = {}, []
    barrier = threading.Barrier(2)

    def work(k):
        try:
            with tc.cuda_exec_session(0) as s:
                x = up(s, np.full(4096, k, np.float32))
                with s.capture() as g:
                    barrier.wait(timeout=30)
                    y = s.mul(s.add(x, x), x)
                for _ in range(10):
                    g.replay()
                results[k] = down(s, y)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in (2, 3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for k in (2, 3):
        assert np.array_equal(results[k], np.full(4096, 2 * k * k, np.float32))


def test_replay_with_a_foreign_context_current_restores_it(s):
    x = up(s, np.ones(16, np.float32))
    with s.capture() as g:
        y = s.add(x, x)
    dev = d.cuDeviceGet(0)[1]
    err, foreign = d.cuCtxCreate(None, 0, dev)
    assert int(err) == 0
    x3 = up(s, np.full(16, 3, np.float32))
    try:
        g.replay()  # the foreign context is current: ours is pushed and popped
        assert int(d.cuCtxGetCurrent()[1]) == int(foreign)
        g.replay()
        assert int(d.cuCtxGetCurrent()[1]) == int(foreign)
        g.replay(inputs={x: x3})  # the rebinding too runs with ours current
        assert int(d.cuCtxGetCurrent()[1]) == int(foreign)
    finally:
        d.cuCtxPopCurrent()
        d.cuCtxDestroy(foreign)
    assert np.array_equal(down(s, y), np.full(16, 6, np.float32))


def test_replay_after_the_session_ended():
    with tc.cuda_exec_session(0) as s:
        x = up(s, np.ones(16, np.float32))
        with s.capture() as g:
            s.add(x, x)
    with pytest.raises(tc.RuntimeStateError):
        g.replay()


def test_graph_accessors_check_thread_and_scope_and_scopes_carry_authority():
    with tc.cuda_exec_session(0) as s:
        x = up(s, np.ones(16, np.float32))
        for attempt in (copy.copy, copy.deepcopy, pickle.dumps):
            with pytest.raises(TypeError):
                attempt(s.capture())
        with s.capture() as g:
            s.add(x, x)
        assert g.ops == ("add",) and not g.closed and len(g.inputs) == 1
        seen = []

        def other():
            for use in (lambda: g.inputs, lambda: g.ops, lambda: g.closed):
                try:
                    use()
                except tc.RuntimeStateError as exc:
                    seen.append(exc)

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert len(seen) == 3
    for use in (lambda: g.inputs, lambda: g.ops, g.replay):
        with pytest.raises(tc.RuntimeStateError):
            use()


def test_a_rebound_output_is_never_read_only_memory(s):
    torch = pytest.importorskip("torch")
    import ctypes

    from tenferro_cuda import dlpack

    x = up(s, np.arange(16, dtype=np.float32))
    out = s.add(x, x)
    with s.capture() as g:
        s.add_into(x, x, out)
    peer = torch.zeros(16, dtype=torch.float32, device="cuda")
    try:
        capsule = peer.__dlpack__(stream=-1, max_version=(1, 0))
    except TypeError:
        pytest.skip("this PyTorch exports DLPack 0.x capsules only")
    info = dlpack.parse_capsule(capsule)
    if not info.versioned:
        pytest.skip("this PyTorch exports DLPack 0.x capsules only")
    ctypes.c_uint64.from_address(info.managed + 24).value |= dlpack.FLAG_READ_ONLY
    torch.cuda.synchronize()
    ro = s.from_dlpack(capsule)
    with pytest.raises(tc.ValidationError, match="read-only"):
        g.replay(inputs={out: ro})
    s.synchronize()
    assert float(peer.sum()) == 0.0  # nothing was written
    g.replay(inputs={x: ro})  # as an input it is fine: out = ro + ro = 0
    np.testing.assert_array_equal(down(s, out), np.zeros(16, np.float32))
