"""The alias rule across the ranks of a collective, on the CPU fakes (``two``: a
communicator over two fake sessions sharing one host memory; fake NCCL).

Managed memory (``kDLCUDAManaged``) is adopted by every device's session, so one managed
buffer can be a tensor of rank 0's session and of rank 1's. Every output of a call is
judged against every input and every other output of the call, on every rank of the
process: an overlap is a ValidationError raised before anything reaches NCCL.
"""

from __future__ import annotations

import numpy as np
import pytest
from reference.fake_sessions import get, put

from tenferro_cuda.dlpack import ForeignOwner
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import ValidationError
from tenferro_cuda.ops import interop

F32 = DType.FLOAT32


def _managed(sessions, shapes):
    """One buffer of "managed memory", adopted once into each session (what
    ``from_dlpack`` of a kDLCUDAManaged array gives on every device)."""
    nbytes = max(int(np.prod(s)) for s in shapes) * 4
    ptr = sessions[0]._ctx.memory.alloc(nbytes)
    return [interop._adopt(s._ctx, ptr, F32, shape, None, ForeignOwner(0, None))
            for s, shape in zip(sessions, shapes)]


def test_managed_adoptions_are_resident_on_both_ranks(two):
    """The premise (passes): each adoption is a tensor of its own rank's session."""
    comm, sessions, lib = two
    a0, a1 = _managed(sessions, [(6,), (6,)])
    assert a0.data_ptr() == a1.data_ptr()
    out = comm.all_reduce([a0, a1])  # two inputs over one buffer: reads only, fine
    assert [t.shape for t in out] == [(6,), (6,)]


def test_all_gather_into_an_output_over_another_ranks_input(two):
    comm, (s0, s1), lib = two
    o0, x1 = _managed((s0, s1), [(2, 6), (6,)])  # rank 0's out is rank 1's x
    x0 = put(s0, np.arange(6, dtype=np.float32))
    o1 = put(s1, np.zeros((2, 6), np.float32))
    lib.log.clear()
    with pytest.raises(ValidationError, match="overlap"):
        comm.all_gather_into([x0, x1], [o0, o1])
    assert lib.log == []


def test_all_reduce_into_in_place_over_memory_another_rank_also_reads(two):
    """In place on rank 0 (out0 is x0) is allowed; but out0 is also rank 1's x1."""
    comm, (s0, s1), lib = two
    x0, x1 = _managed((s0, s1), [(6,), (6,)])
    o1 = put(s1, np.zeros(6, np.float32))
    lib.log.clear()
    with pytest.raises(ValidationError, match="overlap"):
        comm.all_reduce_into([x0, x1], [x0, o1])
    assert lib.log == []


def test_send_recv_a_receive_over_a_send_of_the_other_rank(two):
    comm, (s0, s1), lib = two
    r0, x1 = _managed((s0, s1), [(6,), (6,)])  # rank 0 receives into what rank 1 sends
    x0 = put(s0, np.arange(6, dtype=np.float32))
    r1 = put(s1, np.zeros(6, np.float32))
    lib.log.clear()
    with pytest.raises(ValidationError, match="overlap"):
        comm.send_recv(sends=[(x0, 1), (x1, 0)], recvs=[(r1, 0), (r0, 1)])
    assert lib.log == [], get(r0)
