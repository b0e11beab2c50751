"""Structural figures (issue 4: transposes and permutations near copy bandwidth), beside
PyTorch and CuPy on the same sizes in the same run:

- ``transpose`` of a 16384 x 16384 float32 tensor (target >= 3,400 GB/s);
- all 24 permutations of a (64, 64, 256, 256) float32 tensor: the median over the 24
  (target >= 2,500 GB/s) and the worst one (target >= 1,500 GB/s);
- ``to_contiguous_read`` of x[:, ::2] of a 16384 x 32768 float32 tensor and of the
  transposed view of a 16384 x 16384 one (target >= 80 % of the device copy bandwidth).

GB/s = (bytes read + bytes written) / time. Bytes read are what the source occupies in
DRAM: for x[:, ::2] every 32-byte sector of x holds wanted elements, so the whole of x
is read (2 GiB) and 1 GiB written; the figure over the 1 + 1 GiB the view and the result
hold is in ``extra["logical_gbps"]``. Every peer copies (PyTorch ``clone`` with the
contiguous format, CuPy ``copy(order="C")``: no call returns its input uncopied).
"""

from __future__ import annotations

import itertools
import statistics

import numpy as np

from .common import Row, cupy_ms, gbps, peers, release_peer_memory, session_ms, torch_ms

FAMILY = "structural"
N2 = 16384
SHAPE4 = (64, 64, 256, 256)
PERMS = list(itertools.permutations(range(4)))




def _ours_tensor(s, shape):
    """A float32 device tensor of ``shape`` built on the device (a broadcast of one row)."""
    row = s.upload_host_tensor(np.arange(shape[-1], dtype=np.float32))
    return s.broadcast_in_dim(row, shape, (len(shape) - 1,))


def _torch_tensor(torch, shape):
    return None if torch is None else torch.rand(shape, device="cuda", dtype=torch.float32)


def _cupy_tensor(cupy, shape):
    return None if cupy is None else cupy.random.random(shape, dtype=np.float32)




def _timed(s, torch, cupy, ours, peer_t, peer_c):
    """(ours ms, torch ms, cupy ms) of three callables (None where a peer is absent)."""
    t = torch_ms(peer_t) if torch is not None else None
    c = cupy_ms(peer_c) if cupy is not None else None
    return session_ms(s, ours), t, c


def transpose_2d(s, torch, cupy) -> list[Row]:
    nbytes = 2 * N2 * N2 * 4
    x = _ours_tensor(s, (N2, N2))
    xt, xc = _torch_tensor(torch, (N2, N2)), _cupy_tensor(cupy, (N2, N2))
    rows = []
    for name, ours in (("transpose 16384x16384 float32", lambda: s.transpose(x, (1, 0))),
                       ("to_contiguous_read of x.T, 16384x16384 float32",
                        lambda: s.to_contiguous_read(x.T))):
        ms = _timed(s, torch, cupy, ours,
                    lambda: xt.t().clone(memory_format=torch.contiguous_format),
                    lambda: xc.T.copy(order="C"))
        rows.append(Row(FAMILY, name, "GB/s", gbps(nbytes, ms[0]), gbps(nbytes, ms[1]),
                        gbps(nbytes, ms[2]), target=">= 3,400 GB/s (80 % of copy)",
                        extra={"ms": ms[0]}))
    return rows


def permutations_4d(s, torch, cupy) -> list[Row]:
    nbytes = 2 * int(np.prod(SHAPE4)) * 4
    x = _ours_tensor(s, SHAPE4)
    xt, xc = _torch_tensor(torch, SHAPE4), _cupy_tensor(cupy, SHAPE4)
    per: dict[str, list] = {"ours": [], "torch": [], "cupy": []}
    for p in PERMS:
        ms = _timed(s, torch, cupy, lambda p=p: s.transpose(x, p),
                    lambda p=p: xt.permute(p).clone(memory_format=torch.contiguous_format),
                    lambda p=p: xc.transpose(p).copy(order="C"))
        for key, v in zip(per, ms):
            per[key].append(gbps(nbytes, v))

    def stat(values, fn):
        return None if any(v is None for v in values) else fn(values)

    worst = min(range(len(PERMS)), key=lambda i: per["ours"][i])
    extra = {"per_perm_gbps": {str(p): v for p, v in zip(PERMS, per["ours"])},
             "torch_per_perm_gbps": {str(p): v for p, v in zip(PERMS, per["torch"])}}
    return [
        Row(FAMILY, "permute (64,64,256,256) f32, median of 24", "GB/s",
            stat(per["ours"], statistics.median), stat(per["torch"], statistics.median),
            stat(per["cupy"], statistics.median), target=">= 2,500 GB/s", extra=extra),
        Row(FAMILY, "permute (64,64,256,256) f32, worst of 24", "GB/s",
            per["ours"][worst], stat(per["torch"], min), stat(per["cupy"], min),
            target=">= 1,500 GB/s", note=f"our worst perm {PERMS[worst]}"),
    ]


def strided_view(s, torch, cupy) -> list[Row]:
    shape = (N2, 2 * N2)
    traffic = (N2 * 2 * N2 + N2 * N2) * 4  # all of x read (every sector), half written
    logical = 2 * N2 * N2 * 4
    x = _ours_tensor(s, shape)
    xt, xc = _torch_tensor(torch, shape), _cupy_tensor(cupy, shape)
    ms = _timed(s, torch, cupy, lambda: s.to_contiguous_read(x[:, ::2]),
                lambda: xt[:, ::2].clone(memory_format=torch.contiguous_format),
                lambda: xc[:, ::2].copy(order="C"))
    return [Row(FAMILY, "to_contiguous_read x[:, ::2], 16384x32768 f32", "GB/s",
                gbps(traffic, ms[0]), gbps(traffic, ms[1]), gbps(traffic, ms[2]),
                target=">= 80 % of copy", note="bytes = all of x read + result written",
                extra={"ms": ms[0], "logical_gbps": gbps(logical, ms[0])})]


def run(s) -> list[Row]:
    torch, cupy = peers()
    rows: list[Row] = []
    for section in (transpose_2d, permutations_4d, strided_view):
        rows += section(s, torch, cupy)  # its tensors die on return
        s.synchronize()
        release_peer_memory(torch, cupy)
    return rows

