"""ElementwiseFusionPlan and FusionInstruction: construction, validation (each bad record
raises a typed error quoting the bad value), keys, hashing, digests stable across
processes, pickling."""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tenferro_cuda.configs.elementwise import CompareDir, ElementwiseReadOp
from tenferro_cuda.configs.fusion import FUSION_OP_ARITY, ElementwiseFusionPlan, FusionInstruction
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import UnsupportedDTypeError, ValidationError

P, Ins = ElementwiseFusionPlan, FusionInstruction


def _exp_mul_add() -> ElementwiseFusionPlan:
    return P(2, [Ins("exp", (0,)), Ins("mul", (2, 1)), Ins("add", (3, 0))], (4,))


GOOD_INSTRUCTIONS = {
    "add": (lambda: Ins("add", [0, 1]), ("add", (0, 1), None, None)),
    "numpy ints": (lambda: Ins("neg", (np.int64(3),)), ("neg", (3,), None, None)),
    "read op": (lambda: Ins(ElementwiseReadOp.EXP, (0,)), ("exp", (0,), None, None)),
    "read op compare": (lambda: Ins(ElementwiseReadOp.compare(CompareDir.GE), (1, 0)),
                        ("compare", (1, 0), "ge", None)),
    "compare by name": (lambda: Ins("compare", (0, 0), direction="ne"),
                        ("compare", (0, 0), "ne", None)),
    "cast numpy dtype": (lambda: Ins("cast", (0,), to=np.float16),
                         ("cast", (0,), None, "float16")),
    "convert DType": (lambda: Ins("convert", (0,), to=DType.COMPLEX128),
                      ("convert", (0,), None, "complex128")),
    "select": (lambda: Ins("select", (0, 1, 2)), ("select", (0, 1, 2), None, None)),
}


@pytest.mark.parametrize("name", list(GOOD_INSTRUCTIONS))
def test_good_instructions(name):
    make, key = GOOD_INSTRUCTIONS[name]
    ins = make()
    assert ins.key == key and isinstance(ins.op, str) and type(ins.args) is tuple


BAD_INSTRUCTIONS = {
    "unknown op": (lambda: Ins("fma", (0, 1, 2)), ValidationError, "'fma'"),
    "op not a name": (lambda: Ins(3, (0,)), ValidationError, "3"),
    "too few args": (lambda: Ins("add", (0,)), ValidationError, "add takes 2"),
    "too many args": (lambda: Ins("exp", (0, 1)), ValidationError, "(0, 1)"),
    "negative id": (lambda: Ins("neg", (-1,)), ValidationError, "-1"),
    "bool id": (lambda: Ins("neg", (True,)), ValidationError, "True"),
    "float id": (lambda: Ins("neg", (1.0,)), ValidationError, "1.0"),
    "args a string": (lambda: Ins("neg", "0"), ValidationError, "'0'"),
    "args an int": (lambda: Ins("neg", 0), ValidationError, "got 0"),
    "compare without direction": (lambda: Ins("compare", (0, 1)), ValidationError, "None"),
    "bad direction": (lambda: Ins("compare", (0, 1), direction="lt_eq"), ValidationError,
                      "lt_eq"),
    "direction on add": (lambda: Ins("add", (0, 1), direction=CompareDir.LT), ValidationError,
                         "LT"),
    "conflicting direction": (lambda: Ins(ElementwiseReadOp.compare(CompareDir.LT), (0, 1),
                                          direction=CompareDir.GT), ValidationError, "GT"),
    "cast without target": (lambda: Ins("cast", (0,)), ValidationError, "needs a target"),
    "target on exp": (lambda: Ins("exp", (0,), to="float32"), ValidationError, "float32"),
    "unknown target": (lambda: Ins("cast", (0,), to="float8"), UnsupportedDTypeError, "float8"),
}


@pytest.mark.parametrize("name", list(BAD_INSTRUCTIONS))
def test_bad_instructions(name):
    make, exc, quoted = BAD_INSTRUCTIONS[name]
    with pytest.raises(exc) as info:
        make()
    assert quoted in str(info.value) and info.value.op == "ElementwiseFusionPlan"


BAD_PLANS = {
    "negative inputs": (lambda: P(-1, [], (0,)), "got -1"),
    "inputs not an int": (lambda: P("2", [], (0,)), "'2'"),
    "undefined argument": (lambda: P(2, [Ins("add", (0, 5))], (2,)), "v5 is undefined"),
    "forward reference": (lambda: P(1, [Ins("neg", (2,)), Ins("neg", (0,))], (1,)),
                          "v2 is a forward reference"),
    "self reference": (lambda: P(1, [Ins("neg", (1,))], (1,)), "v1 is a forward reference"),
    "no outputs": (lambda: P(1, [Ins("neg", (0,))], ()), "at least one output"),
    "undefined output": (lambda: P(1, [Ins("neg", (0,))], (2,)), "output v2 is undefined"),
    "outputs an int": (lambda: P(1, [], 0), "got 0"),
    "not an instruction": (lambda: P(1, [("neg", (0,))], (1,)), "('neg', (0,))"),
    "instructions a string": (lambda: P(1, "neg", (1,)), "'neg'"),
}


@pytest.mark.parametrize("name", list(BAD_PLANS))
def test_bad_plans(name):
    make, quoted = BAD_PLANS[name]
    with pytest.raises(ValidationError) as info:
        make()
    assert quoted in str(info.value) and info.value.kind == "invalid_argument"


def test_every_operation_has_an_arity():
    assert FUSION_OP_ARITY["select"] == FUSION_OP_ARITY["clamp"] == 3
    assert FUSION_OP_ARITY["cast"] == FUSION_OP_ARITY["convert"] == 1
    for name, arity in FUSION_OP_ARITY.items():
        extra = {"compare": {"direction": "EQ"}, "cast": {"to": "int8"},
                 "convert": {"to": "int8"}}.get(name, {})
        assert Ins(name, range(arity), **extra).args == tuple(range(arity))


def test_plan_normalises_and_keys():
    plan = P(np.int32(2), [Ins("exp", [0]), Ins("mul", (2, 1))], [3, 0, 3])
    assert plan.num_inputs == 2 and type(plan.num_inputs) is int
    assert plan.outputs == (3, 0, 3) and plan.num_values == 4
    assert plan.key == (2, (("exp", (0,), None, None), ("mul", (2, 1), None, None)), (3, 0, 3))
    assert P(3, [], (1,)).key == (3, (), (1,))  # an input as the only output


def test_equality_and_hash():
    a, b = _exp_mul_add(), _exp_mul_add()
    assert a == b and hash(a) == hash(b) and a is not b
    assert len({a, b}) == 1 and {a: 1}[b] == 1
    other = P(2, [Ins("exp", (0,)), Ins("mul", (2, 1)), Ins("sub", (3, 0))], (4,))
    assert a != other and a.digest != other.digest
    assert (a == "plan") is False and a != P(2, list(a.instructions), (4, 4))
    assert a._hash == hash(a.key)  # computed once in __post_init__


def test_records_are_frozen():
    plan = _exp_mul_add()
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.outputs = (2,)  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.instructions[0].args = (1,)  # type: ignore[misc]


# Pinned: a digest change invalidates every user's cached fusion kernels.
DIGESTS = {
    "exp_mul_add": (_exp_mul_add, "2e1c8cef92d7fbdb"),
    "compare_cast": (lambda: P(2, [Ins("compare", (0, 1), direction="LT"),
                                   Ins("cast", (2,), to="float16")], (3, 2)),
                     "d3667e5feed9bd23"),
}


@pytest.mark.parametrize("name", list(DIGESTS))
def test_digest_is_pinned(name):
    make, digest = DIGESTS[name]
    assert make().digest == digest


def test_digest_is_stable_across_processes():
    code = ("from tenferro_cuda.configs.fusion import ElementwiseFusionPlan as P, "
            "FusionInstruction as I\n"
            "print(P(2, [I('exp', (0,)), I('mul', (2, 1)), I('add', (3, 0))], (4,)).digest)")
    root = str(Path(__file__).resolve().parents[2])
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "PYTHONPATH": root}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             env=env, check=True, cwd=root)
        assert out.stdout.strip() == _exp_mul_add().digest


def test_pickle_round_trip_rehashes():
    plan = _exp_mul_add()
    back = pickle.loads(pickle.dumps(plan))
    assert back == plan and hash(back) == hash(plan) and back.digest == plan.digest


def test_repr_and_describe():
    plan = P(2, [Ins("compare", (0, 1), direction=CompareDir.LE),
                 Ins("cast", (2,), to="int8")], (3,))
    assert repr(plan) == ("ElementwiseFusionPlan(inputs 2: v2 = compare[LE](v0, v1); "
                          "v3 = cast[int8](v2) -> v3)")
    assert plan.instructions[1].describe() == "cast[int8](v2)"
