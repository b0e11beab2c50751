"""RawSession.launch on the emulated device: geometry is validated when the launch is
prepared (once per function, argument codes and LaunchConfig), bad geometry raises before
anything is launched, the parameter block holds the arguments, and lent objects check
their scope."""

from __future__ import annotations

import ctypes
import struct

import pytest
from test_elementwise_emu import emulated_session

from tenferro_cuda.errors import RuntimeStateError, ValidationError
from tenferro_cuda.exec.authority import Scope
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
    checks = []
    real = launch_mod.check_geometry
    monkeypatch.setattr("tenferro_cuda.raw.check_geometry",
                        lambda *a: checks.append(a[1:3]) or real(*a))
    scope = Scope("raw session")
    r = RawSession._make(s._session, ctx, scope, "test.raw")
    fn = Function("kernel-handle", Module(None, ctx, scope), "k")
    return r, fn, launches, checks, scope


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
