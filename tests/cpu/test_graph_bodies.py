"""Tensors that raw and kernel-session bodies use inside a capture are the graph's like an
op's (docs/graphs.md): kept alive (a replay never reads memory freed and handed out
again), listed in ``g.inputs`` and rebindable. Runs the real session, capture scope and
sub-sessions over the fake context stack and the recorded graph driver calls."""

from __future__ import annotations

import gc

import pytest
from reference.fake_ctx_stack import Ctx, FakeRuntime, install, use_runtime
from reference.fake_graph import capture_context, tensor

import tenferro_cuda as tc
from tenferro_cuda.raw import KernelArg

P = Ctx(0x1000)


def _context(runtime):
    ctx = capture_context(runtime)
    ctx.launched = []
    ctx.function = lambda family, expression: ("fn", expression)
    ctx.grid = lambda n, block=256, per_thread=1: 1
    ctx.launch = lambda fn, codes, grid, args, op, block=(256, 1, 1), shared=0: \
        ctx.launched.append((fn, args, op))
    return ctx


@pytest.fixture
def model(monkeypatch, driver):
    m = install(monkeypatch)
    use_runtime(monkeypatch, FakeRuntime(P, _context))
    return m


def test_tensor_read_by_a_raw_body_is_kept_and_listed(model):
    with tc.cuda_exec_session(0) as s:
        ctx = s._ctx
        x = tensor(ctx)
        y = tensor(ctx)
        with s.capture() as g:
            with s.raw("test.raw") as raw:
                px, py = raw.tensor(x), raw.tensor_mut(y)
                KernelArg.pointer(px), KernelArg.pointer(py)
        ids = {id(t) for t in g.inputs}
        assert id(x) in ids and id(y) in ids, (
            "tensors a raw body handed to its kernels are not among g.inputs: the graph "
            "neither keeps them alive nor lets a replay rebind them")
        g.close()


def test_a_raw_body_tensor_dropped_after_capture_is_not_handed_out_again(model):
    """The use-after-free the keep-alive rule exists to prevent."""
    with tc.cuda_exec_session(0) as s:
        ctx = s._ctx
        x = tensor(ctx)
        ptr, nbytes = x.buffer.ptr, x.buffer.nbytes
        with s.capture() as g:
            with s.raw("test.raw") as raw:
                KernelArg.pointer(raw.tensor(x))  # the captured kernel reads ptr
        del x
        gc.collect()
        fresh = ctx.home.alloc(nbytes)  # the next tensor of that size
        assert fresh.ptr != ptr, (
            "the block a captured raw kernel reads on every replay was freed and handed "
            "to a new tensor while the graph is alive")
        g.close()


def test_kernel_session_output_is_kept_and_listed(model):
    with tc.cuda_exec_session(0) as s:
        ctx = s._ctx
        y = tensor(ctx)
        with s.capture() as g:
            s.with_kernels("test.ks", lambda ks: ks.scale_tensor_write(y, 3.0))
        assert ctx.launched, "scale_tensor_write was recorded into the graph"
        assert id(y) in {id(t) for t in g.inputs}, (
            "the tensor kernel-session scale_tensor_write writes in the graph is not kept "
            "alive (nor rebindable, nor marked written)")
        g.close()


def test_raw_body_tensor_can_be_rebound(model):
    """docs/graphs.md: rebinding covers raw and kernel-session bodies' kernels."""
    with tc.cuda_exec_session(0) as s:
        ctx = s._ctx
        x, x2 = tensor(ctx), tensor(ctx)
        with s.capture() as g:
            with s.raw("test.raw") as raw:
                KernelArg.pointer(raw.tensor(x))
        try:
            assert id(x) in {id(t) for t in g.inputs}, (
                "x, read by the raw body's kernel, is not a key replay(inputs=) accepts")
            g._rebind(ctx, {x: x2})
        finally:
            g.close()


def test_control_a_session_op_input_is_kept(model):
    """Control (passes): the same drop after a tensor given to a session op."""
    with tc.cuda_exec_session(0) as s:
        ctx = s._ctx
        x = tensor(ctx)
        ptr, nbytes = x.buffer.ptr, x.buffer.nbytes
        with s.capture() as g:
            ctx.capture.admit("add", (x, x))
        del x
        gc.collect()
        assert ctx.home.alloc(nbytes).ptr != ptr
        g.close()
