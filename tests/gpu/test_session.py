"""The session protocol: construction, thread affinity, scopes, re-entry, contexts."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda import _driver
from tenferro_cuda.runtime import CudaRuntime


def current() -> int:
    return int(_driver.ctx_get_current())


def test_not_constructible():
    with pytest.raises(TypeError):
        tc.CudaExecSession()
    with pytest.raises(TypeError):
        tc.RawSession()
    with pytest.raises(TypeError):
        tc.KernelSession()


def test_with_cuda_exec_session_returns_result():
    out = tc.with_cuda_exec_session(lambda s: down(s, up(s, np.arange(3.0))).sum())
    assert out == 3.0


def test_wrong_thread_rejected(s):
    errors = []

    def other():
        try:
            s.device_info()
        except tc.RuntimeStateError as exc:
            errors.append(exc)

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert len(errors) == 1 and "another thread" in str(errors[0])


def test_use_after_scope():
    with tc.cuda_exec_session(0) as s:
        x = up(s, np.ones(4, np.float32))
        with s.raw("test.raw") as raw:
            stream = raw.stream()
            module = raw.compile_nvrtc('extern "C" __global__ void k() {}')
            fn = module.function("k")
        with pytest.raises(tc.RuntimeStateError):
            raw.stream()
        with pytest.raises(tc.RuntimeStateError):
            _ = stream.handle
        with pytest.raises(tc.RuntimeStateError):
            module.function("k")
        with pytest.raises(tc.RuntimeStateError):
            fn.attributes()
    with pytest.raises(tc.RuntimeStateError):
        s.synchronize()
    with pytest.raises(tc.RuntimeStateError):
        s.download_to_host(x)


def test_reentry_rejected_and_sessions_on_other_threads_run():
    with tc.cuda_exec_session(0) as s:
        with pytest.raises(tc.SessionEntryError) as info:
            with tc.cuda_exec_session(0):
                pass
        assert info.value.kind == "reentered"
        results = {}

        def other():
            with tc.cuda_exec_session(0) as s2:
                results["v"] = down(s2, up(s2, np.arange(5))).tolist()
                results["stream"] = s2.stream_handle

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert results["v"] == [0, 1, 2, 3, 4]
        assert results["stream"] != s.stream_handle
    with tc.cuda_exec_session(0):  # usable again after the first one closed
        pass


@pytest.fixture
def foreign_ctx():
    dev = _driver.device(0)
    saved = _driver.ctx_get_current()
    ctx = _driver.ctx_create(dev)  # made current by cuCtxCreate
    _driver.ctx_pop()
    _driver.ctx_set_current(saved) if int(saved) else None
    yield ctx
    _driver.ctx_destroy(ctx)


def _enter_with(kind, foreign_ctx):
    rt = CudaRuntime.get(0)
    if kind == "none":
        while current():
            _driver.ctx_pop()
        return 0
    if kind == "foreign":
        _driver.ctx_push(foreign_ctx)
        return int(foreign_ctx)
    _driver.ctx_push(rt.context)
    return rt.context_id


@pytest.mark.parametrize("kind", ["none", "foreign", "primary"])
@pytest.mark.parametrize("raises", [False, True], ids=["returns", "raises"])
def test_context_restored_on_exit(kind, raises, foreign_ctx):
    before = _enter_with(kind, foreign_ctx)
    try:
        with pytest.raises(KeyError) if raises else _nothing():
            with tc.cuda_exec_session(0) as s:
                assert current() == s.runtime().context_id
                s.synchronize()
                if raises:
                    raise KeyError("body")
        assert current() == before
        with pytest.raises(KeyError) if raises else _nothing():
            with tc.cuda_exec_session(0) as s:
                def body(raw):
                    assert raw.context() == current() == s.runtime().context_id
                    assert raw.stream().handle == s.stream_handle
                    if raises:
                        raise KeyError("raw")
                    return 7
                assert s.with_raw("test.ctx", body) == 7
                assert current() == s.runtime().context_id
    finally:
        if kind != "none":
            _driver.ctx_pop()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("misbehaviour", ["push_no_pop", "pop_ours", "set_current"])
def test_unbalanced_callback_still_restores(misbehaviour, foreign_ctx):
    with tc.cuda_exec_session(0) as s:
        outer = current()

        def body(raw):
            if misbehaviour == "push_no_pop":
                _driver.ctx_push(foreign_ctx)
            elif misbehaviour == "pop_ours":
                _driver.ctx_pop()
            else:
                _driver.ctx_set_current(foreign_ctx)
            return "done"

        assert s.with_raw("test.unbalanced", body) == "done"
        assert current() == outer
        s.synchronize()


def _failing_put(contexts, strict=True):
    """``_driver.ctx_stack_put`` failing the way a destroyed context makes it fail."""
    err = tc.BackendSourceError("cuCtxPushCurrent failed: CUDA_ERROR_INVALID_CONTEXT (201)")
    if strict:
        raise err
    return err


def test_restore_failure_logged_not_raised(capfd, monkeypatch, foreign_ctx):
    _driver.ctx_push(foreign_ctx)
    try:
        with pytest.raises(ValueError, match="own error"):
            with tc.cuda_exec_session(0):
                _driver.ctx_pop()  # pop ours: the restore must now put the saved one back
                monkeypatch.setattr(_driver, "ctx_stack_put", _failing_put)
                raise ValueError("the body's own error")
        monkeypatch.undo()
        err = capfd.readouterr().err
        assert "tenferro_cuda: failed to restore CUDA context during cuda_exec_session" in err
        assert "CUDA_ERROR_INVALID_CONTEXT" in err
    finally:
        monkeypatch.undo()
        while current():
            _driver.ctx_pop()
    with tc.cuda_exec_session(0) as s:  # still usable
        def body(raw):
            _driver.ctx_pop()  # ours
            _driver.ctx_pop()  # the session's: the restore must set the primary back
            monkeypatch.setattr(_driver, "ctx_stack_put", _failing_put)
            return "result"
        assert s.with_raw("test.restore_fail", body) == "result"
        monkeypatch.undo()
        assert "failed to restore CUDA context during test.restore_fail" in capfd.readouterr().err
        _driver.ctx_push(s._rt.context)
        s.synchronize()


def test_supports_answers_from_queries(s):
    info = s.device_info()
    assert s.supports(tc.Capability.RAW_MODULE)
    assert s.supports(tc.Capability.RUNTIME_COMPILATION)
    assert s.supports(tc.Capability.BF16_ARITHMETIC) == (info.compute_capability >= (8, 0))
    expect_peer = any(  # a peer: direct copies both ways
        _driver.can_access_peer(_driver.device(0), _driver.device(i))
        and _driver.can_access_peer(_driver.device(i), _driver.device(0))
        for i in range(1, _driver.device_count()))
    assert s.supports(tc.Capability.PEER_COPY) == expect_peer


def test_device_info_and_identity(s):
    info = s.device_info()
    assert info.ordinal == 0 and info.name and info.uuid.startswith("GPU-")
    assert info.total_memory > 1 << 30 and info.multiprocessor_count > 0
    assert info.peak_bandwidth_gbps > 100
    with pytest.raises(AttributeError):
        info.name = "x"
    assert s.runtime_identity().ordinal == 0
    assert s.allocation_domain() == s.runtime().domain
