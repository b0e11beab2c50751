"""Argument validation: ``from_cuda_array_interface`` with malformed
interface dicts. Every field is validated before anything happens (docs/interop.md):
a bad field is a typed error naming the method, never a raw TypeError/ValueError, and
``data[1]`` (read_only) is a bool, not anything truthy."""

from __future__ import annotations

import numpy as np
import pytest
from reference.dlpack_fakes import Interop

from tenferro_cuda.errors import TenferroError, ValidationError
from tenferro_cuda.ops import interop

A = np.arange(6.0)


@pytest.fixture
def fx(monkeypatch):
    return Interop(monkeypatch)


def _iface(**kw):
    d = {"shape": (6,), "typestr": "<f8", "data": (A.ctypes.data, False), "version": 3}
    d.update(kw)
    return d


@pytest.mark.parametrize("typestr", [["<f8"], {"<f8": 1}, {"<f8"}],
                         ids=["list", "dict", "set"])
def test_unhashable_typestr_is_a_validation_error(fx, typestr):
    """parse_interface looks the typestr up with _KNOWN.get(...): unhashable -> TypeError."""
    with pytest.raises(ValidationError) as info:
        interop.from_cuda_array_interface(fx, _iface(typestr=typestr))
    assert info.value.op == "from_cuda_array_interface"
    assert fx.orders == []


@pytest.mark.parametrize("flag", [np.array([True, False]), None, "False", 2],
                         ids=["array", "None", "str_False", "int_2"])
def test_read_only_flag_must_be_a_bool(fx, flag):
    """CAIInfo takes bool(data[1]): an array raises a raw ValueError, None silently means
    writable, the string "False" silently means read-only."""
    with pytest.raises(TenferroError) as info:
        interop.from_cuda_array_interface(fx, _iface(data=(A.ctypes.data, flag)))
    assert info.value.op == "from_cuda_array_interface"
    assert fx.orders == []
