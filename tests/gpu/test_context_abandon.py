"""The context-stack contract when scopes are not exited normally, and the lent objects
of the sub-sessions under a foreign stack (issue 13, items 1-4): a generator that held a
scope and was collected or closed elsewhere, a sub-session outlived by its session, an
exit called from another thread -- each only abandons, touching no context -- and every
raw and kernel-session method leaving the body's stack exactly as it found it."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from context_util import clear, pop, push, stack

import tenferro_cuda as tc

pytestmark = pytest.mark.usefixtures("empty_stack")


AXPY = r'''extern "C" __global__ void axpy(float a, const float* x, float* y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i]; }'''


@pytest.mark.parametrize("user", ["foreign", "none", "two_foreign"])
def test_lent_methods_leave_the_bodys_context(contexts, user):
    """A raw/kernel body makes another context current (or pops ours); every method of
    the sub-sessions still runs on ours and leaves the body's stack exactly so."""
    p, fa, fb = contexts
    with tc.cuda_exec_session(0) as s:
        x = s.upload_host_tensor(np.arange(256, dtype=np.float32))
        with s.kernels("test.lent") as ks:
            raw = ks._raw
            if user == "foreign":
                push(fa)
            elif user == "none":
                pop()
            else:
                push(fa)
                push(fb)
            before = stack()
            y = raw.alloc_output(tc.float32, (256,))
            assert stack() == before
            raw.copy_bytes(y, x, 256 * 4)
            assert stack() == before
            fn = raw.compile_nvrtc(AXPY).function("axpy")
            assert stack() == before
            raw.launch(fn, tc.LaunchConfig(grid=1, block=256),
                       [tc.KernelArg.f32(2.0), tc.KernelArg.pointer(raw.tensor(x)),
                        tc.KernelArg.pointer(raw.tensor_mut(y)), tc.KernelArg.i64(256)])
            assert stack() == before
            z = ks.alloc_zero_output(tc.float32, (256,))
            ks.scale_tensor_write(y, 0.5)
            ks.function("copy", "fill", "tf::u32")
            host = raw.download_tensor(y).numpy()
            zeros = raw.download_tensor(z).numpy()
            assert stack() == before
            if user == "none":
                push(p)
            else:
                pop()
                if user == "two_foreign":
                    pop()
        np.testing.assert_array_equal(host, 1.5 * np.arange(256, dtype=np.float32))
        np.testing.assert_array_equal(zeros, np.zeros(256, np.float32))


def _holding(kind):
    def gen():
        with tc.cuda_exec_session(0) as s:
            if kind == "session":
                yield s
            else:
                with getattr(s, kind)("test.gen") as sub:
                    yield sub
    return gen()


@pytest.mark.parametrize("kind", ["session", "raw", "kernels"])
def test_suspended_generator_collected_later_touches_no_context(contexts, kind):
    p, fa, fb = contexts
    push(fa)
    g = _holding(kind)
    lent = next(g)
    push(fb)  # the caller moves on
    before = stack()
    del g
    gc.collect()
    assert stack() == before
    with pytest.raises(tc.RuntimeStateError):
        lent.stream()
    clear()
    with tc.cuda_exec_session(0) as again:  # the thread may open a session again
        again.synchronize()


@pytest.mark.parametrize("kind", ["session", "raw"])
def test_generator_closed_on_another_thread_touches_no_context(contexts, kind):
    p, fa, fb = contexts
    push(fa)
    g = _holding(kind)
    lent = next(g)
    before = stack()
    seen = {}

    def other():
        push(fb)
        g.close()
        seen["other"] = stack()
        clear()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen["other"] == [int(fb)]
    assert stack() == before
    with pytest.raises(tc.RuntimeStateError):
        lent.stream()


def test_sub_scope_never_exited_dies_with_its_session(contexts):
    p, fa, fb = contexts
    push(fa)
    before = stack()
    cm = tc.cuda_exec_session(0)
    s = cm.__enter__()
    x = s.upload_host_tensor(np.ones(4, np.float32))
    sub = s.raw("test.outlived")
    raw = sub.__enter__()
    handle, pointer = raw.stream(), raw.tensor(x)
    cm.__exit__(None, None, None)
    assert stack() == before
    for use in (raw.stream, lambda: handle.handle, lambda: int(handle), lambda: int(pointer),
                lambda: handle.__cuda_stream__()):
        with pytest.raises(tc.RuntimeStateError):
            use()
    sub.__exit__(None, None, None)  # a late exit touches nothing
    assert stack() == before


def test_exit_from_another_thread_only_abandons(contexts):
    p, fa, fb = contexts
    push(fa)
    cm = tc.cuda_exec_session(0)
    s = cm.__enter__()
    sub = s.kernels("test.other_thread")
    sub.__enter__()
    before = stack()
    seen = {}

    def other():
        sub.__exit__(None, None, None)
        seen["other"] = stack()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen["other"] == []
    assert stack() == before
    cm.__exit__(None, None, None)
    assert stack() == [int(fa)]
