"""Graph figures: a 20-op chain on 1,024-float32 tensors replayed, against our eager ops
and PyTorch's ``torch.cuda.graph`` in the same run.

- replay host cost per kernel node: ``g.replay()`` calls, then one synchronize, per op;
  ours and PyTorch's in the same interleaved rounds (``host_us_group``): a back-to-back
  replay is bound by the GPU, and how fast the GPU runs such tiny kernels depends on its
  state (docs/perf-notes.md, "Graph replay: the GPU's state"), so both are timed in one;
- a step end to end (replay + synchronize) against the same chain run eagerly;
- a rebinding replay (four input tensors in turn: each gets its own executable graph)
  against a plain replay, and against PyTorch's copy into its static input followed by its
  replay; and one over 64 inputs in turn, more than a graph keeps executable graphs for,
  so that every step updates the nodes that read the input;
- capture + instantiate of the chain (its kernels loaded by one capture first).
"""

from __future__ import annotations

import time

import numpy as np

from .common import Row, host_us, host_us_group, peers

FAMILY = "graphs"
N, OPS = 1024, 20


def chain(s, x, w):
    y = x
    for i in range(OPS // 2):
        y = s.add(y, w)
        y = s.mul(y, x) if i % 2 else s.tanh(y)
    return y


def torch_chain(x, w):
    y = x
    for i in range(OPS // 2):
        y = y + w
        y = y * x if i % 2 else y.tanh()
    return y


def step_us(fn, sync, steps: int = 2000) -> float:
    """Wall time per ``fn(); sync()`` step, median of 5 runs, in us."""
    for _ in range(50):
        fn()
        sync()
    out = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(steps):
            fn()
            sync()
        out.append((time.perf_counter() - t0) / steps * 1e6)
    return sorted(out)[2]


def run(s) -> list[Row]:
    torch, _ = peers()
    rows = []
    x = s.upload_host_tensor(np.full(N, 0.5, np.float32))
    w = s.upload_host_tensor(np.full(N, 0.25, np.float32))
    others = [s.upload_host_tensor(np.full(N, 0.1 * k, np.float32)) for k in range(4)]
    # one capture first loads the kernels a capture uses (compiling them when the cache
    # is cold), so that the row times the capture and the instantiation alone
    with s.capture() as warm:
        chain(s, x, w)
    warm.close()
    t0 = time.perf_counter()
    with s.capture() as g:
        chain(s, x, w)
    capture_ms = (time.perf_counter() - t0) * 1e3
    sync = s.synchronize
    replay_us = host_us(g.replay, sync, calls=5000) / OPS
    eager_step = step_us(lambda: chain(s, x, w), sync)
    graph_step = step_us(g.replay, sync)
    k = [0]

    def rebound():
        k[0] = (k[0] + 1) & 3
        g.replay(inputs={x: others[k[0]]})

    rebind_step = step_us(rebound, sync)
    many = s.upload_host_tensor(np.full(64 * N, 0.3, np.float32))
    views = [many.view((N,), (1,), j * N) for j in range(64)]

    def updated():
        k[0] = (k[0] + 1) & 63
        g.replay(inputs={x: views[k[0]]})

    update_step = step_us(updated, sync)
    g.replay()
    t_replay = t_step = t_rebind = None
    if torch is not None:
        tx = torch.full((N,), 0.5, device="cuda")
        tw = torch.full((N,), 0.25, device="cuda")
        tothers = [torch.full((N,), 0.1 * j, device="cuda") for j in range(4)]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                torch_chain(tx, tw)
        torch.cuda.current_stream().wait_stream(side)
        tg = torch.cuda.CUDAGraph()
        with torch.cuda.graph(tg):
            torch_chain(tx, tw)
        tsync = torch.cuda.synchronize
        both = host_us_group({"ours": (g.replay, sync), "torch": (tg.replay, tsync)},
                             calls=5000)
        replay_us, t_replay = both["ours"] / OPS, both["torch"] / OPS
        t_step = step_us(tg.replay, tsync)
        j = [0]

        def t_rebound():
            j[0] = (j[0] + 1) & 3
            tx.copy_(tothers[j[0]])
            tg.replay()

        t_rebind = step_us(t_rebound, tsync)
    rows.append(Row(FAMILY, f"replay host cost per kernel node ({OPS}-op chain, {N} f32)",
                    "us", replay_us, torch=t_replay, target="<= 1.2 and <= PyTorch"))
    rows.append(Row(FAMILY, "chain step replayed (replay + synchronize)", "us", graph_step,
                    torch=t_step, note=f"eager step {eager_step:.2f} us, "
                    f"{eager_step / graph_step:.2f}x", target=">= 4x faster than eager"))
    rows.append(Row(FAMILY, "chain step eager (ops + synchronize)", "us", eager_step))
    rows.append(Row(FAMILY, "rebinding replay step (new input each step)", "us", rebind_step,
                    torch=t_rebind, note=f"{rebind_step / graph_step - 1:+.1%} vs plain replay",
                    target="within 15% of a plain replay; PyTorch copies into its input"))
    rows.append(Row(FAMILY, "rebinding replay step, 64 inputs in turn (nodes updated)", "us",
                    update_step, note=f"{update_step / graph_step - 1:+.1%} vs plain replay",
                    target="report"))
    rows.append(Row(FAMILY, f"capture + instantiate of the {OPS}-op chain", "ms", capture_ms,
                    target="report"))
    g.close()
    return rows
