"""Programmatic edges in captured graphs (graph_edges.py, docs/graphs.md): which edges
change, and that every ordering still holds -- a slow producer, in-place chains, reads
after writes and writes after reads, replayed many times and compared with eager work."""

from __future__ import annotations

import numpy as np
import pytest

from tenferro_cuda import _driver_graph as dg
from tenferro_cuda.configs.dot import DotGeneralConfig
from tenferro_cuda.configs.fusion import ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.raw import KernelArg, LaunchConfig

MM = DotGeneralConfig((1,), (0,))
# A user's kernel (no tf::grid_wait): spins for about ``cycles`` clocks, then writes.
SLOW_SRC = r'''
extern "C" __global__ void slow_plus_one(const float* x, float* y, int n, long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) { }
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + 1.0f;
}
'''


def up(s, a):
    return s.upload_host_tensor(np.ascontiguousarray(a))


def down(s, t):
    return s.download_to_host(t).numpy()


def edges_by_target(s, g):
    """{target node: [(source kind, edge data)]} of the graph ``g`` captured."""
    out: dict[int, list] = {}
    for a, b, data in dg.graph_edges(g._graph):
        out.setdefault(b, []).append((dg.node_type(a), (data.from_port, data.type)))
    return out


def programmatic(data) -> bool:
    return data == (dg.PORT_PROGRAMMATIC, dg.DEPENDENCY_PROGRAMMATIC)


def slow_launch(s, x, y, cycles):
    with s.raw("test.edges.slow") as raw:
        fn = raw.compile_nvrtc(SLOW_SRC).function("slow_plus_one")
        n = x.shape[0]
        raw.launch(fn, LaunchConfig((n + 255) // 256, 256),
                   [KernelArg.pointer(raw.tensor(x)), KernelArg.pointer(raw.tensor_mut(y)),
                    KernelArg.i32(n), KernelArg.i64(cycles)])


def test_edges_into_library_kernels_only(s, rng):
    x = up(s, rng.standard_normal((16, 32), dtype=np.float32))
    w = up(s, rng.standard_normal((32, 16), dtype=np.float32))
    y = up(s, np.zeros((16, 32), np.float32))
    plan = ElementwiseFusionPlan(2, [FusionInstruction("mul", (0, 1)),
                                     FusionInstruction("add", (2, 0))], (3,))

    def work():
        h = s.tanh(s.add(x, x))
        slow_launch(s, s.reshape(h, (512,)), s.reshape(y, (512,)), 1000)  # a user's
        m = s.dot_general(y, w, MM)  # cuBLAS
        (f,) = s.execute_elementwise_fusion([m, m], plan)  # a fusion kernel
        return s.reduce_sum(s.mul(f, f), (1,))

    eager = down(s, work())
    with s.capture() as g:
        out = work()
    rt = s._rt
    nodes = dg.graph_nodes(g._graph)
    kernels = [n for n in nodes if dg.node_type(n) == dg.NODE_KERNEL]
    ours = {n for n in kernels if dg.kernel_function(n) in rt.waiting_functions}
    assert len(ours) >= 5 and len(kernels) > len(ours)  # the user's and cuBLAS's kernels
    changed = 0
    for target, incoming in edges_by_target(s, g).items():
        for kind, data in incoming:
            if programmatic(data):
                changed += 1
                assert target in ours and kind == dg.NODE_KERNEL
            elif rt.programmatic_edges:
                assert target not in ours or kind != dg.NODE_KERNEL, \
                    "a plain kernel edge into a library kernel was left"
    assert (changed > 0) == rt.programmatic_edges
    for _ in range(20):
        g.replay()
    assert np.array_equal(down(s, out), eager)
    g.close()


@pytest.mark.parametrize("cycles", [0, 20_000, 200_000])
def test_slow_producer_then_library_chain(s, rng, cycles):
    """A user's kernel spinning before it writes, then 30 library kernels each reading the
    previous output: every replay must see the producer's writes."""
    n = 4096
    x = up(s, rng.standard_normal(n, dtype=np.float32))
    y = up(s, np.zeros(n, np.float32))

    def work():
        slow_launch(s, x, y, cycles)
        v = y
        for k in range(30):
            v = s.add(v, y) if k % 3 else s.mul(v, s.tanh(y))
        return v

    with s.capture() as g:
        out = work()
    for round_ in range(5):
        new = rng.standard_normal(n, dtype=np.float32)
        s.copy_read_into(up(s, new), x)
        s.copy_read_into(s.zeros(n, "float32"), y)
        for _ in range(3):
            g.replay()
        got = down(s, out)
        want = down(s, work())
        assert np.array_equal(got, want), f"round {round_}"
    g.close()


def test_in_place_chain_reads_and_writes_one_buffer(s, rng):
    """Each kernel reads and writes ``a``: 40 in-place adds of ``b``, one subtraction of
    ``40 b``, a copy of ``a`` out, then ``b`` overwritten in place (a write after the
    chain's reads). Small integers, so any step out of order changes the result."""
    n = 1024
    a0 = rng.integers(-4, 4, n).astype(np.float32)
    b0 = rng.integers(-4, 4, n).astype(np.float32)
    a, b, b40, c = up(s, a0), up(s, b0), up(s, 40 * b0), up(s, np.zeros(n, np.float32))
    with s.capture() as g:
        for _ in range(40):
            s.add_into(a, b, a)
        s.sub_into(a, b40, a)
        s.copy_read_into(a, c)
        s.neg_into(b, b)
    for k in range(50):
        g.replay()
        assert np.array_equal(down(s, a), a0) and np.array_equal(down(s, c), a0), k
        assert np.array_equal(down(s, b), b0 if k % 2 else -b0), k
        s.copy_read_into(up(s, 40 * down(s, b)), b40)
    g.close()


def test_wide_then_narrow_kernels(s, rng):
    """A kernel over many blocks (still running when a programmatic edge launches the
    next), then small ones that read all of it, then a wide one that overwrites it."""
    n = 1 << 22
    x = up(s, rng.standard_normal(n, dtype=np.float32))
    with s.capture() as g:
        big = s.exp(s.neg(s.mul(x, x)))
        total = s.reduce_sum(big, (0,))
        scaled = s.mul(s.reduce_max(big, (0,)), total)
        s.copy_read_into(s.sqrt(s.abs(x)), big)
    e = s.exp(s.neg(s.mul(x, x)))
    eager_total = down(s, s.reduce_sum(e, (0,)))
    eager_scaled = down(s, s.mul(s.reduce_max(e, (0,)), s.reduce_sum(e, (0,))))
    eager_big = down(s, s.sqrt(s.abs(x)))
    for _ in range(10):
        g.replay()
        assert np.array_equal(down(s, total), eager_total)
        assert np.array_equal(down(s, scaled), eager_scaled)
        assert np.array_equal(down(s, big), eager_big)
    g.close()
