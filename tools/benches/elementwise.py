"""Elementwise figures (issue 3), beside PyTorch and CuPy on the same sizes in the same run:

- host cost of ``add`` on 1,024 float32 elements, per call over 20,000 calls including the
  final synchronize (the output is allocated each call; issue 13: <= a bare
  ``cuLaunchKernel`` + 2.0 us), and of ``add_into`` into a preallocated output (target
  <= 7.0 us). All the small-op figures, ours, the peers' and the bare launch (through
  ``cuda.bindings.driver``, and through ``cuda.bindings._v2.driver`` where installed, the
  module our launches use then), are timed in one interleaved group (``host_us_group``):
  each of 7 rounds times every one;
- the same two with a Python float scalar operand, ``add(x, 1.0)`` and
  ``add_into(x, 1.0, out)`` (issue 17: within 0.3 us of the tensor-tensor form, measured in
  the same run; the peers: ``torch.add(x, 1.0)`` and ``x + 1.0`` on CuPy);
- ``add`` of two float32 tensors of 2^28 elements (target >= 4,100 GB/s), ``exp``
  (>= 4,000 GB/s), ``cast`` float32 -> bfloat16 (>= 3,800 GB/s);
- ``add`` of a transposed 16384 x 16384 float32 view and a compact tensor (>= 2,000 GB/s:
  the tiled path);
- ``add`` of 16384 x 4096 float32 and an operand broadcast through a stride-0 view (issue
  16, >= 3,800 GB/s each): a bias row (4096,), a column (16384,), a scalar, and a middle
  axis (128 x 128 x 4096 + a 128 x 4096 view); PyTorch and CuPy add the same operand in
  its broadcastable shape (they expand it). GB/s counts the output and each input once at
  its own size.

GB/s = (bytes read + bytes written) / device time (CUDA-event median). Every op, ours and
the peers', allocates its output as it would in user code.
"""

from __future__ import annotations

import numpy as np

import tenferro_cuda as tc
from tenferro_cuda._driver_fast import BINDINGS
from tenferro_cuda.tensor import TensorView, compact_strides

from .common import (
    Row,
    bare_launch,
    case_rows,
    cupy_ms,
    gbps,
    host_us_group,
    peers,
    release_peer_memory,
    session_ms,
    torch_ms,
)

FAMILY = "elementwise"
SMALL = 1024
BIG = 1 << 28
N2 = 16384


def host_costs(s, torch, cupy) -> list[Row]:
    """The small-op host costs, every one of ours and the peers' in one interleaved group
    (``host_us_group``), beside a bare launch measured in the same rounds."""
    a = s.upload_host_tensor(np.arange(SMALL, dtype=np.float32))
    b = s.upload_host_tensor(np.ones(SMALL, np.float32))
    o = s.upload_host_tensor(np.zeros(SMALL, np.float32))
    sync = s.synchronize
    group = {
        "add": (lambda: s.add(a, b), sync), "into": (lambda: s.add_into(a, b, o), sync),
        "sadd": (lambda: s.add(a, 1.0), sync), "sinto": (lambda: s.add_into(a, 1.0, o), sync),
        "bare": (bare_launch(s), sync),
    }
    bare_v2 = bare_launch(s, v2=True)
    if bare_v2 is not None:
        group["bare_v2"] = (bare_v2, sync)
    if torch is not None:
        x = torch.arange(SMALL, device="cuda", dtype=torch.float32)
        y, z = torch.ones_like(x), torch.empty_like(x)
        tsync = torch.cuda.synchronize
        group.update({"t_add": (lambda: x + y, tsync),
                      "t_into": (lambda: torch.add(x, y, out=z), tsync),
                      "t_sadd": (lambda: torch.add(x, 1.0), tsync),
                      "t_sinto": (lambda: torch.add(x, 1.0, out=z), tsync)})
    if cupy is not None:
        cx = cupy.arange(SMALL, dtype=cupy.float32)
        cy, cz = cupy.ones_like(cx), cupy.empty_like(cx)
        csync = cupy.cuda.get_current_stream().synchronize
        group.update({"c_add": (lambda: cx + cy, csync),
                      "c_into": (lambda: cupy.add(cx, cy, out=cz), csync),
                      "c_sadd": (lambda: cx + 1.0, csync),
                      "c_sinto": (lambda: cupy.add(cx, 1.0, out=cz), csync)})
    us = host_us_group(group)
    add, into, sadd, sinto, bare = us["add"], us["into"], us["sadd"], us["sinto"], us["bare"]
    v2 = us.get("bare_v2")
    note = f"bare cuLaunchKernel {bare:.2f} us in the same rounds: {add - bare:+.2f} us"
    extra = {"bare_launch_us": bare, "over_bare_us": add - bare, "bindings": BINDINGS}
    if v2 is not None:
        note += f"; bare _v2 launch_kernel {v2:.2f} us: {add - v2:+.2f} us"
        extra.update(bare_v2_launch_us=v2, over_bare_v2_us=add - v2)
    return [
        Row(FAMILY, "add host cost, 1024 float32 (allocating)", "us", add, us.get("t_add"),
            us.get("c_add"), target=f"<= {bare + 2.0:.2f} us (bare launch + 2.0)",
            note=note, extra=extra),
        Row(FAMILY, "add_into host cost, 1024 float32", "us", into, us.get("t_into"),
            us.get("c_into"), target="<= 7.0 us",
            extra={"bare_launch_us": bare, "over_bare_us": into - bare}),
        Row(FAMILY, "add host cost, 1024 float32 + Python float (allocating)", "us", sadd,
            us.get("t_sadd"), us.get("c_sadd"), target=f"<= {add + 0.3:.2f} us (tensor form + 0.3)",
            note=f"scalar by value: {sadd - add:+.2f} us beside add(a, b)",
            extra={"tensor_form_us": add, "delta_us": sadd - add}),
        Row(FAMILY, "add_into host cost, 1024 float32 + Python float", "us", sinto,
            us.get("t_sinto"), us.get("c_sinto"),
            target=f"<= {into + 0.3:.2f} us (tensor form + 0.3)",
            note=f"scalar by value: {sinto - into:+.2f} us beside add_into(a, b, o)",
            extra={"tensor_form_us": into, "delta_us": sinto - into}),
    ]


def _big(s, value: float, n: int = BIG):
    """A float32 device tensor of n elements (uploaded once; contents do not matter)."""
    return s.upload_host_tensor(np.full(n, value, np.float32))


def bandwidth(s, torch, cupy) -> list[Row]:
    a, b = _big(s, 0.5), _big(s, 1.5)
    x = y = cx = cy = None
    if torch is not None:
        x = torch.full((BIG,), 0.5, device="cuda")
        y = torch.full((BIG,), 1.5, device="cuda")
    if cupy is not None:
        cx = cupy.full((BIG,), 0.5, dtype=cupy.float32)
        cy = cupy.full((BIG,), 1.5, dtype=cupy.float32)
    cases = [
        ("add float32 2^28", 12 * BIG, ">= 4,100 GB/s", lambda: s.add(a, b),
         lambda: x + y, lambda: cx + cy),
        ("exp float32 2^28", 8 * BIG, ">= 4,000 GB/s", lambda: s.exp(a),
         lambda: torch.exp(x), lambda: cupy.exp(cx)),
        ("cast float32 -> bfloat16 2^28", 6 * BIG, ">= 3,800 GB/s",
         lambda: s.cast(a, tc.bfloat16), lambda: x.to(torch.bfloat16), None),
    ]
    rows = []
    for name, nbytes, target, ours, peer_t, peer_c in cases:
        ms = session_ms(s, ours)
        t = torch_ms(peer_t) if torch is not None else None
        c = cupy_ms(peer_c) if cupy is not None and peer_c is not None else None
        note = "" if peer_c is not None else "CuPy has no bfloat16"
        rows.append(Row(FAMILY, name, "GB/s", gbps(nbytes, ms), gbps(nbytes, t),
                        gbps(nbytes, c), target=target, note=note, extra={"ms": ms}))
    return rows


def transposed(s, torch, cupy) -> list[Row]:
    a = _big(s, 0.5, N2 * N2).view((N2, N2), (N2, 1))
    b = _big(s, 1.5, N2 * N2).view((N2, N2), (N2, 1))
    nbytes = 3 * N2 * N2 * 4
    ms = session_ms(s, lambda: s.add(a.T, b))
    t = c = None
    if torch is not None:
        x = torch.full((N2, N2), 0.5, device="cuda")
        y = torch.full((N2, N2), 1.5, device="cuda")
        t = torch_ms(lambda: x.t() + y)
    if cupy is not None:
        cx = cupy.full((N2, N2), 0.5, dtype=cupy.float32)
        cy = cupy.full((N2, N2), 1.5, dtype=cupy.float32)
        c = cupy_ms(lambda: cx.T + cy)
    return [Row(FAMILY, "add transposed view 16384x16384 float32", "GB/s", gbps(nbytes, ms),
                gbps(nbytes, t), gbps(nbytes, c), target=">= 2,000 GB/s",
                extra={"ms": ms})]


BROADCASTS = [  # name, logical shape, operand shape, its view strides, peers' operand shape
    ("row", (N2, 4096), (4096,), (0, 1), (4096,)),
    ("column", (N2, 4096), (N2,), (1, 0), (N2, 1)),
    ("scalar", (N2, 4096), (1,), (0, 0), (1,)),
    ("middle axis", (128, 128, 4096), (128, 4096), (4096, 0, 1), (128, 1, 4096)),
]


def _broadcast_row(s, torch, cupy, name, shape, small, strides, peer_shape) -> Row:
    n, m = int(np.prod(shape)), int(np.prod(small))
    x = _big(s, 0.5, n).view(shape, compact_strides(shape))
    b = TensorView(_big(s, 1.5, m), shape, strides, 0)
    nbytes = 4 * (2 * n + m)  # out, x, the broadcast operand
    ms = session_ms(s, lambda: s.add(x, b))
    t = c = None
    if torch is not None:
        tx = torch.full(shape, 0.5, device="cuda")
        tb = torch.full(peer_shape, 1.5, device="cuda")
        t = torch_ms(lambda: tx + tb)
    if cupy is not None:
        cx = cupy.full(shape, 0.5, dtype=cupy.float32)
        cb = cupy.full(peer_shape, 1.5, dtype=cupy.float32)
        c = cupy_ms(lambda: cx + cb)
    label = "x".join(map(str, shape))
    return Row(FAMILY, f"add {label} float32 + {name} broadcast view", "GB/s",
               gbps(nbytes, ms), gbps(nbytes, t), gbps(nbytes, c), target=">= 3,800 GB/s",
               note=f"operand {small} viewed with strides {strides}", extra={"ms": ms})


def broadcast(s, torch, cupy) -> list[Row]:
    return case_rows(s, torch, cupy, _broadcast_row, BROADCASTS)


def run(s) -> list[Row]:
    torch, cupy = peers()
    rows: list[Row] = []
    for section in (host_costs, bandwidth, transposed, broadcast):
        rows += section(s, torch, cupy)  # its tensors die on return
        s.synchronize()
        release_peer_memory(torch, cupy)
    return rows
