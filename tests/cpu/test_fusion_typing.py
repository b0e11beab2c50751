"""Typing a fusion plan over input dtypes (shapes/fusion.py) and walking the inputs'
layouts (ops/fusion/walk.py): result dtypes, the elementwise dtype rules per instruction
(errors name the instruction), promotion, live values, deferred-error reasons, shape
rules, declines, layout classes and paths."""

from __future__ import annotations

import numpy as np
import pytest

from tenferro_cuda.configs.fusion import ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import (
    UnsupportedDTypeConversionError,
    UnsupportedDTypeError,
    ValidationError,
)
from tenferro_cuda.fusion_views import broadcast_view
from tenferro_cuda.ops.fusion.walk import walk
from tenferro_cuda.shapes.fusion import output_shape, type_plan
from tenferro_cuda.tensor import Tensor

D = DType
P, Ins = ElementwiseFusionPlan, FusionInstruction
F32, F64, C64, I32, BOOL = D.FLOAT32, D.FLOAT64, D.COMPLEX64, D.INT32, D.BOOL

TYPED = {
    # name: (plan, input dtypes, rank-0 inputs, output dtypes)
    "exp_mul_add": (P(2, [Ins("exp", (0,)), Ins("mul", (2, 1)), Ins("add", (3, 0))], (4,)),
                    (F32, F32), (), (F32,)),
    "compare_select": (P(2, [Ins("compare", (0, 1), direction="LT"), Ins("select", (2, 1, 0))],
                         (2, 3)), (I32, I32), (), (BOOL, I32)),
    "abs complex": (P(1, [Ins("abs", (0,)), Ins("sqrt", (1,))], (2, 1)), (C64,), (), (F32, F32)),
    "cast and convert": (P(1, [Ins("cast", (0,), to="int8"), Ins("convert", (1,), to="int32")],
                           (1, 2, 0)), (F64,), (), (D.INT8, I32, F64)),
    "real scalar promoted": (P(2, [Ins("mul", (0, 1))], (2,)), (C64, F32), (1,), (C64,)),
    "bool maximum": (P(2, [Ins("maximum", (0, 1))], (2,)), (BOOL, BOOL), (), (BOOL,)),
    "int pow": (P(2, [Ins("pow", (0, 1))], (2,)), (D.INT64, D.INT64), (), (D.INT64,)),
}


@pytest.mark.parametrize("name", list(TYPED))
def test_result_dtypes(name):
    plan, dtypes, scalar, outs = TYPED[name]
    typed = type_plan(plan, dtypes, [k in scalar for k in range(len(dtypes))], "t")
    assert typed.out_dtypes == outs and typed.declined == ""


def test_promotion_flags_only_the_scalar():
    plan, dtypes, _, _ = TYPED["real scalar promoted"]
    typed = type_plan(plan, dtypes, (False, True), "t")
    assert typed.ops[0].promote == (False, True) and typed.ops[0].primary is C64


ERRORS = {
    # name: (plan, dtypes, rank-0 inputs, error, kind, text)
    "dtype mismatch": (P(2, [Ins("neg", (0,)), Ins("add", (2, 1))], (3,)), (F32, F64), (),
                       ValidationError, "dtype_mismatch", "instruction 1 (add(v2, v1)"),
    "array real with complex": (P(2, [Ins("mul", (0, 1))], (2,)), (C64, F32), (),
                                ValidationError, "dtype_mismatch", "rank-0 scalar"),
    "scalar real in maximum": (P(2, [Ins("maximum", (0, 1))], (2,)), (F64, F32), (1,),
                               ValidationError, "dtype_mismatch", "maximum(v0, v1)"),
    "exp of int": (P(1, [Ins("exp", (0,))], (1,)), (I32,), (), UnsupportedDTypeError, None,
                   "exp is not defined for int32"),
    "bool arithmetic": (P(2, [Ins("add", (0, 1))], (2,)), (BOOL, BOOL), (),
                        UnsupportedDTypeError, None, "bool"),
    "complex ordering": (P(2, [Ins("compare", (0, 1), direction="LT")], (2,)), (C64, C64), (),
                         UnsupportedDTypeError, None, "EQ or NE"),
    "select predicate": (P(3, [Ins("select", (0, 1, 2))], (3,)), (I32, F32, F32), (),
                         UnsupportedDTypeError, None, "predicate must be bool"),
    "select branches": (P(3, [Ins("select", (0, 1, 2))], (3,)), (BOOL, F32, F64), (),
                        ValidationError, "dtype_mismatch", "on_false"),
    "convert off lattice": (P(1, [Ins("convert", (0,), to="float32")], (1,)), (F64,), (),
                            UnsupportedDTypeConversionError, None, "float64 -> float32"),
    "dead instruction still checked": (P(1, [Ins("log", (0,)), Ins("neg", (0,))], (2,)),
                                       (I32,), (), UnsupportedDTypeError, None,
                                       "instruction 0 (log(v0), defining v1)"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_invalid_instructions_raise(name):
    plan, dtypes, scalar, exc, kind, text = ERRORS[name]
    with pytest.raises(exc) as info:
        type_plan(plan, dtypes, [k in scalar for k in range(len(dtypes))], "fuse")
    assert text in str(info.value) and info.value.op == "fuse"
    if kind:
        assert info.value.kind == kind


def test_live_values_and_reasons():
    plan = P(3, [Ins("div", (0, 1)), Ins("pow", (0, 1)), Ins("add", (0, 2))], (5,))
    typed = type_plan(plan, (I32,) * 3, (False,) * 3, "t")
    assert typed.live == (True, False, True, False, False, True)
    assert [t.live for t in typed.ops] == [False, False, True] and typed.reasons == ()
    plan = P(2, [Ins("div", (0, 1)), Ins("pow", (0, 1))], (2, 3))
    assert type_plan(plan, (I32, I32), (False, False), "t").reasons == (
        "integer division by zero", "negative integer exponent")
    assert type_plan(plan, (F32, F32), (False, False), "t").reasons == ()


def _many(n_inputs: int, n_ops: int, n_outputs: int = 1) -> ElementwiseFusionPlan:
    """A chain over every input: add them up, then negate until ``n_ops`` instructions."""
    ops: list[FusionInstruction] = []
    acc = 0
    for k in range(1, n_inputs):
        ops.append(Ins("add", (acc, k)))
        acc = n_inputs + len(ops) - 1
    while len(ops) < n_ops:
        ops.append(Ins("neg", (acc,)))
        acc = n_inputs + len(ops) - 1
    return P(n_inputs, ops, (acc,) * n_outputs)


DECLINED = {
    "outputs scalar and array": (P(2, [Ins("neg", (0,)), Ins("neg", (1,))], (2, 3)), (0,),
                                 "different shapes"),
    "17 inputs": (_many(17, 16), (), "17 inputs"),
    "9 outputs": (_many(2, 1, 9), (), "9 outputs"),
    "257 instructions": (_many(1, 257), (), "257 instructions"),
}


@pytest.mark.parametrize("name", list(DECLINED))
def test_declined_plans(name):
    plan, scalar, text = DECLINED[name]
    typed = type_plan(plan, (F32,) * plan.num_inputs,
                      [k in scalar for k in range(plan.num_inputs)], "t")
    assert text in typed.declined


def test_limits_count_live_values_only():
    plan = P(17, [Ins("add", (0, 1))] + [Ins("neg", (17,))] * 300, (17, 17, 17, 17))
    assert type_plan(plan, (F32,) * 17, (False,) * 17, "t").declined == ""
    assert len(_many(16, 256, 8).instructions) == 256
    assert type_plan(_many(16, 256, 8), (F32,) * 16, (False,) * 16, "t").declined == ""


SHAPES = {
    # name: (plan, input shapes, output shape or None (declined) or an error text)
    "equal": (P(2, [Ins("add", (0, 1))], (2,)), [(3, 4), (3, 4)], (3, 4)),
    "rank-0 broadcast": (P(2, [Ins("add", (0, 1))], (2,)), [(), (3, 4)], (3, 4)),
    "all rank 0": (P(2, [Ins("add", (0, 1))], (2, 0)), [(), ()], ()),
    "mismatch": (P(2, [Ins("neg", (0,)), Ins("add", (2, 1))], (3,)), [(3, 4), (4, 3)],
                 "instruction 1 (add(v2, v1), defining v3): shape mismatch: (3, 4) vs (4, 3)"),
    "unrelated outputs": (P(2, [Ins("neg", (0,)), Ins("neg", (1,))], (2, 3)), [(3,), (4,)],
                          None),
    "unused input of another shape": (P(2, [Ins("neg", (0,))], (2,)), [(3,), (4, 4)], (3,)),
    "an input as output": (P(2, [Ins("neg", (1,))], (0, 2)), [(3,), (3,)], (3,)),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_output_shape(name):
    plan, shapes, want = SHAPES[name]
    typed = type_plan(plan, (F32,) * len(shapes), [s == () for s in shapes], "t")
    if isinstance(want, str):
        with pytest.raises(ValidationError) as info:
            output_shape(plan, typed, shapes, "t")
        assert want in str(info.value) and info.value.kind == "shape_mismatch"
    else:
        assert output_shape(plan, typed, shapes, "t") == want


def _host(shape, dtype=np.float32):
    return Tensor.from_numpy(np.zeros(shape, dtype))


WALKS = {
    # name: (output shape, input builders, live, (path, classes, merged shape))
    "compact": ((4, 5), [lambda: _host((4, 5)), lambda: _host((4, 5))], (1, 1),
                ("contig", "cc", (20,))),
    "scalar and unused": ((4, 5), [lambda: _host(()), lambda: _host((4, 5)),
                                   lambda: _host((9,))], (1, 1, 0), ("contig", "scu", (20,))),
    "offset slice": ((7,), [lambda: _host((9,))[1:8]], (1,), ("contig", "c", (7,))),
    "one element": ((1, 1), [lambda: _host((1, 1))], (1,), ("contig", "c", ())),
    "stride-0 view": ((4, 5), [lambda: broadcast_view(_host(()), (4, 5), ())], (1,),
                      ("contig", "s", (20,))),
    "row bias": ((4, 5), [lambda: _host((4, 5)), lambda: broadcast_view(_host((5,)), (4, 5),
                                                                         (1,))],
                 (1, 1), ("bcast", "rr", (4, 5))),
    "column": ((4, 5), [lambda: _host((4, 5)), lambda: broadcast_view(_host((4,)), (4, 5),
                                                                       (0,))],
               (1, 1), ("bcast", "rr", (4, 5))),
    "middle axis": ((3, 4, 5), [lambda: _host((3, 4, 5)),
                                lambda: broadcast_view(_host((4,)), (3, 4, 5), (1,))],
                    (1, 1), ("bcast", "rr", (3, 4, 5))),
    "row bias, scalar": ((4, 5), [lambda: broadcast_view(_host((5,)), (4, 5), (1,)),
                                  lambda: _host(())], (1, 1), ("bcast", "rs", (4, 5))),
    "row of a slice": ((4, 5), [lambda: _host((4, 8))[:, 1:6]], (1,),
                       ("bcast", "r", (4, 5))),
    "four axes": ((2, 3, 4, 5), [lambda: _host((2, 3, 4, 5)),
                                 lambda: broadcast_view(_host((3,)), (2, 3, 4, 5), (1,)),
                                 lambda: broadcast_view(_host((5,)), (2, 3, 4, 5), (3,))],
                  (1, 1, 1), ("strided", "lll", (2, 3, 4, 5))),
    "transposed": ((5, 4), [lambda: _host((4, 5)).T], (1,), ("strided", "l", (5, 4))),
    "every other": ((6,), [lambda: _host((12,))[::2]], (1,), ("strided", "l", (6,))),
    "reversed": ((6,), [lambda: _host((6,))[::-1]], (1,), ("strided", "l", (6,))),
    "rank 9 compact": ((2,) * 9, [lambda: _host((2,) * 9)], (1,), ("contig", "c", (512,))),
}


@pytest.mark.parametrize("name", list(WALKS))
def test_walks(name):
    shape, builders, live, (path, classes, merged) = WALKS[name]
    w = walk(shape, [b() for b in builders], [bool(x) for x in live])
    assert (w.path, w.classes, w.shape) == (path, classes, merged)
    assert w.contig == (path == "contig")
    assert len(w.strides) == 1 + len(w.arrays) == len(w.offsets)


def test_walk_of_more_than_eight_axes_is_declined():
    x = _host((2,) * 9).permute((8, 7, 6, 5, 4, 3, 2, 1, 0))
    assert walk(x.shape, [x], [True]) is None
    y = _host((2,) * 8).permute((7, 6, 5, 4, 3, 2, 1, 0))
    assert walk(y.shape, [y], [True]).shape == (2,) * 8
