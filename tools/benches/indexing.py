"""Indexing figures (issue 5), beside PyTorch and CuPy on the same sizes in the same run:

- gather of 2^26 random float32 scalars (int64 indices) from a 2^28-element table:
  GB/s counts 4 B read + 8 B index + 4 B written per element (target >= 800; PyTorch's
  ``x[idx]`` about 540);
- embedding lookup, 2^20 random rows of 256 float32: GB/s counts the row read, the row
  written and the index (target >= 3,500);
- scatter-add of 2^26 random float32 updates into 2^24 elements: GB/s counts 8 B index +
  4 B update per element, the same formula for every peer (target: faster than PyTorch's
  ``index_add_``; ours also copies the operand into a new result, the peers update in
  place);
- slice, pad, concatenate and reverse producing 2^28 float32 elements: GB/s = bytes read +
  bytes written (target >= 80 % of the device copy bandwidth, 3,420 of 4,276 GB/s).
"""

from __future__ import annotations

import numpy as np

import tenferro_cuda as tc
from tenferro_cuda.configs.indexing import GatherConfig, PadConfig, ScatterConfig, SliceConfig

from .common import Row, cupy_ms, gbps, peers, release_peer_memory, session_ms, torch_ms

FAMILY = "indexing"
N2 = 16384
COPY_TARGET = ">= 3,420 GB/s (80 % of copy)"






def _zeros(s, shape):
    with s.kernels("bench.indexing") as ks:
        return ks.alloc_zero_output(tc.float32, shape)


def _row(name, nbytes, ours, t, c, target, **extra) -> Row:
    return Row(FAMILY, name, "GB/s", gbps(nbytes, ours), gbps(nbytes, t), gbps(nbytes, c),
               target=target, extra={"ours_ms": ours, **extra})


def gathers(s, torch, cupy, rng) -> list[Row]:
    rows = []
    n, table_n = 1 << 26, 1 << 28
    table = _zeros(s, (table_n,))
    idx_np = rng.integers(0, table_n, size=n)
    idx = s.upload_host_tensor(idx_np)
    cfg = GatherConfig(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,),
                       index_vector_dim=1, slice_sizes=(1,))
    ours = session_ms(s, lambda: s.gather(table, idx, cfg))
    t = c = None
    if torch is not None:
        tt = torch.rand(table_n, device="cuda")
        ti = torch.randint(0, table_n, (n,), device="cuda")
        t = torch_ms(lambda: tt[ti])
        del tt, ti
    if cupy is not None:
        ct = cupy.random.random(table_n, dtype=np.float32)
        ci = cupy.random.randint(0, table_n, n, dtype=np.int64)
        c = cupy_ms(lambda: ct[ci])
        del ct, ci
    rows.append(_row("gather 2^26 float32 scalars of 2^28 (int64 idx)", 16 * n, ours, t, c,
                     ">= 800 GB/s (torch x[idx] ~540)"))
    s.reclaim_buffer(table)
    s.reclaim_buffer(idx)
    release_peer_memory(torch, cupy)
    nrows, vocab, width = 1 << 20, 1 << 20, 256
    table = _zeros(s, (vocab, width))
    idx = s.upload_host_tensor(rng.integers(0, vocab, size=nrows))
    cfg = GatherConfig(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                       index_vector_dim=1, slice_sizes=(1, width))
    ours = session_ms(s, lambda: s.gather(table, idx, cfg))
    t = c = None
    if torch is not None:
        tt = torch.rand(vocab, width, device="cuda")
        ti = torch.randint(0, vocab, (nrows,), device="cuda")
        t = torch_ms(lambda: torch.nn.functional.embedding(ti, tt))
        del tt, ti
    if cupy is not None:
        ct = cupy.random.random((vocab, width), dtype=np.float32)
        ci = cupy.random.randint(0, vocab, nrows, dtype=np.int64)
        c = cupy_ms(lambda: ct[ci])
        del ct, ci
    rows.append(_row("embedding gather 2^20 rows x 256 float32", nrows * (8 * width + 8),
                     ours, t, c, ">= 3,500 GB/s"))
    release_peer_memory(torch, cupy)
    return rows


def scatter_add(s, torch, cupy, cupyx, rng) -> list[Row]:
    n, size = 1 << 26, 1 << 24
    operand, upd = _zeros(s, (size,)), _zeros(s, (n,))
    idx = s.upload_host_tensor(rng.integers(0, size, size=n))
    cfg = ScatterConfig(update_window_dims=(), inserted_window_dims=(0,),
                        scatter_dims_to_operand_dims=(0,), index_vector_dim=1)
    ours = session_ms(s, lambda: s.scatter(operand, idx, upd, cfg))
    t = c = None
    if torch is not None:
        to, tu = torch.zeros(size, device="cuda"), torch.rand(n, device="cuda")
        ti = torch.randint(0, size, (n,), device="cuda")
        t = torch_ms(lambda: to.index_add_(0, ti, tu))
        del to, tu, ti
    if cupy is not None:
        co, cu = cupy.zeros(size, np.float32), cupy.random.random(n, dtype=np.float32)
        ci = cupy.random.randint(0, size, n, dtype=np.int64)
        c = cupy_ms(lambda: cupyx.scatter_add(co, ci, cu))
        del co, cu, ci
    release_peer_memory(torch, cupy)
    return [_row("scatter-add 2^26 float32 into 2^24 (int64 idx)", 12 * n, ours, t, c,
                 "faster than torch index_add_")]


def _copy_case(s, torch, cupy, name, shape, ours_fn, torch_fn, cupy_fn, nbytes):
    x = _zeros(s, shape)
    ours = session_ms(s, lambda: ours_fn(x))
    t = c = None
    if torch is not None:
        xt = torch.rand(shape, device="cuda")
        t = torch_ms(lambda: torch_fn(xt))
        del xt
    if cupy is not None:
        xc = cupy.random.random(shape, dtype=np.float32)
        c = cupy_ms(lambda: cupy_fn(xc))
        del xc
    s.reclaim_buffer(x)
    release_peer_memory(torch, cupy)
    return _row(name, nbytes, ours, t, c, COPY_TARGET)


def slicing(s, torch, cupy) -> list[Row]:
    el = 4 * N2 * N2  # bytes of 2^28 float32
    cases = [
        ("slice [:, 4:-4] of 16384x16392 float32", (N2, N2 + 8),
         lambda x: s.slice(x, SliceConfig((0, 4), (N2, N2 + 4))),
         lambda x: x[:, 4:N2 + 4].contiguous(), lambda x: x[:, 4:N2 + 4].copy(), 2 * el),
        ("slice [:, 1:-7] (4-byte aligned rows) of 16384x16392", (N2, N2 + 8),
         lambda x: s.slice(x, SliceConfig((0, 1), (N2, N2 + 1))),
         lambda x: x[:, 1:N2 + 1].contiguous(), lambda x: x[:, 1:N2 + 1].copy(), 2 * el),
        ("pad 16382^2 float32 by 1 on every edge", (N2 - 2, N2 - 2),
         lambda x: s.pad(x, PadConfig((1, 1), (1, 1))),
         lambda x: _torch().nn.functional.pad(x, (1, 1, 1, 1)),
         lambda x: _cupy().pad(x, 1), 4 * ((N2 - 2) ** 2 + N2 * N2)),
        ("concatenate 2 x (16384, 8192) float32 on axis 1", (N2, N2 // 2),
         lambda x: s.concatenate([x, x], 1), lambda x: _torch().cat([x, x], 1),
         lambda x: _cupy().concatenate([x, x], 1), 2 * el),
        ("concatenate 2 x (8192, 16384) float32 on axis 0", (N2 // 2, N2),
         lambda x: s.concatenate([x, x], 0), lambda x: _torch().cat([x, x], 0),
         lambda x: _cupy().concatenate([x, x], 0), 2 * el),
        ("reverse axis 1 of 16384^2 float32", (N2, N2), lambda x: s.reverse(x, (1,)),
         lambda x: _torch().flip(x, (1,)),
         lambda x: _cupy().ascontiguousarray(_cupy().flip(x, 1)), 2 * el),
        ("reverse axis 0 of 16384^2 float32", (N2, N2), lambda x: s.reverse(x, (0,)),
         lambda x: _torch().flip(x, (0,)),
         lambda x: _cupy().ascontiguousarray(_cupy().flip(x, 0)), 2 * el),
    ]
    return [_copy_case(s, torch, cupy, *case) for case in cases]


def _torch():
    import torch

    return torch


def _cupy():
    import cupy

    return cupy


def _cupyx(cupy):
    if cupy is None:
        return None
    import cupyx

    return cupyx


def run(s) -> list[Row]:
    torch, cupy = peers()
    cupyx = _cupyx(cupy)
    rng = np.random.default_rng(0)
    rows = gathers(s, torch, cupy, rng)
    rows += scatter_add(s, torch, cupy, cupyx, rng)
    rows += slicing(s, torch, cupy)
    return rows
