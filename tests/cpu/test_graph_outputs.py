"""What a capture notes of the tensors it is given, and the rules a replay's rebinding
keeps for them (no GPU: the driver's graph calls are recorded): outputs are never rebound
to read-only memory, and a caller's own op name never abandons a capture."""

from __future__ import annotations

import pytest
from reference.fake_graph import FakeSession, FakeTable, tensor

from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import RuntimeStateError, ValidationError
from tenferro_cuda.exec import capture as cap
from tenferro_cuda.graph import CaptureScope, CudaGraph
from tenferro_cuda.tensor import Tensor


def test_outputs_are_noted_and_never_rebound_to_read_only_memory(driver):
    from types import SimpleNamespace as NS

    from tenferro_cuda.configs.dot import GemmJob, GroupedGemmConfig

    session = FakeSession()
    ctx = session._ctx
    ctx.context_id = 5
    x, out, a, b, c = (tensor(ctx) for _ in range(5))
    state = cap.CaptureState(ctx, cap.GraphMemory(ctx.home, 99))
    state.admit("add_into", (x, x, out), (2,))
    state.admit("grouped_gemm", (GroupedGemmConfig((GemmJob(a, b, c),)),))
    assert state.written == {id(out), id(c)}
    g = CudaGraph._begin(session, state)
    g._ready(state, 0xA1, 0xE1)
    g._table = FakeTable()
    far = ctx.home.alloc(4 * 64)
    readonly = Tensor._make(DType.FLOAT32, (4,), buffer=ctx.home.adopt(
        far.ptr, far.nbytes, NS(readonly=True)))
    with pytest.raises(ValidationError, match="read-only"):
        g._rebind(ctx, {out: readonly})
    assert g._table.moves == []
    g._rebind(ctx, {x: readonly})  # an input may be read-only memory


def test_op_methods_know_their_output_parameters():
    from tenferro_cuda.exec.entry import OUTPUTS
    from tenferro_cuda.session import CudaExecSession

    def positions(name):
        return OUTPUTS[getattr(CudaExecSession, name).__wrapped_op__]

    assert positions("add_into") == (2,)
    assert positions("copy_read_into") == (1,)
    assert positions("axpby_read_into_accum") == (3,)
    assert positions("add") == ()


def test_a_callers_op_name_never_abandons_a_capture(driver):
    from tenferro_cuda.exec import entry

    session = FakeSession()
    ctx = session._ctx
    with CaptureScope(session) as g:
        entry.check(session, "synchronize", "ensure_gpu_resident")  # a user's op name
        assert ctx.capture is not None and not ctx.capture.abandoned
    assert not g.closed
    with pytest.raises(RuntimeStateError, match="not allowed during capture"):
        with CaptureScope(session):
            entry.check(session, "synchronize")  # the method itself


class _WordTable:
    """A node table whose one site in each range holds ``word`` (a kernel parameter)."""

    def __init__(self, word: int) -> None:
        self.word, self.moves = word, []

    def sites(self, lo, hi):
        return [("node", (0, 8), self.word)] if lo <= self.word < hi else []


    def move(self, sites, shift):
        self.moves.append((tuple(sites), shift))

    def push(self, exe, entries, context):
        pass


@pytest.mark.parametrize("kind", ["int", "uint64", "float", "complex"])
def test_a_scalar_with_the_bits_of_a_rebound_address_refuses_the_rebinding(driver, kind):
    import struct

    import numpy as np

    session = FakeSession()
    ctx = session._ctx
    ctx.context_id = 5
    x, other = tensor(ctx), tensor(ctx)
    word = x.data_ptr() + 8  # a parameter word inside x's bytes
    value = {"int": word, "uint64": np.uint64(word),
             "float": struct.unpack("<d", struct.pack("<Q", word))[0],
             "complex": complex(struct.unpack("<d", struct.pack("<Q", word))[0], 1.0)}[kind]
    state = cap.CaptureState(ctx, cap.GraphMemory(ctx.home, 99))
    state.admit("add", (x, value))
    g = CudaGraph._begin(session, state)
    g._ready(state, 0xA1, 0xE1)
    g._table = _WordTable(word)
    with pytest.raises(ValidationError, match="scalar operand .* bits of an address"):
        g._rebind(ctx, {x: other})
    assert g._table.moves == []
    g._rebind(ctx, {x: x})  # no shift: nothing to tell apart

    state = cap.CaptureState(ctx, cap.GraphMemory(ctx.home, 99))
    state.admit("add", (x, 3))  # a value that is no address in x: rebinding moves the word
    g = CudaGraph._begin(session, state)
    g._ready(state, 0xA1, 0xE1)
    g._table = _WordTable(word)
    g._rebind(ctx, {x: other})
    assert g._table.moves == [((("node", (0, 8), word),), other.data_ptr() - x.data_ptr())]
