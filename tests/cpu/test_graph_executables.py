"""The executable graphs of a rebinding graph (``graph_rebind.Executables``), with the
driver replaced by a model that records, per executable graph, the parameter words each
node was last given: after every replay the executable graph launched must hold every
site at its captured address plus the shift of the replay's placement, whichever
executable graphs were bound, repurposed, or left half-pushed by a failed update."""

from __future__ import annotations

import random

import pytest

from tenferro_cuda import _driver_graph
from tenferro_cuda.errors import BackendSourceError, OutOfMemoryError
from tenferro_cuda.graph_rebind import MAX_EXECS, Executables, NodeTable

BASE = 0x7F0000000000


class Node:
    """A kernel node: words by position; ``pushed[exe]`` is what ``exe`` holds."""

    def __init__(self, words: dict[int, int]) -> None:
        self.original = dict(words)
        self.values = dict(words)
        self.pushed: dict[int, dict[int, int]] = {}
        self.fail = False

    def write(self, where, value):
        self.values[where] = value

    def push(self, exe, context):
        if self.fail:
            raise BackendSourceError("cuGraphExecKernelNodeSetParams_v2 failed")
        self.pushed[exe] = dict(self.values)

    def held(self, exe):
        return self.pushed.get(exe, self.original)


def program(keys: int = 3, nodes: int = 6, seed: int = 0):
    """Nodes whose words point into ``keys`` tensors (several per node, some shared)."""
    rng = random.Random(seed)
    spans = {k: (BASE + k * 0x100000, BASE + k * 0x100000 + 4096) for k in range(keys)}
    table = object.__new__(NodeTable)
    table.nodes = [Node({i: spans[rng.randrange(keys)][0] + 8 * rng.randrange(64)
                         for i in range(rng.randrange(1, 4))} | {9: 1024})
                   for _ in range(nodes)]
    table._sites = [(n, w, v) for n in table.nodes for w, v in n.values.items()
                    if v >= 1 << 16]

    def sites_of(k):
        return table.sites(*spans[k])

    return table, spans, sites_of


def holds(table, spans, exe, placement) -> bool:
    for node in table.nodes:
        for where, value in node.original.items():
            shift = next((placement.get(k, 0) for k, (lo, hi) in spans.items()
                          if lo <= value < hi), 0)
            if node.held(exe)[where] != value + shift:
                return False
    return True


@pytest.fixture
def made(monkeypatch):
    handles = iter(range(0xE100, 0xE200))
    made = []
    monkeypatch.setattr(_driver_graph, "instantiate",
                        lambda graph, op: made.append(graph) or next(handles))
    return made


def test_a_replayed_placement_holds_its_addresses_whatever_came_before(made):
    table, spans, sites_of = program()
    execs = Executables(0xA1, 0xE1, table, spans, sites_of)
    rng = random.Random(1)
    shifts = [0, 0x1000, 0x20000, -0x3000]
    for step in range(400):
        placement = {k: s for k in spans if (s := rng.choice(shifts))}
        for node in table.nodes:
            node.fail = rng.random() < 0.03
        try:
            exe = execs.select(placement, 5)
        except BackendSourceError:
            continue  # a failed update: the next replay of any placement is still right
        assert holds(table, spans, exe, placement), step
        assert len(execs.handles()) <= MAX_EXECS
    assert len(made) == MAX_EXECS - 1  # the other executable graphs were instantiated


def test_a_few_placements_in_a_cycle_are_bound_once_then_replay_with_no_update(made):
    table, spans, sites_of = program(nodes=8)
    pushes = []
    for node in table.nodes:
        real = node.push
        node.push = lambda exe, context, real=real: pushes.append(exe) or real(exe, context)
    execs = Executables(0xA1, 0xE1, table, spans, sites_of)
    cycle = [{0: 0x1000 * j} for j in range(1, 5)]
    for placement in cycle * 2:
        execs.select(placement, 5)
    before = len(pushes)
    launched = [execs.select(p, 5) for p in cycle * 5]
    assert len(pushes) == before  # no node is pushed once each placement has its own
    assert len(set(launched)) == 4 and all(
        holds(table, spans, exe, p) for exe, p in zip(launched, cycle * 5))
    assert execs.select({}, 5) and len(execs.handles()) <= MAX_EXECS


def test_an_executable_graph_the_driver_refuses_leaves_one_to_rebind(monkeypatch):
    def refuse(graph, op):
        raise OutOfMemoryError("cuGraphInstantiateWithFlags failed", op=op)

    monkeypatch.setattr(_driver_graph, "instantiate", refuse)
    table, spans, sites_of = program()
    execs = Executables(0xA1, 0xE1, table, spans, sites_of)
    for placement in ({0: 64}, {1: 128}, {0: 64}, {}, {0: 64, 2: -64}):
        exe = execs.select(placement, 5)
        assert exe == 0xE1 and holds(table, spans, exe, placement)
    assert execs.handles() == (0xE1,) and execs.limit == 1


def test_a_failed_update_is_not_taken_for_a_bound_placement(made):
    table, spans, sites_of = program(nodes=4, seed=3)
    execs = Executables(0xA1, 0xE1, table, spans, sites_of)
    moved = {0: 0x1000, 1: 0x1000, 2: 0x1000}
    table.nodes[-1].fail = True
    with pytest.raises(BackendSourceError):
        execs.select(moved, 5)
    table.nodes[-1].fail = False
    exe = execs.select(moved, 5)  # the same placement again: pushed in full, not trusted
    assert holds(table, spans, exe, moved)
    assert holds(table, spans, execs.select({}, 5), {})
