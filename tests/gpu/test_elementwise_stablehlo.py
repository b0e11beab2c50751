"""The StableHLO elementwise additions on the GPU: the specification's worked examples in
every form; every op x dtype on random data and on special values (NaN, +-inf, +-0,
extremes, subnormals, INT_MIN) against the numpy reference (tests/gpu/stablehlo_ref.py)
and against jax.lax where jax is installed (on jax's CPU device, x64 enabled); the
shifts, bit counts and bitwise ops on every int8/uint8 pair, on every int16/uint16 value
and on the edges of the 16-, 32- and 64-bit integers, signed and unsigned (amounts of the
bit width and more, negative amounts, 0 and all ones); strided
views and fusion. The generic op x dtype tables of test_elementwise_values.py cover these
ops as well, except tan/logistic/atan2/cbrt, whose complex special values are checked here
the way complex pow's are (no C99 Annex G guarantee: a non-finite numpy result must be
non-finite here, finite ones must match)."""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest
from gpu_util import down, up
from reference.stablehlo_examples import EXAMPLES
from stablehlo_ref import MORE_REF, SHIFTS, TRANSCENDENTAL, bits_of
from test_elementwise_ref import REF, inputs_for, mismatch, pairs, specials, tolerance

from tenferro_cuda.configs.fusion import ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.dtypes import ALL_DTYPES, DType
from tenferro_cuda.shapes.elementwise import KINDS

D = DType
NEW = tuple(MORE_REF)
CASES = [(op, d) for op in NEW for d in ALL_DTYPES if KINDS[op].instantiable(d)]
IDS = [f"{op}-{d.value}" for op, d in CASES]
FORMS = ("", "_read", "_into", "_read_into")


def run(s, op: str, arrays, form: str = ""):
    xs = [up(s, a) for a in arrays]
    if form.endswith("into"):
        shape = np.broadcast_shapes(*[a.shape for a in arrays])
        kind = KINDS[op]
        out = s.empty(shape, kind.out_dtype(DType.of(arrays[0].dtype)))
        getattr(s, op + form)(*xs, out)
        return down(s, out)
    return down(s, getattr(s, op + form)(*xs))


def compare(op: str, dtype: DType, got, want, scaled: bool = False) -> None:
    """``got`` matches ``want`` under the op's tolerance; ``scaled``: with an absolute floor
    of rtol x the largest finite result (another library's approximations of the
    transcendental functions, e.g. tiny logistic values flushed to 0)."""
    tol = tolerance(op, dtype.numpy)
    if op == "atan2" and dtype.is_complex:
        # atan2 = -i log(q): where q lands on log's branch cut (the negative real axis), the
        # sign of q's zero imaginary part, which two ways of dividing may round apart,
        # picks +pi or -pi: both are the principal value there
        with np.errstate(invalid="ignore"):
            cut = np.isclose(np.abs(got.real - want.real), 2 * np.pi, rtol=1e-4)
        got = got.copy()
        got.real[cut] = want.real[cut]
    if dtype.is_complex and op in TRANSCENDENTAL:
        fin = np.isfinite(want)
        assert not np.isfinite(got[~fin]).any(), "non-finite reference, finite result"
        got, want = got[fin], want[fin]
    if scaled and tol is not None and op in TRANSCENDENTAL:
        mags = np.abs(want.astype(np.complex128 if dtype.is_complex else np.float64))
        finite = mags[np.isfinite(mags)]
        tol = (tol[0], max(tol[1], tol[0] * float(finite.max()) if finite.size else 0.0))
    assert mismatch(got, want, tol) is None


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_specification_examples(s, name, form):
    op, _, inputs, want, exact = EXAMPLES[name]
    got = run(s, op, inputs, form)
    tol = None if exact else (1e-12, 1e-300)
    assert mismatch(got, want, tol) is None


@pytest.mark.parametrize("op,dtype", CASES, ids=IDS)
def test_random(s, op, dtype):
    arrays = inputs_for(np.random.default_rng(31), op, dtype.numpy, (41, 27))
    want, _ = REF[op](*arrays)
    compare(op, dtype, run(s, op, arrays), want)


def _special_operands(op: str, dtype: DType) -> list[np.ndarray]:
    vals = specials(dtype.numpy)
    if KINDS[op].arity == 1:
        return [vals]
    return list(pairs(vals))


@pytest.mark.parametrize("op,dtype", CASES, ids=IDS)
def test_special_values(s, op, dtype):
    arrays = _special_operands(op, dtype)
    want, _ = REF[op](*arrays)
    compare(op, dtype, run(s, op, arrays), want)


BYTE_OPS = (*SHIFTS, "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "popcnt",
            "count_leading_zeros")


@pytest.mark.parametrize("op", BYTE_OPS)
@pytest.mark.parametrize("dtype", [D.INT8, D.UINT8], ids=str)
def test_every_byte(s, op, dtype):
    everything = np.arange(256, dtype=np.uint8).view(dtype.numpy)
    arrays = [everything] if KINDS[op].arity == 1 else list(pairs(everything))
    want, _ = REF[op](*arrays)
    assert mismatch(run(s, op, arrays), want, None) is None


WIDE = [D.INT16, D.UINT16, D.INT32, D.UINT32, D.INT64, D.UINT64]


def _patterns(dtype: DType, values) -> np.ndarray:
    """Python ints as the two's-complement bit patterns of ``dtype`` (-1: all ones)."""
    bits = bits_of(dtype.numpy)
    mask = (1 << bits) - 1
    return np.array([v & mask for v in values], dtype=f"u{bits // 8}").view(dtype.numpy)


@pytest.mark.parametrize("op", SHIFTS)
@pytest.mark.parametrize("dtype", WIDE, ids=str)
def test_wide_shift_edges(s, op, dtype):
    """Amounts below, at and past the bit width, and negative ones (all ones: huge when
    read as unsigned); values 0, 1, all ones, the top bit alone, the largest ones."""
    bits = bits_of(dtype.numpy)
    top = 1 << (bits - 1)
    values = _patterns(dtype, [0, 1, -1, 5, top, top - 1, top + 1, 1 << (bits - 2)])
    amounts = _patterns(dtype, [*range(bits + 3), -1, -bits, top, top - 1, 2 * bits])
    a, n = (g.reshape(-1) for g in np.meshgrid(values, amounts, indexing="ij"))
    want, _ = REF[op](a, n)
    assert mismatch(run(s, op, [a, n]), want, None) is None


@pytest.mark.parametrize("op", [*SHIFTS, "bitwise_not", "popcnt", "count_leading_zeros"])
@pytest.mark.parametrize("dtype", [D.INT16, D.UINT16], ids=str)
def test_every_16_bit_value(s, op, dtype):
    """Every value of the 16-bit dtypes (shifted by amounts 0, 1, 7, 15, 16 and 40000)."""
    everything = np.arange(1 << 16, dtype=np.uint16).view(dtype.numpy)
    arrays = [everything]
    if KINDS[op].arity == 2:
        amounts = _patterns(dtype, [0, 1, 7, 15, 16, 40000])
        a, n = (g.reshape(-1) for g in np.meshgrid(everything, amounts, indexing="ij"))
        arrays = [a, n]
    want, _ = REF[op](*arrays)
    assert mismatch(run(s, op, arrays), want, None) is None


@pytest.mark.parametrize("dtype", WIDE, ids=str)
def test_wide_bit_counts(s, dtype):
    bits = bits_of(dtype.numpy)
    mask = (1 << bits) - 1
    patterns = [0, mask, 1 << (bits - 1), mask >> 1, *[1 << k for k in range(bits)],
                *[(1 << k) - 1 for k in range(bits)]]  # 0, all ones, INT_MIN, INT_MAX, ...
    vals = np.array(patterns, dtype=f"u{bits // 8}").view(dtype.numpy)
    for op in ("popcnt", "count_leading_zeros"):
        want, _ = REF[op](vals)
        got = run(s, op, [vals])
        assert mismatch(got, want, None) is None, op
        assert got[0] == (0 if op == "popcnt" else bits) and got[1] == (bits if op == "popcnt"
                                                                         else 0)


@pytest.mark.parametrize("op", ["floor", "round_nearest_afz", "shift_left", "atan2", "real",
                                "complex", "bitwise_xor"])
def test_strided_views(s, op):
    dtype = {"shift_left": D.INT32, "bitwise_xor": D.UINT8, "real": D.COMPLEX64}.get(
        op, D.FLOAT32)
    arrays = inputs_for(np.random.default_rng(5), op, dtype.numpy, (70, 45))
    xs = [up(s, a) for a in arrays]
    got = down(s, getattr(s, op + "_read")(*[x.T for x in xs]))
    want, _ = REF[op](*[np.ascontiguousarray(a.T) for a in arrays])
    compare(op, dtype, got, want)
    got = down(s, getattr(s, op + "_read")(*[x[::-2, 1::3] for x in xs]))
    want, _ = REF[op](*[np.ascontiguousarray(a[::-2, 1::3]) for a in arrays])
    compare(op, dtype, got, want)


P, Ins = ElementwiseFusionPlan, FusionInstruction


@pytest.mark.parametrize("dtype", [D.FLOAT32, D.FLOAT16, D.FLOAT64], ids=str)
def test_fused_chain_equals_unfused(s, dtype):
    plan = P(2, [Ins("atan2", (0, 1)), Ins("floor", (2,)), Ins("round_nearest_afz", (1,)),
                 Ins("round_nearest_even", (0,)), Ins("ceil", (3,)), Ins("is_finite", (4,)),
                 Ins("logistic", (5,)), Ins("tan", (6,)), Ins("cbrt", (0,)),
                 Ins("real", (10,)), Ins("imag", (10,))], (7, 8, 9, 11, 12))
    arrays = inputs_for(np.random.default_rng(8), "add", dtype.numpy, (999,))
    xs = [up(s, a) for a in arrays]
    fused = s.execute_elementwise_fusion(xs, plan)
    vals = list(xs)
    for ins in plan.instructions:
        vals.append(getattr(s, ins.op)(*[vals[a] for a in ins.args]))
    for f, o in zip(fused, plan.outputs):
        assert mismatch(down(s, f), down(s, vals[o]), None) is None


@pytest.mark.parametrize("dtype", [d for d in ALL_DTYPES if d.is_integer or d.is_bool],
                         ids=str)
def test_fused_bits_equal_unfused(s, dtype):
    ops = [("bitwise_and", (0, 1)), ("bitwise_or", (2, 0)), ("bitwise_xor", (3, 1)),
           ("bitwise_not", (4,))]
    if dtype is not D.BOOL:
        ops += [("shift_left", (5, 1)), ("shift_right_logical", (6, 0)),
                ("shift_right_arithmetic", (0, 1)), ("popcnt", (7,)),
                ("count_leading_zeros", (8,))]
    plan = P(2, [Ins(op, args) for op, args in ops], tuple(range(2, 2 + len(ops)))[-8:])
    arrays = (inputs_for(np.random.default_rng(9), "shift_left", dtype.numpy, (4099,))
              if dtype is not D.BOOL else
              [np.random.default_rng(9).random(4099) < 0.5 for _ in range(2)])
    xs = [up(s, a) for a in arrays]
    fused = s.execute_elementwise_fusion(xs, plan)
    vals = list(xs)
    for ins in plan.instructions:
        vals.append(getattr(s, ins.op)(*[vals[a] for a in ins.args]))
    for f, o in zip(fused, plan.outputs):
        assert mismatch(down(s, f), down(s, vals[o]), None) is None


# --- jax.lax as a second reference --------------------------------------------------------
@pytest.fixture(scope="module")
def lax():
    """jax.lax, computing on jax's CPU device (a reference; and no GPU memory taken)."""
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    with jax.default_device(jax.devices("cpu")[0]):
        yield jax.lax


def _lax_call(lax, op: str, arrays):
    rm = getattr(lax, "RoundingMethod", None)
    table = {
        "round_nearest_even": lambda x: lax.round(x, rm.TO_NEAREST_EVEN),
        "round_nearest_afz": lambda x: lax.round(x, rm.AWAY_FROM_ZERO),
        "popcnt": lax.population_count, "count_leading_zeros": lax.clz,
    }
    fn = table.get(op) or getattr(lax, op)
    return np.asarray(fn(*arrays))


@pytest.mark.parametrize("op,dtype", CASES, ids=IDS)
def test_against_jax(s, lax, op, dtype):
    if op in ("real", "imag") and not dtype.is_complex:
        pytest.skip("jax.lax.real/imag take complex operands only")
    rng = np.random.default_rng(13)
    arrays = [np.concatenate([r, sp]) for r, sp in zip(
        inputs_for(rng, op, dtype.numpy, (600,)),
        _special_operands(op, dtype) if KINDS[op].arity == 1 else
        [v[:400] for v in _special_operands(op, dtype)])]
    try:
        want = _lax_call(lax, op, arrays)
    except (TypeError, NotImplementedError, ValueError) as exc:
        pytest.skip(f"jax.lax.{op} does not take {dtype.value}: {exc}")
    got = run(s, op, arrays)
    assert got.dtype == want.dtype
    keep = _jax_comparable(arrays)
    compare(op, dtype, got[keep], want[keep], scaled=True)


def _jax_comparable(arrays) -> np.ndarray:
    """The positions where jax.lax is a reference: XLA's CPU backend flushes subnormal
    inputs to zero (ceil(1e-40) is 0 there) and its atan2 approximation gives NaN for two
    infinite operands. Those inputs are checked against the StableHLO reference
    (test_special_values) instead."""
    keep = np.ones(arrays[0].shape, bool)
    for a in arrays:
        if a.dtype.kind in "biuc":
            continue
        w = np.abs(a.astype(np.float64))
        keep &= ~((w > 0) & (w < float(ml_dtypes.finfo(a.dtype).tiny)))
    if len(arrays) == 2 and arrays[0].dtype.kind not in "biuc":
        keep &= ~(np.isinf(arrays[0].astype(np.float64)) & np.isinf(arrays[1].astype(np.float64)))
    return keep
