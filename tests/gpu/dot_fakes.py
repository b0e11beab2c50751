"""Test doubles for the dot family's CPU tests (tests/cpu/test_dot_ops.py and
test_dot_args.py; kept here because tests/gpu is on sys.path): a session whose device work
is recorded instead of run, fake device buffers, and a stand-in for the cuBLAS bindings."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np

from tenferro_cuda.configs.dot import DotGeneralConfig
from tenferro_cuda.dtypes import DType
from tenferro_cuda.ops.dot import DotOps
from tenferro_cuda.tensor import Tensor

MM = DotGeneralConfig((1,), (0,))
BMM = DotGeneralConfig((2,), (1,), (0,), (0,))
_addresses = itertools.count(0x10000, 0x10000)


class FakeBuffer:
    def __init__(self, nbytes, domain, stream):
        self.ptr = next(_addresses)
        self.nbytes, self.domain, self.stream = nbytes, domain, stream
        self.freed, self.ordinal = False, 0


class Fake(DotOps):
    """A session whose device work is recorded instead of run."""

    def __init__(self, stub_run: bool = True):
        self._rt = SimpleNamespace(domain=SimpleNamespace(value=7), ordinal=0,
                                   identity=SimpleNamespace(serial=1),
                                   info=SimpleNamespace(multiprocessor_count=132))
        self._state = SimpleNamespace(prepared={}, stream=object())
        self.calls = []
        self.stub = stub_run
        if stub_run:
            self._dot_run = self._record_run

    def _begin(self, op):
        return self._state

    def dev(self, shape, dtype=DType.FLOAT32):
        n = int(np.prod(shape)) * dtype.itemsize
        return Tensor._make(dtype, tuple(shape), buffer=FakeBuffer(n, 7, self._state.stream))

    def _alloc(self, dtype, shape, op):
        self.calls.append(("alloc", tuple(shape)))
        return self.dev(shape, dtype)

    def _dot_handle(self, op):
        self.calls.append(("handle",))
        return SimpleNamespace(value=0x77)

    def _dot_prepared(self, plan, dtype, precision, op):
        if not self.stub:
            return super()._dot_prepared(plan, dtype, precision, op)
        staged = (plan.lhs_perm, plan.rhs_perm, plan.out_perm) != (None, None, None)
        if dtype.is_integer or staged or plan.empty or plan.kzero:
            return None
        calls = self.calls

        class Call:
            def run(self, pa, pb, pc, alpha, beta, op):
                calls.append(("call", plan, alpha, beta, precision, None))
        return Call()

    def _record_run(self, plan, lhs, rhs, out, dtype, alpha, beta, precision, op, temps=None):
        self.calls.append(("run", plan, alpha, beta, precision, temps))

    def _copy_into(self, src, dst, op):
        self.calls.append(("copy", src.shape, dst.shape))

    def _fill(self, out, value, op):
        self.calls.append(("fill", value))

    def _scale(self, out, factor, op):
        self.calls.append(("scale", factor))

    def _fn(self, family, expression):
        self.calls.append(("fn", family, expression))
        return "fn"

    def _launch(self, fn, grid, block, params, op, shared=0):
        self.calls.append(("launch", grid, block, op))

    def upload_host_tensor(self, array):
        self.calls.append(("upload", np.array(array)))
        return self.dev(array.shape, DType.INT64)


class FakeLib:
    """Stands in for nvmath.bindings.cublas: records every call."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)

        def fn(*args):
            self.calls.append((name, args))
            return 0x5151 if name == "create" else None
        return fn
