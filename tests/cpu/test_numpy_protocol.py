"""numpy's protocols and the reprs (no GPU): host tensors and views convert with
``np.asarray``/``np.array`` under numpy's ``dtype=``/``copy=`` rules, device tensors refuse
with ``TypeError`` pointing at ``download_to_host``; ``np.dtype(DType)`` works for every
dtype; a device tensor's repr names its device ordinal; an error's repr shows its op,
its kind and its other fields."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
from reference.fake_context import FakeBuffer, _Home

import tenferro_cuda as tc
from tenferro_cuda import errors as E
from tenferro_cuda.dtypes import ALL_DTYPES, DType, as_dtype
from tenferro_cuda.tensor import Tensor

D = DType


def _host(a) -> Tensor:
    return Tensor.from_numpy(np.asarray(a))


def _device(dtype=D.FLOAT32, shape=(2, 3), ordinal=0) -> Tensor:
    buf = FakeBuffer(1 << 20, 4096, _Home(None))
    buf.ordinal = ordinal
    return Tensor._make(dtype, shape, buffer=buf)


def test_host_tensor_converts_without_a_copy():
    a = np.arange(12.0).reshape(3, 4)
    t = _host(a)
    got = np.asarray(t)
    assert np.array_equal(got, a) and np.shares_memory(got, a) and not got.flags.writeable
    view = np.asarray(t[1:, ::2])
    assert np.array_equal(view, a[1:, ::2]) and np.shares_memory(view, a)
    assert np.array_equal(np.asarray(t.T), a.T)


def test_copy_and_dtype_follow_numpy():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = _host(a)
    c = np.array(t)  # copy=True
    assert np.array_equal(c, a) and not np.shares_memory(c, a) and c.flags.writeable
    f = np.asarray(t, dtype=np.float64)
    assert f.dtype == np.float64 and np.array_equal(f, a)
    assert np.asarray(t, dtype=np.int32).dtype == np.int32
    with pytest.raises(ValueError):
        np.asarray(t, dtype=np.float64, copy=False)
    same = np.asarray(t, copy=False)
    assert np.shares_memory(same, a)


def test_negative_strides_need_a_copy():
    a = np.arange(6.0)
    r = _host(a)[::-1]
    assert np.array_equal(np.asarray(r), a[::-1])
    with pytest.raises(ValueError, match="copy"):
        np.asarray(r, copy=False)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.value)
def test_every_dtype_and_empty(dtype):
    a = np.ones((2, 2), dtype.numpy)
    assert np.asarray(_host(a)).dtype == dtype.numpy
    e = np.asarray(_host(np.zeros((0, 3), dtype.numpy)))
    assert e.shape == (0, 3) and e.dtype == dtype.numpy
    assert np.asarray(_host(np.array(1, dtype.numpy))).shape == ()


def test_device_tensor_refuses_numpy():
    t = _device()
    for obj in (t, t.T, t[0]):
        with pytest.raises(TypeError, match="download_to_host"):
            np.asarray(obj)
        with pytest.raises(TypeError, match="download_to_host"):
            np.array(obj, dtype=np.float64)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.value)
def test_dtype_works_with_numpy(dtype):
    assert np.dtype(dtype) == dtype.numpy
    assert np.zeros(2, dtype).dtype == dtype.numpy
    assert as_dtype(np.dtype(dtype)) is dtype
    assert np.dtype(getattr(tc, "bool_" if dtype is D.BOOL else dtype.value)) == dtype.numpy


def test_tensor_reprs():
    assert repr(_device(D.INT8, (4,), ordinal=3)) == "Tensor(shape=(4,), dtype=int8, device 3)"
    v = _device(ordinal=1).T
    assert repr(v) == "TensorView(shape=(3, 2), dtype=float32, device 1)"
    t = _device()
    t.buffer.release()
    assert repr(t).endswith("device 0, reclaimed)")
    assert repr(_host(np.zeros(2))) == "Tensor(shape=(2,), dtype=float64, host)"


ERRORS = [
    (E.ValidationError("bad shape", op="add", kind="shape_mismatch"),
     "ValidationError('bad shape', op='add', kind='shape_mismatch')"),
    (E.ValidationError("x", op="div"), "ValidationError('x', op='div', kind='invalid_argument')"),
    (E.SessionEntryError("again", op="cuda_exec_session", kind="reentered"),
     "SessionEntryError('again', op='cuda_exec_session', kind='reentered')"),
    (E.OutOfMemoryError("oom", op="alloc", requested_bytes=64),
     "OutOfMemoryError('oom', op='alloc', requested_bytes=64)"),
    (E.CompileError("failed", op="compile", log="line 1: error", source_name="a.cu",
                    options=("-arch=sm_90",)),
     "CompileError('failed', op='compile', log=<13 characters>, source_name='a.cu', "
     "options=('-arch=sm_90',))"),
    (E.UnsupportedDTypeError("no", op="exp"), "UnsupportedDTypeError('no', op='exp')"),
    (E.RuntimeStateError("closed"), "RuntimeStateError('closed', op='')"),
]


@pytest.mark.parametrize("err,want", ERRORS, ids=lambda v: type(v).__name__)
def test_error_reprs_show_op_and_kind(err, want):
    assert repr(err) == want
    back = pickle.loads(pickle.dumps(err))
    assert repr(back) == want and str(back) == str(err)


def test_error_repr_after_a_note():
    err = E.ValidationError("m", op="pad", kind="overflow")
    err.add_note("while padding")
    assert repr(err) == "ValidationError('m', op='pad', kind='overflow')"
