"""execute_elementwise_fusion on the GPU: strided and broadcast views (bias add, row and
column scaling), rank-0 plans, the largest plans that fuse, declined and invalid plans,
deferred device errors, and the compile cache (a repeated plan, an equal plan, a new
shape, another thread and a new process with the same cache directory compile nothing)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from gpu_util import down, up
from test_fusion_plans import PLANS, close, is_exact, make_inputs, unfused

import tenferro_cuda as tc
from tenferro_cuda.configs.fusion import ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import ValidationError
from tenferro_cuda.fusion_views import broadcast_view
from tenferro_cuda.kernels import compiler, toolchain

D = DType
P, Ins = ElementwiseFusionPlan, FusionInstruction
OP = "execute_elementwise_fusion"

LAYOUTS = {
    "transposed 3-d": lambda t: t.permute((2, 0, 1)),
    "reversed": lambda t: t[::-1, :, ::-2],
    "sliced": lambda t: t[1:, 2:9, ::3],
    "broadcast middle": lambda t: broadcast_view(t[:, 0, 0], (t.shape[0], 7, 5), (0,)),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", [D.FLOAT32, D.FLOAT16, D.INT64, D.COMPLEX64],
                         ids=lambda d: d.value)
def test_strided_views(s, layout, dtype):
    plan = PLANS["chain8"] if not dtype.is_complex else P(3, [
        Ins("add", (0, 1)), Ins("sub", (3, 2)), Ins("neg", (4,)), Ins("conj", (5,))], (6, 3))
    arrays = make_inputs(2, [dtype] * plan.num_inputs, (12, 11, 10))
    views = [LAYOUTS[layout](up(s, a)) for a in arrays]
    views[-1] = up(s, down(s, views[-1]))  # one compact operand beside the views
    fused = s.execute_elementwise_fusion(views, plan)
    for f, w in zip(fused, unfused(s, plan, views)):
        assert f.shape == w.shape and close(down(s, f), down(s, w), True) is None


@pytest.mark.parametrize("dtype", [D.FLOAT32, D.BFLOAT16], ids=lambda d: d.value)
def test_bias_add_and_scaling(s, dtype):
    rows, cols = 1000, 768
    x, bias, row_scale, col_scale = make_inputs(3, [dtype] * 4, (rows, cols))
    plan = P(4, [Ins("add", (0, 1)), Ins("mul", (4, 2)), Ins("mul", (5, 3)),
                 Ins("maximum", (6, 0))], (7, 4))
    ins = [up(s, x), broadcast_view(up(s, bias[0].copy()), (rows, cols), (1,)),
           broadcast_view(up(s, row_scale[0].copy()), (rows, cols), (1,)),
           broadcast_view(up(s, col_scale[:, 0].copy()), (rows, cols), (0,))]
    got, plus = s.execute_elementwise_fusion(ins, plan)
    f32 = [a.astype(np.float32) for a in (x, bias[0], row_scale[0], col_scale[:, :1])]
    r = lambda v: v.astype(dtype.numpy).astype(np.float32)  # noqa: E731 (round per op)
    want_plus = r(f32[0] + f32[1])
    want = r(r(r(want_plus * f32[2]) * f32[3]))
    want = np.where((want >= f32[0]) | np.isnan(want), want, f32[0]).astype(dtype.numpy)
    assert close(down(s, plus), want_plus.astype(dtype.numpy), True) is None
    assert close(down(s, got), want, True) is None


BROADCAST_ROWS = {
    # name: (output shape, operand shape, dims, elements before the operand in its buffer)
    "bias row": ((64, 96), (96,), (1,), 0),
    "bias row, shifted": ((64, 96), (96,), (1,), 1),
    "column": ((64, 96), (64,), (0,), 0),
    "middle axis": ((8, 16, 32), (16,), (1,), 0),
    "outer and inner": ((8, 16, 32), (8, 1, 32), (0, 1, 2), 0),
    "ragged rows": ((33, 17), (17,), (1,), 0),
}


@pytest.mark.parametrize("name", list(BROADCAST_ROWS))
@pytest.mark.parametrize("dtype", [D.FLOAT32, D.FLOAT16, D.INT8, D.FLOAT64, D.COMPLEX128],
                         ids=lambda d: d.value)
def test_broadcast_rows_path(s, name, dtype):
    """The broadcast-rows kernel (16-byte vectors along aligned rows of a multiple of the
    vector width, the element walk otherwise) equals the same plan op by op, and numpy."""
    shape, bs, dims, shift = BROADCAST_ROWS[name]
    x, z, b = make_inputs(8, [dtype] * 3, shape)
    small = np.concatenate([np.zeros(shift, dtype.numpy), b.reshape(-1)[:int(np.prod(bs))]])
    operand = up(s, small).view(bs, tuple(int(np.prod(bs[i + 1:])) for i in range(len(bs))),
                                shift)
    view = broadcast_view(operand, shape, dims)
    plan = P(3, [Ins("add", (0, 1)), Ins("mul", (3, 2)), Ins("sub", (4, 1))], (5, 3))
    xs = [up(s, x), view, up(s, z)]
    fused = s.execute_elementwise_fusion(xs, plan)
    expanded = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = bs[i]
    bb = np.broadcast_to(small[shift:].reshape(bs).reshape(expanded), shape)
    exact = is_exact(plan, [dtype] * 3)  # complex multiplication may contract op by op
    for f, w in zip(fused, unfused(s, plan, xs)):
        assert f.shape == shape and close(down(s, f), down(s, w), exact) is None
    if dtype in (D.FLOAT64, D.INT8):  # exact in numpy too (int8 wraps as the kernels do)
        with np.errstate(over="ignore"):
            plus = x + bb
            assert np.array_equal(down(s, fused[1]), plus)
            assert np.array_equal(down(s, fused[0]), plus * z - bb)


def test_rank0_plan(s):
    x, y = up(s, np.array(6, np.int8)), up(s, np.array(-7, np.int8))
    a, b = s.execute_elementwise_fusion([x, y], P(2, [Ins("mul", (0, 1)), Ins("abs", (2,))],
                                                      (2, 3)))
    assert a.shape == b.shape == () and int(down(s, a)) == -42 and int(down(s, b)) == 42


def _widest(n_inputs: int, n_outputs: int) -> ElementwiseFusionPlan:
    ops = [Ins("add", (0, 1))]
    for k in range(2, n_inputs):
        ops.append(Ins("add", (n_inputs + len(ops) - 1, k)))
    last = n_inputs + len(ops) - 1
    ops += [Ins("mul", (last, k)) for k in range(n_outputs - 1)]
    return P(n_inputs, ops, (last, *range(last + 1, last + n_outputs)))


def test_largest_plans_fuse_and_larger_decline(s):
    arrays = make_inputs(4, [D.FLOAT64] * 17, (999,))
    xs = [up(s, a) for a in arrays]
    plan = _widest(16, 8)
    fused = s.execute_elementwise_fusion(xs[:16], plan)
    assert len(fused) == 8
    for f, w in zip(fused, unfused(s, plan, xs[:16])):
        assert close(down(s, f), down(s, w), True) is None
    assert s.execute_elementwise_fusion(xs, _widest(17, 1)) is None
    assert s.execute_elementwise_fusion(xs[:2], _widest(2, 9)) is None


def test_declined_and_invalid_plans(s):
    x, v = up(s, np.ones(5, np.float32)), up(s, np.ones(6, np.float32))
    assert s.execute_elementwise_fusion([x, v], P(2, [Ins("neg", (0,)), Ins("neg", (1,))],
                                                  (2, 3))) is None
    with pytest.raises(ValidationError) as info:
        s.execute_elementwise_fusion([x, up(s, np.ones(5, np.float64))], PLANS["exp_mul_add"])
    assert info.value.kind == "dtype_mismatch" and info.value.op == OP


@pytest.mark.parametrize("op,dtype,reason", [("div", D.INT32, "integer division by zero"),
                                              ("rem", D.INT8, "integer division by zero"),
                                              ("pow", D.INT64, "negative integer exponent")],
                         ids=["div", "rem", "pow"])
def test_deferred_device_errors(s, op, dtype, reason):
    a = np.arange(1, 2001).astype(dtype.numpy)
    b = np.ones(2000, dtype.numpy)
    b[1234] = 0 if op != "pow" else -1
    plan = P(2, [Ins(op, (0, 1)), Ins("add", (2, 0))], (3,))
    out, = s.execute_elementwise_fusion([up(s, a), up(s, b)], plan)
    with pytest.raises(ValidationError) as info:
        s.synchronize()
    assert info.value.kind == "device_data" and info.value.op == OP and reason in str(info.value)
    got = down(s, out)
    assert got[1234] == a[1234] and got[0] == (a[0] * 2 if op != "rem" else a[0])
    s.synchronize()  # the word was cleared


def _unique_plan() -> ElementwiseFusionPlan:
    return P(2, [Ins("sub", (0, 1)), Ins("mul", (2, 2)), Ins("sqrt", (3,)),
                 Ins("minimum", (4, 0))], (5,))


def test_compile_cache_is_hit(s):
    a, b = (up(s, x) for x in make_inputs(8, [D.FLOAT32] * 2, (64, 3)))
    before = compiler.compile_count["n"]
    first, = s.execute_elementwise_fusion([a, b], _unique_plan())
    assert compiler.compile_count["n"] - before <= 1  # 0 when the disk cache has it
    settled = compiler.compile_count["n"]
    for shape in [(64, 3), (1000,), (5, 6, 7)]:  # equal plans, new shapes: no compile
        x, y = (up(s, v) for v in make_inputs(9, [D.FLOAT32] * 2, shape))
        got, = s.execute_elementwise_fusion([x, y], _unique_plan())
        assert got.shape == shape
    errors = []

    def other_thread():  # another thread's session: the runtime's loaded function
        try:
            with tc.cuda_exec_session(0) as s2:
                x2 = s2.upload_host_tensor(np.ones(10, np.float32))
                s2.execute_elementwise_fusion([x2, x2], _unique_plan())
                s2.synchronize()
        except Exception as exc:  # noqa: BLE001 (re-raised below in the test thread)
            errors.append(exc)
    t = threading.Thread(target=other_thread)
    t.start()
    t.join()
    assert errors == [] and compiler.compile_count["n"] == settled
    assert close(down(s, first), np.minimum(np.sqrt(np.square(
        down(s, a) - down(s, b))), down(s, a)), True) is None


_CHILD = """
import numpy as np, tenferro_cuda as tc
from tenferro_cuda.configs.fusion import ElementwiseFusionPlan as P, FusionInstruction as I
from tenferro_cuda.kernels import compiler
plan = P(2, [I("sub", (0, 1)), I("mul", (2, 2)), I("sqrt", (3,)), I("minimum", (4, 0))], (5,))
with tc.cuda_exec_session(0) as s:
    x = s.upload_host_tensor(np.ones(10, np.float32))
    s.execute_elementwise_fusion([x, x], plan)
    s.synchronize()
try:
    with open("/proc/self/maps") as fh:
        mapped = int("/libnvrtc.so" in fh.read())
except OSError:
    mapped = -1
print(compiler.compile_count["n"], mapped)
"""


def test_new_process_reads_the_disk_cache(s):
    x = up(s, np.ones(10, np.float32))
    s.execute_elementwise_fusion([x, x], _unique_plan())  # compiled (or found) and written
    directory = compiler.shared_cache().directory
    toolchain.confirm()
    toolchain.record(directory)  # (done by any compile already; none if two libnvrtc mapped)
    recorded = toolchain.record_path(directory).is_file()
    root = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                         env=env, cwd=root, timeout=300)
    assert out.returncode == 0, out.stderr
    compiles, mapped = out.stdout.split()[-2:]
    assert compiles == "0"
    if recorded:  # the NVRTC record answered the cache key: NVRTC was never loaded
        assert mapped == "0"
