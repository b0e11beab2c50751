"""Argument validation: structural and slicing ops. Each test asserts the
contract of docs/errors.md -- a typed TenferroError naming the method, raised before any
allocation, copy or launch; nothing silently coerced."""

from __future__ import annotations

import numpy as np
import pytest
from reference.op_args import Harness

from tenferro_cuda.configs.indexing import PadConfig, SliceConfig
from tenferro_cuda.errors import ValidationError


@pytest.fixture
def h(monkeypatch):
    return Harness(monkeypatch)


F32 = np.float32


@pytest.fixture
def x(h):
    return h.put(np.arange(12, dtype=F32).reshape(3, 4))


# --- 1. a bool where an int is meant -------------------------------------------------------
@pytest.mark.parametrize("form", ["transpose", "transpose_read"])
def test_transpose_bool_perm(h, x, form):
    h.rejects(lambda: getattr(h.s, form)(x, (True, False)), "transpose", ValidationError)


def test_reshape_bool_extent(h, x):
    h.rejects(lambda: h.s.reshape(x, (True, 12)), "reshape", ValidationError)


@pytest.mark.parametrize("form", ["broadcast_in_dim", "broadcast_in_dim_read"])
def test_broadcast_in_dim_bool_dims(h, x, form):
    h.rejects(lambda: getattr(h.s, form)(x, (3, 4), (False, True)), "broadcast_in_dim",
              ValidationError)


def test_broadcast_in_dim_bool_shape(h):
    x1 = h.put(np.arange(4, dtype=F32))
    h.rejects(lambda: h.s.broadcast_in_dim(x1, (True, 4), (1,)), "broadcast_in_dim",
              ValidationError)


@pytest.mark.parametrize("op", ["extract_diagonal", "embed_diagonal"])
def test_diagonal_bool_axis(h, x, op):
    h.rejects(lambda: getattr(h.s, op)(x, True, False), op, ValidationError)


@pytest.mark.parametrize("op", ["tril", "triu"])
def test_triangle_bool_k(h, x, op):
    h.rejects(lambda: getattr(h.s, op)(x, True), op, ValidationError)


# --- 2. an unordered set / dict / iterator where a sequence is meant ------------------------
def test_transpose_set_perm(h, x):
    # {1, 0} iterates as (0, 1): the "transpose" silently becomes a copy of shape (3, 4)
    h.rejects(lambda: h.s.transpose(x, {1, 0}), "transpose", ValidationError)


def test_transpose_dict_perm(h, x):
    h.rejects(lambda: h.s.transpose(x, {1: "a", 0: "b"}), "transpose", ValidationError)


def test_reshape_set_shape(h, x):
    # {4, 3} iterates as (3, 4): reshape returns shape (3, 4), not what was written
    h.rejects(lambda: h.s.reshape(x, {4, 3}), "reshape", ValidationError)


def test_reshape_generator_shape(h, x):
    h.rejects(lambda: h.s.reshape(x, (n for n in (4, 3))), "reshape", ValidationError)


def test_broadcast_in_dim_set_dims(h, x):
    h.rejects(lambda: h.s.broadcast_in_dim(x, (3, 4), {1, 0}), "broadcast_in_dim",
              ValidationError)


def test_slice_config_set_starts():
    with pytest.raises(ValidationError):
        SliceConfig(starts={1, 0}, limits=(3, 4))


def test_pad_config_dict_interior():
    with pytest.raises(ValidationError):
        PadConfig(low=(0, 0), high=(0, 0), interior={0: 1, 1: 2})


# --- 3. shapes whose byte size overflows ---------------------------------------------------
@pytest.mark.parametrize("shape", [(2 ** 61, 4), (2 ** 40, 2 ** 40, 4)])
def test_broadcast_in_dim_huge_shape(h, shape):
    x1 = h.put(np.arange(4, dtype=F32))
    h.rejects(lambda: h.s.broadcast_in_dim(x1, shape, (len(shape) - 1,)), "broadcast_in_dim",
              ValidationError)


@pytest.mark.parametrize("cfg", [PadConfig((2 ** 62, 0), (0, 0)),
                                 PadConfig((0, 0), (0, 0), (2 ** 62, 0))])
def test_pad_huge_result(h, x, cfg):
    h.rejects(lambda: h.s.pad(x, cfg), "pad", ValidationError)


# --- 4. pad: a value of the wrong kind ------------------------------------------------------
@pytest.mark.parametrize("value", [None, "1.5", b"3", [7.0, 9.0], (), np.array([1.0, 2.0]),
                                   True],
                         ids=["None->nan", "str", "bytes", "list2", "empty-tuple",
                              "array", "bool"])
def test_pad_float_value_wrong_kind(h, x, value):
    h.rejects(lambda: h.s.pad(x, PadConfig((1, 1), (1, 1)), value), "pad", ValidationError)


def test_pad_int_tensor_bool_value(h):
    xi = h.put(np.arange(12, dtype=np.int32).reshape(3, 4))
    # full((3,), True, int32) is rejected (a bool is not an int); pad takes it as 1
    h.rejects(lambda: h.s.pad(xi, PadConfig((1, 1), (1, 1)), True), "pad", ValidationError)


@pytest.mark.parametrize("value", [None, "2", [1, 2]], ids=["None", "str", "list"])
def test_pad_complex_value_wrong_kind(h, value):
    xc = h.put(np.ones((3, 4), np.complex64))
    h.rejects(lambda: h.s.pad(xc, PadConfig((1, 1), (1, 1)), value), "pad", ValidationError)
