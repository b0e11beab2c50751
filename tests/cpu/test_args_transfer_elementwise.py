"""Argument validation of the transfer, elementwise and cast methods: a typed
TenferroError naming the method before any device work; nothing silently coerced."""

from __future__ import annotations

import numpy as np
import pytest
from reference.op_args import Harness, Reached

from tenferro_cuda.configs.elementwise import ElementwiseReadOp
from tenferro_cuda.errors import UnsupportedDTypeError, ValidationError
from tenferro_cuda.tensor import Tensor


@pytest.fixture
def h(monkeypatch):
    return Harness(monkeypatch)


# --- transfer --------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [np.longdouble, ">f4", "U2", object, "M8[s]"])
def test_upload_unsupported_numpy_dtype_names_the_method(h, dtype):
    # The error is typed, but its op is '' (Tensor.from_numpy -> as_dtype, no op given)
    h.rejects(lambda: h.s.upload_host_tensor(np.zeros(3, dtype)), "upload_host_tensor",
              UnsupportedDTypeError)


def test_an_uploaded_rank_9_tensor_meets_the_ops_rank_rules(h):
    """An upload is a copy and takes any rank (the error tests of the ops build rank-9
    device tensors that way); an op that needs more than 8 axes refuses before any device
    work (an elementwise op over 9 strided axes: 8 is the kernels' limit)."""
    from tenferro_cuda.ops import transfer
    from tenferro_cuda.shapes import check_size

    # the upload's checks are the byte size's alone (the emulated device has no upload)
    assert "check_rank" not in transfer.upload_host_tensor.__code__.co_names
    check_size((1,) * 9, "upload_host_tensor", 4)
    x = h.put(np.zeros((2,) * 9, np.float32))
    transposed = x.permute(tuple(range(8, -1, -1)))
    h.rejects(lambda: h.s.neg(transposed), "neg", ValidationError, kind="rank_mismatch")


def test_upload_masked_array_is_not_silently_unmasked(h):
    # the masked element's raw value is uploaded as data; adopting a masked CUDA Array
    # Interface array is refused (UnsupportedError), a masked numpy array is not
    a = np.ma.masked_array([1.0, 2.0], mask=[False, True])
    h.rejects(lambda: h.s.upload_host_tensor(a), "upload_host_tensor")


# --- elementwise ------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["compare_read", "compare_into", "compare_read_into"])
def test_compare_bad_direction_names_the_method(h, form):
    x = h.put(np.ones((3, 4), np.float32))
    out = h.put(np.zeros((3, 4), bool))
    args = (x, x, "sideways") + ((out,) if form.endswith("into") else ())
    h.rejects(lambda: getattr(h.s, form)(*args), form, ValidationError)  # op is "compare"


@pytest.mark.parametrize("name", [["add"], {"add": 1}], ids=["list", "dict"])
def test_elementwise_read_op_unhashable_name(name):
    with pytest.raises(ValidationError):  # TypeError: unhashable type
        ElementwiseReadOp(name)


def test_elementwise_read_into_set_inputs_order(h):
    # a set has no order: sub of {x, y} is x - y or y - x depending on hashes
    x = h.put(np.full((3, 4), 5, np.float32))
    y = h.put(np.ones((3, 4), np.float32))
    out = h.put(np.zeros((3, 4), np.float32))
    h.rejects(lambda: h.s.elementwise_read_into(ElementwiseReadOp.SUB, {x, y}, out),
              "elementwise_read_into", ValidationError)


@pytest.mark.parametrize("inputs", ["dict", "generator"])
def test_elementwise_read_into_non_sequence_inputs(h, inputs):
    x = h.put(np.ones((3, 4), np.float32))
    out = h.put(np.zeros((3, 4), np.float32))
    arg = {x: 0} if inputs == "dict" else (t for t in [x])
    h.rejects(lambda: h.s.elementwise_read_into(ElementwiseReadOp.NEG, arg, out),
              "elementwise_read_into", ValidationError)


def test_session_usable_after_the_raw_errors(h):
    """Control: the session still works after the error (a ValidationError now: the raw
    TypeError that escaped before is the defect test_creation_zero_d_array_shape shows)."""
    with pytest.raises(ValidationError):
        h.s.zeros(np.array(3), "float32")
    t = h.s.zeros((2,), "float32")
    assert isinstance(t, Tensor) and t.shape == (2,)


def test_harness_sees_device_work(h):
    """Control: a valid op does reach device work while armed (the recorder is live)."""
    x = h.put(np.ones((3, 4), np.float32))
    with h.armed():
        with pytest.raises(Reached):
            h.s.transpose(x, (1, 0))
    assert h.reached
