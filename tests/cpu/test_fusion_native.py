"""The kernels the fusion code generator writes, run on the CPU: execute_elementwise_fusion
over host memory for every named plan x dtype (tests/gpu/test_fusion_plans.py; float16
and bfloat16 convert through PTX and are left to the GPU tier), on compact inputs (the
contiguous kernel, its 16-byte vectors and tail), on stepped, reversed views (the strided
kernel) and beside broadcast rows and columns (the broadcast-rows kernel, its vectors and
its element walk). A first pass with launches switched off collects the generated
sources; they are compiled together by the host C++ compiler against
tests/reference/cuda_emu.py; the second pass runs them through the library's prepared
launches (the kernel reads the packed parameters at the types of its generated
signature). Outputs against numpy op by op: bit for bit where every instruction is exact
by contract, within the transcendental tolerance otherwise. Skipped when no host C++
compiler is present.
"""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from reference import cuda_emu
from reference.fake_context import (
    FakeContext,
    FakeSession,
    HostMemory,
    host_download,
    host_upload,
)
from test_fusion_plans import PLAN_CASES, PLANS, close, is_exact, make_inputs, reference

from tenferro_cuda.dtypes import DType
from tenferro_cuda.fusion_views import broadcast_view
from tenferro_cuda.kernels import launch as launch_mod
from tenferro_cuda.ops import fusion
from tenferro_cuda.tensor import TensorView

D = DType
CASES = PLAN_CASES
IDS = [f"{name}-{d.value}" for name, d in CASES]
LAYOUTS = ("compact", "stepped", "rows", "columns")
SHAPE = (2 * 512 + 21,)
# the broadcast layouts: every input after the first a bias row (rows a multiple of every
# vector width: the 16-byte vector walk) or a column (rows of 21: the element walk)
GRID = {"rows": (5, 48), "columns": (6, 21)}

class _Context(FakeContext):
    """Host memory; the generated sources are recorded, their kernels named by expression."""

    def __init__(self) -> None:
        super().__init__(HostMemory(), None, real_launches=True)
        self.stream = object()
        self.sources: dict[str, str] = {}
        self.waits: set[bool] = set()

    def source_function(self, source, name, expression, options=(), op="", waits=False):
        self.sources.setdefault(expression, source)
        self.waits.add(waits)
        return expression


def _domain(name: str, dtype: DType, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Integer div/rem/pow inside their defined domain (as tests/gpu/test_fusion_values)."""
    if name in ("div_rem", "pow") and dtype.is_integer:
        arrays[1] = (np.abs(arrays[1].astype(np.int64)) % 4 + 1).astype(dtype.numpy)
    return arrays


def _run(session, name: str, dtype: DType, layout: str):
    """(fused outputs, numpy reference, exact) of plan ``name`` over ``layout`` inputs."""
    plan = PLANS[name]
    dtypes = [dtype] * plan.num_inputs
    arrays = _domain(name, dtype, make_inputs(5, dtypes, GRID.get(layout, SHAPE)))
    ctx = session.ctx
    if layout in GRID:
        return _run_broadcast(session, plan, arrays, layout, is_exact(plan, dtypes))
    if layout == "compact":
        xs = [host_upload(ctx, a) for a in arrays]
    else:  # every other element, last to first
        xs = [TensorView(host_upload(ctx, np.repeat(a[::-1], 2)), SHAPE, (-2,), 2 * SHAPE[0] - 2)
              for a in arrays]
    return session.execute_elementwise_fusion(xs, plan), reference(plan, arrays), \
        is_exact(plan, dtypes)


def _run_broadcast(session, plan, arrays: list[np.ndarray], layout: str, exact: bool):
    """``plan`` over a compact first input and broadcast views of a row or a column."""
    ctx = session.ctx
    xs = [host_upload(ctx, arrays[0])]
    for k in range(1, len(arrays)):
        if layout == "rows":
            small, dims = np.ascontiguousarray(arrays[k][0]), (1,)
        else:
            small, dims = np.ascontiguousarray(arrays[k][:, 0]), (0,)
        xs.append(broadcast_view(host_upload(ctx, small), arrays[0].shape, dims))
        arrays[k] = np.broadcast_to(small[None, :] if layout == "rows" else small[:, None],
                                    arrays[0].shape)
    return session.execute_elementwise_fusion(xs, plan), reference(plan, arrays), exact


_collected: dict[str, str] = {}


def _sources() -> dict[str, str]:
    """expression -> source of every kernel the cases generate (a run with launches off)."""
    if not _collected:
        ctx = _Context()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(launch_mod, "_launch", lambda *args: (0,))
            mp.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
            session = FakeSession(ctx, fusion.METHODS)
            for name, dtype in CASES:
                for layout in LAYOUTS:
                    _run(session, name, dtype, layout)
        _collected.update(sorted(ctx.sources.items()))
    return _collected


def _build_args() -> dict:
    sources = _sources()
    text = "\n".join(['#include "shim.h"', *sources.values(), cuda_emu.launchers(sources)])
    return dict(name="fusion_native", wrappers=text, overrides=cuda_emu.DYNAMIC_SHARED,
                optimize="-O0")


cuda_emu.ahead(__name__, _build_args)


@pytest.fixture(scope="module")
def native():
    """(library, expression -> wrapper) of every kernel the cases generate."""
    lib = cuda_emu.build(**_build_args())
    return lib, {e: f"w{i}" for i, e in enumerate(_sources())}


@pytest.fixture
def s(native, monkeypatch):
    lib, index = native
    ctx = _Context()

    def raw_launch(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        assert stream is ctx.stream and bz == 1 and shared == 0
        f = getattr(lib, index[fn])
        f.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 5
        f(params, gx, gy, gz, bx, by)
        return (0,)

    monkeypatch.setattr(launch_mod, "_launch", raw_launch)
    monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
    return FakeSession(ctx, fusion.METHODS)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name,dtype", CASES, ids=IDS)
def test_generated_kernels_match_numpy(s, name, dtype, layout):
    fused, want, exact = _run(s, name, dtype, layout)
    assert len(fused) == len(want)
    for k, (f, w) in enumerate(zip(fused, want)):
        got = host_download(f)
        assert got.dtype == w.dtype and got.shape == w.shape
        assert close(got, w, exact) is None, f"output {k}: {close(got, w, exact)}"


def test_fused_kernels_are_loaded_as_waiting_ones(monkeypatch):
    """Fusion's kernels begin with tf::grid_wait, and the runtime is told so (the edges
    into them may be programmatic in a captured graph: graph_edges.py)."""
    ctx = _Context()
    monkeypatch.setattr(launch_mod, "_launch", lambda *args: (0,))
    monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
    _run(FakeSession(ctx, fusion.METHODS), *CASES[0], LAYOUTS[0])
    assert ctx.sources and ctx.waits == {True}
