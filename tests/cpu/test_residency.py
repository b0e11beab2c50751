"""The residency rule's errors (``exec/residency.py``): arrays in the wrong place --
host arrays, other libraries' GPU arrays that were not adopted -- are RuntimeStateError
naming the op; an object that is no array is ValidationError."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from tenferro_cuda.errors import RuntimeStateError, ValidationError
from tenferro_cuda.exec.residency import resident

CTX = SimpleNamespace(home=object(), ordinal=0, domain=7,
                      runtime=SimpleNamespace(identity=SimpleNamespace(serial=3)))


class CudaArray:
    __cuda_array_interface__ = {"shape": (3,), "typestr": "<f4", "data": (0, False),
                                "version": 3}


class DlpackArray:
    def __init__(self, device_type):
        self.device_type = device_type

    def __dlpack__(self, **kwargs):
        raise AssertionError("never asked for a capsule")

    def __dlpack_device__(self):
        return (self.device_type, 0)


@pytest.mark.parametrize("obj, words", [
    (np.ones(3, np.float32), "ndarray host array (upload it"),
    (CudaArray(), "GPU array of another library, not adopted (adopt it"),
    (DlpackArray(2), "GPU array of another library"),
    (DlpackArray(1), "host array"),
])
def test_arrays_in_the_wrong_place_are_runtime_state_errors(obj, words):
    with pytest.raises(RuntimeStateError, match=re.escape(words)) as info:
        resident(CTX, obj, "mylib.op")
    assert info.value.op == "mylib.op"
    assert "expected a device tensor resident on runtime 3 on device 0" in str(info.value)


@pytest.mark.parametrize("obj", [3, "x", None, [1.0, 2.0], np.float32(1.0)])
def test_objects_that_are_no_array_are_validation_errors(obj):
    with pytest.raises(ValidationError, match="must be a Tensor or TensorView"):
        resident(CTX, obj, "mylib.op")
