"""The DLPack 1.x conformance table of docs/interop.md against PyTorch, CuPy and JAX, each
case both ways where it has two: our tensors taken by the peer (export) and the peer's
arrays adopted by us (import). Peers that are absent, or have no GPU, are skipped.

Where a case needs a capsule made with particular arguments, a small forwarding object
stands between producer and consumer (``Forward``): the consumer calls its ``__dlpack__``
and it calls the producer's with the consumer's ``stream`` and the case's arguments.
"""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest
from gpu_util import down, up
from test_interop_dlpack import peer, sample

import tenferro_cuda as tc
from tenferro_cuda import dlpack
from tenferro_cuda._dlpack_export import live_exports

PEERS = ["torch", "cupy", "jax"]


class Forward:
    """Hands a consumer the capsule of ``producer.__dlpack__(stream=<the consumer's>,
    max_version=<the consumer's>, **fixed)``; ``flags`` and ``versioned`` record what
    went through (a legacy capsule has no flags: 0)."""

    def __init__(self, producer, **fixed):
        self.producer, self.fixed = producer, fixed
        self.flags: list[int] = []
        self.versioned: list[bool] = []

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        kwargs = {"stream": stream, "max_version": max_version, **self.fixed}
        capsule = self.producer.__dlpack__(**kwargs)
        info = dlpack.parse_capsule(capsule)
        self.flags.append(info.flags)
        self.versioned.append(info.versioned)
        return capsule

    def __dlpack_device__(self):
        return self.producer.__dlpack_device__()


def _versioned_capsule_of(x):
    """The peer's own versioned capsule of ``x`` (skip when it has no DLPack 1.x)."""
    try:
        # stream 1 (the legacy default stream), which every peer takes: jax's
        # __dlpack__ fails on -1
        capsule = x.__dlpack__(stream=1, max_version=(1, 0))
    except TypeError:
        pytest.skip("this peer exports DLPack 0.x capsules only")
    if not dlpack.parse_capsule(capsule).versioned:
        pytest.skip("this peer exports DLPack 0.x capsules only")
    return capsule


def _peer_dtypes(name):
    return [d for d in (tc.bool_, tc.bfloat16) if d in peer(name).dtypes]


# --- stream= ------------------------------------------------------------------------------

EXPORT_STREAMS = ["none", "1", "2", "-1", "pointer", "protocol", "session-stream"]


@pytest.mark.parametrize("peer_name", PEERS)
@pytest.mark.parametrize("which", EXPORT_STREAMS)
def test_export_stream_values(s, peer_name, which):
    p = peer(peer_name)
    base = sample(tc.float32)
    t = up(s, base)
    s.synchronize()  # -1 and a foreign pointer order nothing against our upload
    handle = _side_stream(peer_name)
    value = {"none": None, "1": 1, "2": 2, "-1": -1, "pointer": handle,
             "protocol": _Protocol(handle), "session-stream": s.stream}[which]
    x = p.from_dlpack(Forward(t, stream=value))
    np.testing.assert_array_equal(p.numpy(x), base)
    with pytest.raises(BufferError, match="ambiguous"):
        t.__dlpack__(stream=0)


class _Protocol:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return 0, self.handle


_SIDE: dict = {}


def _side_stream(peer_name) -> int:
    """A non-default stream handle of the peer (made once per peer)."""
    if peer_name not in _SIDE:
        p = peer(peer_name)
        if peer_name == "torch":
            _SIDE[peer_name] = p.torch.cuda.Stream()
        elif peer_name == "cupy":
            _SIDE[peer_name] = p.cupy.cuda.Stream(non_blocking=True)
        else:
            _SIDE[peer_name] = None
    stream = _SIDE[peer_name]
    if stream is None:  # JAX lends no stream: one of ours, alive for the session
        return _our_side_stream()
    return stream.cuda_stream if peer_name == "torch" else stream.ptr


def _our_side_stream() -> int:
    from tenferro_cuda import _driver

    if "ours" not in _SIDE:
        _SIDE["ours"] = _driver.stream_create()
    return int(_SIDE["ours"])


@pytest.mark.parametrize("peer_name", PEERS)
@pytest.mark.parametrize("which", ["default", "pointer", "protocol", "session-stream", "-1"])
def test_import_stream_values(s, peer_name, which):
    p = peer(peer_name)
    base = sample(tc.int32)
    x = p.make(base)
    handle = _side_stream(peer_name)
    value = {"default": None, "pointer": handle, "protocol": _Protocol(handle),
             "session-stream": s.stream, "-1": -1}[which]
    if value is not None:  # the caller names the producer's stream: let it be done
        _sync_peer(peer_name, p, x)
    t = s.from_dlpack(x, stream=value)
    assert t.data_ptr() == p.ptr(x)
    np.testing.assert_array_equal(down(s, t), base)


def _sync_peer(peer_name, p, x) -> None:
    """Wait until the peer has written ``x`` (for cases that order nothing themselves)."""
    if peer_name == "torch":
        p.torch.cuda.synchronize()
    elif peer_name == "cupy":
        p.cupy.cuda.Device().synchronize()
    else:
        x.block_until_ready()


# --- max_version ---------------------------------------------------------------------------

@pytest.mark.parametrize("peer_name", PEERS)
@pytest.mark.parametrize("max_version", [None, (1, 0), (1, 1)], ids=["legacy", "1.0", "1.1"])
def test_export_capsule_versions(s, peer_name, max_version):
    p = peer(peer_name)
    base = sample(tc.float64)
    t = up(s, base)
    f = Forward(t, max_version=max_version)
    try:
        x = p.from_dlpack(f)
    except Exception as exc:  # noqa: BLE001 - an older consumer of 0.x capsules only
        if max_version is None or "dltensor" not in str(exc):
            raise
        pytest.skip(f"this {peer_name} takes DLPack 0.x capsules only: {exc}")
    np.testing.assert_array_equal(p.numpy(x), base)
    assert f.flags == [0] and f.versioned == [max_version is not None]


@pytest.mark.parametrize("peer_name", PEERS)
@pytest.mark.parametrize("versioned", [False, True], ids=["legacy", "versioned"])
def test_import_capsule_versions(s, peer_name, versioned):
    p = peer(peer_name)
    base = sample(tc.float32)
    x = p.make(base)
    capsule = (_versioned_capsule_of(x) if versioned else x.__dlpack__(stream=1))
    info = dlpack.parse_capsule(capsule)
    assert info.versioned is versioned
    _sync_peer(peer_name, p, x)
    np.testing.assert_array_equal(down(s, s.from_dlpack(capsule)), base)


# --- dl_device and copy ----------------------------------------------------------------------

@pytest.mark.parametrize("peer_name", PEERS)
def test_export_dl_device(s, peer_name):
    p = peer(peer_name)
    t = up(s, sample(tc.float32))
    with pytest.raises(BufferError, match="dl_device"):
        t.__dlpack__(dl_device=(1, 0))
    with pytest.raises(BufferError, match="dl_device"):
        t.__dlpack__(dl_device=(2, s.device_info().ordinal + 1))
    f = Forward(t, dl_device=(2, s.device_info().ordinal))
    np.testing.assert_array_equal(p.numpy(p.from_dlpack(f)), sample(tc.float32))


@pytest.mark.parametrize("peer_name", PEERS)
def test_export_copy_true(s, peer_name):
    p = peer(peer_name)
    base = sample(tc.float32)
    t = up(s, base)
    f = Forward(t, copy=True)
    x = p.from_dlpack(f)
    assert f.flags == [dlpack.FLAG_IS_COPIED if f.versioned[0] else 0]
    assert p.ptr(x) != t.data_ptr()
    s.copy_read_into(up(s, np.zeros_like(base)), t)  # the original changes, the copy not
    s.synchronize()
    np.testing.assert_array_equal(p.numpy(x), base)


@pytest.mark.parametrize("peer_name", PEERS)
@pytest.mark.parametrize("copy", [None, False], ids=["none", "false"])
def test_export_no_copy(s, peer_name, copy):
    p = peer(peer_name)
    t = up(s, sample(tc.float32))
    f = Forward(t, copy=copy)
    x = p.from_dlpack(f)
    assert f.flags == [0] and p.ptr(x) == t.data_ptr()


@pytest.mark.parametrize("peer_name", PEERS)
def test_import_copy_made_by_the_producer(s, peer_name):
    p = peer(peer_name)
    base = sample(tc.float32)
    x = p.make(base)
    try:
        capsule = x.__dlpack__(stream=1, max_version=(1, 1), copy=True)
    except (TypeError, BufferError, NotImplementedError):
        pytest.skip(f"{peer_name}'s __dlpack__ makes no copies (copy=True)")
    info = dlpack.parse_capsule(capsule)
    if info.data == p.ptr(x):
        pytest.skip(f"{peer_name}'s __dlpack__(copy=True) made no copy")
    # (whether the producer flags its copy IS_COPIED is its business: torch and jax don't)
    t = s.from_dlpack(capsule, stream=1)
    assert t.data_ptr() == info.data  # the producer's copy is adopted, not copied again
    np.testing.assert_array_equal(down(s, t), base)


# --- byte_offset, read-only ------------------------------------------------------------------

@pytest.mark.parametrize("peer_name", PEERS)
def test_import_byte_offset(s, peer_name):
    p = peer(peer_name)
    base = np.arange(64, dtype=np.float32)
    x = p.make(base)
    inner = _versioned_capsule_of(x)  # keeps the peer's memory alive, unconsumed
    info = dlpack.parse_capsule(inner)
    shape = (ctypes.c_int64 * 1)(48)
    m = dlpack.DLManagedTensorVersioned()
    m.version = dlpack.DLPackVersion(1, 0)
    m.dl_tensor.data = info.data  # the allocation; the view starts 16 elements in
    m.dl_tensor.byte_offset = 16 * 4
    m.dl_tensor.device = dlpack.DLDevice(2, s.device_info().ordinal)
    m.dl_tensor.ndim = 1
    m.dl_tensor.dtype = dlpack.DLDataType(2, 32, 1)
    m.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
    calls = []
    m.deleter = deleter = dlpack.DELETER(lambda address: calls.append(address))
    new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p,
                            ctypes.c_void_p)(("PyCapsule_New", ctypes.pythonapi))
    _sync_peer(peer_name, p, x)
    t = s.from_dlpack(new(ctypes.addressof(m), b"dltensor_versioned", None))
    assert t.data_ptr() == info.data + 64
    np.testing.assert_array_equal(down(s, t), base[16:])
    s.synchronize()
    del t
    gc.collect()
    from tenferro_cuda import _foreign

    _foreign.drain()
    assert calls == [ctypes.addressof(m)]
    del deleter, inner


def _read_only_import(s, peer_name, base):
    p = peer(peer_name)
    x = p.make(base)
    capsule = _versioned_capsule_of(x)
    info = dlpack.parse_capsule(capsule)
    ctypes.c_uint64.from_address(info.managed + 24).value |= dlpack.FLAG_READ_ONLY
    _sync_peer(peer_name, p, x)
    return s.from_dlpack(capsule), x


@pytest.mark.parametrize("peer_name", PEERS)
def test_read_only_import_refused_as_output(s, peer_name):
    base = sample(tc.float32)
    ro, _ = _read_only_import(s, peer_name, base)
    np.testing.assert_array_equal(down(s, ro), base)  # reading is fine
    other = up(s, base)
    for call in (lambda: s.add_into(other, other, ro), lambda: s.neg_into(other, ro),
                 lambda: s.copy_read_into(other, ro),
                 lambda: s.axpby_read_into_accum(1.0, other, 1.0, ro)):
        with pytest.raises(tc.ValidationError, match="read-only"):
            call()
    np.testing.assert_array_equal(down(s, ro), base)  # untouched
    assert down(s, s.add(ro, other)).tolist() == (base * 2).tolist()  # an input: fine


@pytest.mark.parametrize("peer_name", PEERS)
def test_read_only_export(s, peer_name):
    p = peer(peer_name)
    base = sample(tc.float32)
    ro, _ = _read_only_import(s, peer_name, base)
    with pytest.raises(BufferError, match="read-only"):
        ro.__dlpack__(stream=-1)  # a legacy capsule cannot carry the flag
    f = Forward(ro)
    try:
        x = p.from_dlpack(f)
    except BufferError as exc:  # a legacy consumer: our refusal, through the peer
        assert "read-only" in str(exc) and f.flags == []
        return
    except (ValueError, RuntimeError, TypeError):
        x = None  # this peer refuses read-only capsules: also what the flag is for
    assert f.flags == [dlpack.FLAG_READ_ONLY] and f.versioned == [True]
    if x is not None:
        np.testing.assert_array_equal(p.numpy(x), base)
    assert ro.__cuda_array_interface__["data"][1] is True


# --- bool and bfloat16 both ways --------------------------------------------------------------

@pytest.mark.parametrize("peer_name", PEERS)
@pytest.mark.parametrize("dtype", [tc.bool_, tc.bfloat16], ids=["bool", "bfloat16"])
def test_bool_and_bfloat16_both_ways(s, peer_name, dtype):
    if dtype not in _peer_dtypes(peer_name):
        pytest.skip(f"{peer_name} has no {dtype.value}")
    p = peer(peer_name)
    base = sample(dtype)
    t = s.from_dlpack(p.make(base))
    assert t.dtype is dtype
    back = down(s, t)
    assert back.dtype == base.dtype and back.tobytes() == base.tobytes()
    x = p.from_dlpack(up(s, base))
    got = p.numpy(x)
    assert got.dtype == base.dtype and got.tobytes() == base.tobytes()


# --- consumed once -------------------------------------------------------------------------

class Twice:
    """Hands the same capsule to every ``__dlpack__`` call."""

    def __init__(self, capsule, device):
        self.capsule, self.device = capsule, device

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return self.device


@pytest.mark.parametrize("peer_name", PEERS)
def test_our_capsule_consumed_once_by_the_peer(s, peer_name):
    p = peer(peer_name)
    t = up(s, sample(tc.float32))
    s.synchronize()
    capsule = t.__dlpack__(stream=-1)  # legacy: every consumer takes it
    twice = Twice(capsule, t.__dlpack_device__())
    x = p.from_dlpack(twice)
    assert dlpack._capsule_get_name(capsule) == b"used_dltensor"
    with pytest.raises(Exception):  # noqa: B017 - each peer has its own error type
        p.from_dlpack(twice)
    with pytest.raises(tc.ValidationError, match="consumed already"):
        s.from_dlpack(capsule)
    np.testing.assert_array_equal(p.numpy(x), sample(tc.float32))
    if peer_name != "jax":  # JAX may free its buffers later, asynchronously
        del x
        gc.collect()
        assert live_exports(t) == 0


@pytest.mark.parametrize("peer_name", PEERS)
def test_peer_capsule_consumed_once_by_us(s, peer_name):
    p = peer(peer_name)
    x = p.make(sample(tc.int64 if tc.int64 in p.dtypes else tc.int32))
    _sync_peer(peer_name, p, x)
    capsule = x.__dlpack__(stream=1)  # (jax's __dlpack__ fails on -1)
    t = s.from_dlpack(capsule)
    with pytest.raises(tc.ValidationError, match="consumed already"):
        s.from_dlpack(capsule)
    assert t.data_ptr() == p.ptr(x)
