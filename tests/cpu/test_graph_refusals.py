"""Refusals during a capture name the op the caller called, and host barriers reached
from another thread (``release_cached_memory``) never synchronize a stream being
captured."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from reference.fake_ctx_stack import Ctx

import tenferro_cuda as tc
from tenferro_cuda import runtime as runtime_module
from tenferro_cuda.errors import RuntimeStateError

P = Ctx(0x1000)


@pytest.fixture
def model(capture_model):
    return capture_model


def test_raw_upload_bytes_is_refused_under_its_own_name(model):
    """docs/graphs.md lists ``RawSession.upload_bytes`` as not capturable and says the
    error names the call (``download_tensor`` is named so: test_graph_capture.py)."""
    with tc.cuda_exec_session(0) as s:
        with pytest.raises(RuntimeStateError, match="not allowed during capture") as info:
            with s.capture():
                with s.raw("test") as raw:
                    raw.upload_bytes(b"\x01\x02\x03\x04")
        assert s._ctx.capture is None and s._ctx.eager
    assert info.value.op == "upload_bytes", (
        f"the refusal names {info.value.op!r}, an op the caller never called")


def test_release_cached_memory_on_another_thread_does_not_sync_a_capturing_stream(
        monkeypatch):
    """docs/graphs.md: captures run side by side with other threads' sessions of the same
    runtime. ``CudaRuntime.release_cached_memory`` (a session method, refused only on the
    capturing thread) calls ``synchronize_all``, which ``cuStreamSynchronize``s every
    context's stream -- the stream another thread is capturing, which invalidates that
    capture (a synchronize of a capturing stream is illegal in every capture mode)."""
    synced = []
    monkeypatch.setattr(runtime_module._driver, "stream_synchronize",
                        lambda stream, op="": synced.append(stream))
    capturing = SimpleNamespace(stream=0xCA, capture=object(), closed=False)
    idle = SimpleNamespace(stream=0x1D, capture=None, closed=False)
    trimmed = []
    rt = SimpleNamespace(_lock=threading.Lock(), _contexts=[capturing, idle],
                         check_alive=lambda op="": None,
                         current=lambda: __import__("contextlib").nullcontext(),
                         pool=SimpleNamespace(trim=lambda keep=0: trimmed.append(keep),
                                              drain=lambda: None))
    rt.synchronize_all = lambda: runtime_module.CudaRuntime.synchronize_all(rt)
    try:
        runtime_module.CudaRuntime.release_cached_memory(rt)
    except RuntimeStateError:
        pass  # refusing while another thread captures is an acceptable answer
    assert 0xCA not in synced, (
        "release_cached_memory synchronized a stream that another thread is capturing")
