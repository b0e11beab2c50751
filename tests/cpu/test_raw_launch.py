"""RawSession.launch on the emulated device: geometry is validated when the launch is
prepared (once per function, argument codes and LaunchConfig), bad geometry raises before
anything is launched, the parameter block holds the arguments, and lent objects check
their scope."""

from __future__ import annotations

import ctypes
import struct

import pytest
from test_elementwise_emu import emulated_session

from tenferro_cuda.authority import Scope
from tenferro_cuda.errors import RuntimeStateError, ValidationError
from tenferro_cuda.kernels import launch as launch_mod
from tenferro_cuda.raw import Function, KernelArg, LaunchConfig, Module, RawSession


@pytest.fixture
def raw(monkeypatch):
    s, dev, ctx = emulated_session(monkeypatch)
    launches = []

    def record(fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        ptrs = (ctypes.c_void_p * 2).from_address(params)
        a = struct.unpack("<i", ctypes.string_at(ptrs[0], 4))[0]
        b = struct.unpack("<Q", ctypes.string_at(ptrs[1], 8))[0]
        launches.append((fn, (gx, gy, gz), (bx, by, bz), shared, a, b))
        return (0,)

    monkeypatch.setattr(launch_mod, "_launch", record)
    monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
    checks = []
    real = launch_mod.check_geometry
    monkeypatch.setattr("tenferro_cuda.raw.check_geometry",
                        lambda *a: checks.append(a[1:3]) or real(*a))
    attributes = {"max_threads_per_block": 1024, "shared_bytes": 0, "registers": 32,
                  "local_bytes": 0, "max_dynamic_shared": 48 << 10}
    monkeypatch.setattr("tenferro_cuda.raw._driver.function_attributes",
                        lambda fn: dict(attributes))
    monkeypatch.setattr("tenferro_cuda.raw._driver.function_allow_dynamic_shared",
                        lambda fn, n, op: opt_ins.append((fn, n)))
    opt_ins: list = []
    scope = Scope("raw session")
    r = RawSession._make(s._session, ctx, scope, "test.raw")
    fn = Function("kernel-handle", Module(None, ctx, scope), "k")
    LIMITS.update(attributes=attributes, opt_ins=opt_ins)
    return r, fn, launches, checks, scope


LIMITS: dict = {}  # the fixture's kernel attributes and the opt-ins it saw


def test_geometry_validated_once_per_prepared_launch(raw):
    r, fn, launches, checks, _ = raw
    args = [KernelArg.i32(7), KernelArg.u64(1 << 40)]
    for _ in range(3):
        r.launch(fn, LaunchConfig(4, 128), args)
    assert checks == [((4, 1, 1), (128, 1, 1))]
    r.launch(fn, LaunchConfig((2, 3), 64, 256), args)
    assert len(checks) == 2
    assert launches[0] == ("kernel-handle", (4, 1, 1), (128, 1, 1), 0, 7, 1 << 40)
    assert launches[-1][1:4] == ((2, 3, 1), (64, 1, 1), 256)
    assert len(launches) == 4


@pytest.mark.parametrize("config", [LaunchConfig(1, 2048), LaunchConfig((1, 1 << 17), 32),
                                    LaunchConfig(1, 32, 1 << 30)], ids=str)
def test_bad_geometry_raises_before_launch(raw, config):
    r, fn, launches, _, _ = raw
    with pytest.raises(ValidationError):
        r.launch(fn, config, [KernelArg.i32(1), KernelArg.u64(2)])
    assert launches == []


def test_bad_arguments_raise_before_launch(raw):
    r, fn, launches, _, _ = raw
    with pytest.raises(ValidationError):
        r.launch("not a function", LaunchConfig(1, 32), [])
    with pytest.raises(ValidationError):
        r.launch(fn, (1, 32), [])
    with pytest.raises(ValidationError):
        r.launch(fn, LaunchConfig(1, 32), [7])
    assert launches == []


def test_launch_after_scope_raises(raw):
    r, fn, launches, _, scope = raw
    scope.alive = False
    with pytest.raises(RuntimeStateError):
        r.launch(fn, LaunchConfig(1, 32), [KernelArg.i32(1), KernelArg.u64(2)])
    assert launches == []


def test_the_kernels_own_limits_are_checked_and_shared_memory_opted_in(raw):
    r, fn, launches, _, _ = raw
    args = [KernelArg.i32(1), KernelArg.u64(2)]
    limits, opt_ins = LIMITS["attributes"], LIMITS["opt_ins"]
    limits["max_threads_per_block"] = 128  # __launch_bounds__(128), say
    with pytest.raises(ValidationError, match="at most 128"):
        r.launch(fn, LaunchConfig(1, 256), args)
    limits["shared_bytes"] = 200 << 10  # static shared memory
    with pytest.raises(ValidationError, match="static bytes exceed"):
        r.launch(fn, LaunchConfig(1, 128, 64 << 10), args)
    assert launches == [] and opt_ins == []
    limits["shared_bytes"] = 0
    limits["max_threads_per_block"] = 1024
    r.launch(fn, LaunchConfig(1, 128, 100 << 10), args)
    assert opt_ins == [("kernel-handle", 100 << 10)]
    r.launch(fn, LaunchConfig(1, 128, 1 << 10), args)  # within the default: no opt-in
    assert len(opt_ins) == 1 and len(launches) == 2


@pytest.mark.parametrize("make", [
    lambda: LaunchConfig(1, 32, "x"), lambda: LaunchConfig(1, 32, 1.5),
    lambda: LaunchConfig(1, 32, True), lambda: LaunchConfig(1, 32, -1),
    lambda: KernelArg.i32(1 << 31), lambda: KernelArg.i32(-(1 << 31) - 1),
    lambda: KernelArg.u32(-1), lambda: KernelArg.u64(1 << 64), lambda: KernelArg.i64("3"),
    lambda: KernelArg.i32(2.0), lambda: KernelArg.i32(True), lambda: KernelArg.f32("x"),
    lambda: KernelArg.f32(1e40), lambda: KernelArg.f64(None), lambda: KernelArg.pointer(-1),
])
def test_bad_launch_values_are_validation_errors(make):
    with pytest.raises(ValidationError):
        make()


def test_launch_values_pack_as_the_kernel_reads_them():
    import numpy as np

    assert KernelArg.i32(-2).data == struct.pack("<i", -2)
    assert KernelArg.u32((1 << 32) - 1).data == struct.pack("<I", (1 << 32) - 1)
    assert KernelArg.i64(np.int64(-5)).data == struct.pack("<q", -5)
    assert KernelArg.f32(np.float32(1.5)).data == struct.pack("<f", 1.5)
    assert KernelArg.f64(float("inf")).data == struct.pack("<d", float("inf"))
    assert KernelArg.pointer(0x7F0000001000).data == struct.pack("<Q", 0x7F0000001000)
    assert LaunchConfig(2, (8, 4), 0).block == (8, 4, 1)
