"""Interop figures: host cost of a zero-copy exchange (adopt + release, or export +
consumer import + deleter), ours beside the peers' own exchanges of the same array."""

from __future__ import annotations

import numpy as np

from .common import Row, host_us, peers

FAMILY = "interop"
CALLS = 2000




def _cost(fn, sync) -> float:
    return host_us(fn, sync, calls=CALLS, repeats=5)


def run(s) -> list[Row]:
    torch, cupy = peers()
    sync = s.synchronize
    ours = s.upload_host_tensor(np.arange(1 << 16, dtype=np.float32).reshape(256, 256))
    tt = torch.arange(1 << 16, device="cuda:0", dtype=torch.float32) if torch else None
    cc = cupy.arange(1 << 16, dtype=cupy.float32) if cupy else None
    rows = []
    if tt is not None:
        rows.append(Row(
            FAMILY, "import: session.from_dlpack(torch tensor)", "us",
            _cost(lambda: s.from_dlpack(tt), sync),
            torch=_cost(lambda: torch.from_dlpack(cc), sync) if cc is not None else None,
            cupy=_cost(lambda: cupy.from_dlpack(tt), sync) if cc is not None else None,
            note="peers: torch.from_dlpack(cupy array), cupy.from_dlpack(torch tensor)"))
        rows.append(Row(
            FAMILY, "export: torch.from_dlpack(our tensor)", "us",
            _cost(lambda: torch.from_dlpack(ours), sync),
            torch=_cost(lambda: torch.from_dlpack(tt), sync),
            cupy=_cost(lambda: torch.from_dlpack(cc), sync) if cc is not None else None,
            note="same consumer; producers: ours, torch, cupy"))
    if cc is not None:
        rows.append(Row(
            FAMILY, "import: session.from_cuda_array_interface(cupy array)", "us",
            _cost(lambda: s.from_cuda_array_interface(cc), sync),
            torch=_cost(lambda: torch.as_tensor(cc, device="cuda:0"), sync) if tt is not None
            else None,
            cupy=_cost(lambda: cupy.asarray(tt), sync) if tt is not None else None,
            note="peers: torch.as_tensor(cupy array), cupy.asarray(torch tensor)"))
        rows.append(Row(
            FAMILY, "export: cupy.asarray(our tensor) through the CAI", "us",
            _cost(lambda: cupy.asarray(ours), sync),
            cupy=_cost(lambda: cupy.asarray(tt), sync) if tt is not None else None,
            note="cupy column: cupy.asarray(torch tensor)"))
        rows.append(Row(
            FAMILY, "export: cupy.from_dlpack(our tensor)", "us",
            _cost(lambda: cupy.from_dlpack(ours), sync),
            cupy=_cost(lambda: cupy.from_dlpack(cc), sync),
            note="cupy column: cupy.from_dlpack(cupy array)"))
    return rows
