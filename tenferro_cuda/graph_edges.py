"""Programmatic edges in a captured graph (docs/graphs.md, "Programmatic edges").

A plain edge between two kernel nodes launches the second grid only once the first has
completed and its writes are visible: about 1.1 us per node of a replayed chain of small
kernels on an H100. A programmatic edge (sm_90 and later) lets the driver launch the
second grid while the first one finishes; the second must then wait by itself before it
touches memory. Every library kernel does: its first statement is ``tf::grid_wait()``
(ptx/include/tenferro/types.cuh), and the runtime records the handles of those functions
(``CudaRuntime.waiting_functions``: the families' kernels and fusion's).

So after a capture, each plain edge from a kernel node into a kernel node of such a
function becomes programmatic. Edges into anything else -- a user's kernel, cuBLAS, a
copy or memset node -- stay as they are. Every ordering holds as before: a kernel reached
by a programmatic edge completes only after its wait returned, that is after the kernels
before it completed, so the completion of any node still implies the completion of every
node before it.
"""

from __future__ import annotations

from collections.abc import Container

from . import _driver_graph as dg

__all__ = ["make_programmatic"]


def make_programmatic(graph: int, waiting: Container[int]) -> int:
    """Make the eligible edges of ``graph`` programmatic (see the module docstring); the
    number of edges changed (0 where the driver cannot)."""
    edges = dg.graph_edges(graph)
    kinds: dict[int, int] = {}
    waits: dict[int, bool] = {}

    def kind(node: int) -> int:
        if node not in kinds:
            kinds[node] = dg.node_type(node)
        return kinds[node]

    picked = []
    for source, target, data in edges:
        if data.type or data.from_port or data.to_port:
            continue  # an edge the capture annotated already
        if kind(source) != dg.NODE_KERNEL or kind(target) != dg.NODE_KERNEL:
            continue
        if target not in waits:
            waits[target] = dg.kernel_function(target) in waiting
        if waits[target]:
            picked.append((source, target))
    return len(picked) if dg.make_edges_programmatic(graph, picked) else 0
