"""The alias and read-only rules of a graph replay's rebinding, on the CPU fakes of
``reference/fake_graph.py``.

A rebinding moves node addresses by memory (``graph_rebind``), whatever object put them
there. So:

- a tensor whose memory the graph writes through any object (an in-place ``add_into``
  whose ``out`` is another Tensor over the same buffer, a later op writing a view of it)
  counts as written, and is never rebound to read-only memory;
- every node address inside the rebound tensor's allocation moves with it (a kernel may
  hold a view by the allocation's base address and an offset), so a tensor that shares
  its allocation with another tensor of the graph not inside its view cannot be moved
  unambiguously and is refused.
"""

from __future__ import annotations

from types import SimpleNamespace as NS

import pytest
from reference.fake_graph import FakeSession, tensor

from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import ValidationError
from tenferro_cuda.exec import capture as cap
from tenferro_cuda.graph import CudaGraph
from tenferro_cuda.tensor import Tensor, TensorView


class _SiteTable:
    """A node table like ``graph_rebind.NodeTable``: one kernel node whose parameter words
    hold the given addresses; ``sites(lo, hi)`` lists the words whose value is in
    ``[lo, hi)``; ``move`` records the words moved (and by how much)."""

    def __init__(self, words: dict[str, int]) -> None:
        self.words = words  # parameter name -> captured address
        self.moved: dict[str, int] = {}

    def sites(self, lo, hi):
        return [("kernel", name, v) for name, v in self.words.items() if lo <= v < hi]


    def move(self, sites, shift):
        for _, name, _ in sites:
            self.moved[name] = shift

    def push(self, exe, entries, context):
        pass


def _read_only(ctx, shape=(4,)):
    far = ctx.home.alloc(4 * 64)
    return Tensor._make(DType.FLOAT32, shape, buffer=ctx.home.adopt(
        far.ptr, far.nbytes, NS(readonly=True)))


def _graph(session, ops):
    ctx = session._ctx
    state = cap.CaptureState(ctx, cap.GraphMemory(ctx.home, 99))
    for op, args, outputs in ops:
        state.admit(op, args, outputs)
    g = CudaGraph._begin(session, state)
    g._ready(state, 0xA1, 0xE1)
    return g


def test_rebinding_an_input_written_in_place_through_another_object_to_read_only(driver):
    """``add_into(x, b, out)`` with ``out`` a second Tensor over ``x``'s buffer (in place,
    accepted); the graph's kernel writes ``out``'s address == ``x``'s address. Rebinding
    ``x`` to read-only memory moves the output word too: the replay would write the
    read-only memory. It must be refused like rebinding ``out`` itself is."""
    session = FakeSession()
    ctx = session._ctx
    ctx.context_id = 5
    x, b = tensor(ctx), tensor(ctx)
    out = Tensor._make(DType.FLOAT32, (4,), buffer=x.buffer)  # same memory, another object
    g = _graph(session, [("add_into", (x, b, out), (2,))])
    g._table = table = _SiteTable({"out": out.data_ptr(), "a": x.data_ptr(),
                                   "b": b.data_ptr()})
    readonly = _read_only(ctx)
    with pytest.raises(ValidationError, match="read-only"):
        g._rebind(ctx, {out: readonly})  # the output key itself: refused (holds)
    try:
        g._rebind(ctx, {x: readonly})
    except ValidationError:
        return  # refused: the contract holds
    pytest.fail(f"rebinding the input x to read-only memory was accepted, and it moved the "
                f"kernel's output word as well: moved {table.moved} -> the replay writes "
                "memory adopted read-only")


def test_rebinding_an_input_whose_view_a_later_op_writes_to_read_only(driver):
    """op 1 reads ``x``; op 2 (``copy_read_into``) writes ``x[:2]`` (another object over the
    same memory). Rebinding ``x`` to read-only memory moves op 2's destination word."""
    session = FakeSession()
    ctx = session._ctx
    ctx.context_id = 5
    x, src, y = tensor(ctx), tensor(ctx, (2,)), tensor(ctx)
    head = TensorView(x, (2,), (1,), 0)
    g = _graph(session, [("neg_into", (x, y), (1,)),
                         ("copy_read_into", (src, head), (1,))])
    g._table = table = _SiteTable({"neg.x": x.data_ptr(), "neg.out": y.data_ptr(),
                                   "copy.src": src.data_ptr(), "copy.dst": head.data_ptr()})
    try:
        g._rebind(ctx, {x: _read_only(ctx)})
    except ValidationError:
        return
    assert "copy.dst" in table.moved
    pytest.fail(f"rebinding x to read-only memory was accepted and moved {table.moved}: "
                "copy_read_into's destination now points into memory adopted read-only")


def test_rebinding_the_written_key_itself_to_read_only_is_refused(driver):
    """The covered case, for contrast (passes)."""
    session = FakeSession()
    ctx = session._ctx
    ctx.context_id = 5
    x, y = tensor(ctx), tensor(ctx)
    g = _graph(session, [("neg_into", (x, y), (1,))])
    g._table = table = _SiteTable({"x": x.data_ptr(), "y": y.data_ptr()})
    with pytest.raises(ValidationError, match="read-only"):
        g._rebind(ctx, {y: _read_only(ctx)})
    assert table.moved == {}
    g._rebind(ctx, {x: _read_only(ctx)})  # an input only read: fine
    assert set(table.moved) == {"x"}


# --- strided kernels hold the *base* address of a view -------------------------------------
# The elementwise engine's strided/broadcast kernels (engine._strided/_bcast) and the
# storage copies (storage.copy_layout) take the view's *base buffer* address plus a layout
# offset, not the address of the view's element 0. For a view with offset > 0 that base
# address lies below the view's byte range -- possibly inside another tensor's range -- so
# NodeTable.sites(byte_range(view)) misses it, and the site of another tensor covers it.


def test_strided_kernel_pointer_of_an_offset_view_lies_inside_the_views_byte_range(monkeypatch):
    """What the rebinding relies on ("every address inside the key's view that a node of
    the graph holds is moved"): the kernel's pointer word for ``o`` must lie in
    ``byte_range(o)``. The engine passes ``o.base.buffer.ptr`` instead."""
    import numpy as np
    from test_elementwise_emu import emulated_session, put

    from tenferro_cuda.shapes.aliasing import byte_range

    s, dev, _ = emulated_session(monkeypatch)
    buf = put(s, np.zeros(16, np.float32))
    o = TensorView(buf, (2, 3), (1, 2), 4)  # elements 4..9, a transposed layout
    x = put(s, np.ones((2, 3), np.float32))
    s.neg_into(x, o)
    path, *_, args = dev.launches[-1]
    assert path == "strided"
    word = args[0]  # the output pointer parameter
    lo, hi = byte_range(o)
    assert lo <= word < hi, (f"the kernel holds o's memory through {word:#x}, outside o's "
                             f"byte range [{lo:#x}, {hi:#x}): a rebinding of o moves nothing, "
                             "and a rebinding of whatever tensor covers that address moves "
                             "o's output")


def test_tensors_sharing_an_allocation_are_not_rebound_by_guesswork(driver):
    """``a`` = elements 0..3 of a buffer (read by op 1); ``o`` = a strided view of elements
    4..9 of the same buffer, written by op 2 through a kernel given the buffer's base
    address (as raw kernels may be) == ``a``'s address. A node address cannot be told to
    belong to one or the other: rebinding either is refused, and nothing is moved."""
    session = FakeSession()
    ctx = session._ctx
    ctx.context_id = 5
    buf = tensor(ctx, (16,))
    a = TensorView(buf, (4,), (1,), 0)
    o = TensorView(buf, (2, 3), (1, 2), 4)
    x = tensor(ctx, (2, 3))
    g = _graph(session, [("neg", (a,), ()), ("neg_into", (x, o), (1,))])
    g._table = table = _SiteTable({"neg.x": a.data_ptr(), "neg_into.out": buf.buffer.ptr,
                                   "neg_into.x": x.buffer.ptr})
    other = tensor(ctx, (16,))
    for key, new in ((o, TensorView(other, (2, 3), (1, 2), 4)), (a, _read_only(ctx))):
        with pytest.raises(ValidationError, match="cannot be told apart"):
            g._rebind(ctx, {key: new})
    assert table.moved == {}
    g._rebind(ctx, {x: tensor(ctx, (2, 3))})  # a tensor of its own: moved
    assert set(table.moved) == {"neg_into.x"}


def test_an_offset_view_alone_in_its_allocation_is_rebound_by_any_address_in_it(driver):
    """A strided view at an offset, alone in its allocation: a kernel holding it by the
    address of its element 0 (what the elementwise kernels are given), by the allocation's
    base address and an offset, or by its end address, has that word moved by the
    rebinding's shift."""
    session = FakeSession()
    ctx = session._ctx
    ctx.context_id = 5
    buf, x = tensor(ctx, (16,)), tensor(ctx, (2, 3))
    o = TensorView(buf, (2, 3), (1, 2), 4)
    other = tensor(ctx, (16,))
    new = TensorView(other, (2, 3), (1, 2), 4)
    shift = new.data_ptr() - o.data_ptr()
    for word in (o.data_ptr(), buf.buffer.ptr, buf.buffer.ptr + 40):
        g = _graph(session, [("neg_into", (x, o), (1,))])
        g._table = table = _SiteTable({"out": word, "x": x.data_ptr()})
        g._rebind(ctx, {o: new})
        assert table.moved == {"out": shift}
