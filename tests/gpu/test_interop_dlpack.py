"""Zero-copy DLPack round trips with PyTorch, CuPy and JAX (each skipped if absent).

For every peer: its arrays adopted by ``session.from_dlpack`` (import) and our tensors
and views taken by the peer's ``from_dlpack`` (export), for each dtype the peer supports
and for compact, transposed, step-sliced and (where the peer allows) negative-stride
layouts; values against numpy, and no copy (same device address).
"""

from __future__ import annotations

import gc
import os

import ml_dtypes
import numpy as np
import pytest
from gpu_util import down, up

import tenferro_cuda as tc
from tenferro_cuda import _foreign
from tenferro_cuda._dlpack_export import live_exports
from tenferro_cuda.runtime import CudaRuntime
from tenferro_cuda.tensor import Tensor, TensorView


def sample(dtype: tc.DType, shape=(6, 8)) -> np.ndarray:
    n = int(np.prod(shape))
    values = (np.arange(n) % 7 - 3).reshape(shape)
    if dtype.is_bool:
        return values > 0
    if dtype.is_complex:
        return (values + 1j * (values - 1)).astype(dtype.numpy)
    if not dtype.is_signed_integer and not dtype.is_inexact:
        values = values + 3
    return values.astype(dtype.numpy)


class Torch:
    name = "torch"
    dtypes = tuple(tc.ALL_DTYPES)
    import_views = ("contiguous", "transposed", "step")
    export_views = ("contiguous", "transposed", "step")

    def __init__(self):
        import torch

        if not torch.cuda.is_available():
            pytest.skip("PyTorch has no CUDA device")
        self.torch = torch

    def make(self, a: np.ndarray):
        torch = self.torch
        if a.dtype == ml_dtypes.bfloat16:
            return torch.from_numpy(a.astype(np.float32)).to("cuda:0", torch.bfloat16)
        return torch.from_numpy(a).to("cuda:0")

    def numpy(self, x) -> np.ndarray:
        if x.dtype == self.torch.bfloat16:
            return x.float().cpu().numpy().astype(ml_dtypes.bfloat16)
        return x.cpu().numpy()

    def ptr(self, x) -> int:
        return x.data_ptr()

    def from_dlpack(self, t):
        return self.torch.from_dlpack(t)

    def lacks(self, dtype: tc.DType) -> str | None:
        """Why this PyTorch cannot hold ``dtype`` (uint16/32/64 came in PyTorch 2.3)."""
        if not hasattr(self.torch, dtype.value):
            return f"PyTorch {self.torch.__version__} has no {dtype.value} tensors"
        return None


class Cupy:
    name = "cupy"
    dtypes = tuple(d for d in tc.ALL_DTYPES if d is not tc.bfloat16)
    import_views = ("contiguous", "transposed", "step", "negative")
    export_views = ("contiguous", "transposed", "step", "negative")

    def __init__(self):
        import cupy

        self.cupy = cupy

    def make(self, a):
        return self.cupy.asarray(a)

    def numpy(self, x):
        return self.cupy.asnumpy(x)

    def ptr(self, x) -> int:
        return x.data.ptr

    def from_dlpack(self, t):
        return self.cupy.from_dlpack(t)


class Jax:
    name = "jax"
    dtypes = tuple(tc.ALL_DTYPES)
    import_views = ("contiguous",)  # JAX arrays are never strided views
    export_views = ("contiguous", "transposed")  # XLA takes permuted dense layouts

    def __init__(self):
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        try:
            self.device = jax.devices("gpu")[0]
        except RuntimeError:
            pytest.skip("JAX has no GPU backend")
        self.jax, self.jnp = jax, jnp

    def make(self, a):
        return self.jax.device_put(a, self.device)

    def numpy(self, x):
        return np.asarray(x)

    def ptr(self, x) -> int:
        return x.unsafe_buffer_pointer()

    def from_dlpack(self, t):
        return self.jnp.from_dlpack(t)


PEERS = {"torch": (Torch, "torch"), "cupy": (Cupy, "cupy"), "jax": (Jax, "jax")}
_made: dict[str, object] = {}


def peer(name: str):
    if name not in _made:
        cls, module = PEERS[name]
        pytest.importorskip(module)
        _made[name] = cls()
    return _made[name]


VIEWS = {
    "contiguous": lambda x: x,
    "transposed": lambda x: x.T,
    "step": lambda x: x[::2, 1::3],
    "negative": lambda x: x[::-1, ::-2],
}


def _cases(attr: str):
    out = []
    for name, (cls, _) in PEERS.items():
        for dtype in cls.dtypes:
            for view in getattr(cls, attr):
                out.append(pytest.param(name, dtype, view, id=f"{name}-{dtype.value}-{view}"))
    return out


def _equal(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype
    assert np.array_equal(got.astype(np.complex128), want.astype(np.complex128))


def _require(p, dtype: tc.DType) -> None:
    reason = p.lacks(dtype) if hasattr(p, "lacks") else None
    if reason:
        pytest.skip(reason)


@pytest.mark.parametrize("peer_name,dtype,view", _cases("import_views"))
def test_import_from_peer(s, peer_name, dtype, view):
    p = peer(peer_name)
    _require(p, dtype)
    base = sample(dtype)
    x = VIEWS[view](p.make(base))
    t = s.from_dlpack(x)
    want = VIEWS[view](base)
    assert t.dtype is dtype and t.shape == want.shape
    assert t.data_ptr() == p.ptr(x)  # zero-copy
    assert isinstance(t, Tensor if view == "contiguous" else TensorView)
    s.ensure_gpu_resident(t, "test.interop")
    _equal(down(s, t), want)


@pytest.mark.parametrize("peer_name,dtype,view", _cases("export_views"))
def test_export_to_peer(s, peer_name, dtype, view):
    p = peer(peer_name)
    _require(p, dtype)
    base = sample(dtype)
    t = VIEWS[view](up(s, base))
    x = p.from_dlpack(t)
    _equal(p.numpy(x), VIEWS[view](base))
    if peer_name != "jax" or view == "contiguous":
        assert p.ptr(x) == t.data_ptr()  # zero-copy
    if peer_name != "jax":  # JAX may free its buffers later, asynchronously
        assert live_exports(t) == 1
        del x
        gc.collect()
        assert live_exports(t) == 0  # the peer called our deleter


@pytest.mark.parametrize("peer_name", list(PEERS))
def test_round_trip_through_peer_shares_memory(s, peer_name):
    """ours -> peer -> ours: the same device memory, writes on either side are seen."""
    p = peer(peer_name)
    base = sample(tc.float32)
    t = up(s, base)
    back = s.from_dlpack(p.from_dlpack(t))
    assert back.data_ptr() == t.data_ptr()
    _equal(down(s, back), base)


def test_capsule_and_our_own_tensor(s):
    t = up(s, sample(tc.int64))
    same = s.from_dlpack(t)  # our own protocol, through a capsule
    assert same.data_ptr() == t.data_ptr()
    _equal(down(s, same), sample(tc.int64))
    bare = s.from_dlpack(t.__dlpack__(stream=-1))  # a bare capsule (already ordered)
    _equal(down(s, bare[::-1]), sample(tc.int64)[::-1])


def test_empty_and_rank0(s):
    torch = peer("torch").torch
    e = s.from_dlpack(torch.empty((3, 0), device="cuda:0"))
    assert e.shape == (3, 0) and down(s, e).shape == (3, 0)
    r = s.from_dlpack(torch.tensor(2.5, device="cuda:0"))
    assert r.shape == () and down(s, r).tolist() == 2.5
    z = torch.from_dlpack(up(s, np.zeros((0, 4), np.float32)))
    assert tuple(z.shape) == (0, 4)


def _our_stream_current(p, stream):
    """The peer's current stream made ``stream`` (ours) for a block: it passes that stream
    to ``__dlpack__``."""
    if p.name == "torch":
        return p.torch.cuda.stream(p.torch.cuda.ExternalStream(int(stream)))
    return p.cupy.cuda.Stream.from_external(stream)


@pytest.mark.parametrize("peer_name", ["torch", "cupy"])
@pytest.mark.parametrize("view", ["contiguous", "step"])
def test_repeated_exports_on_our_stream_stay_exact_and_checked(s, peer_name, view):
    """A tensor exported again and again to a peer whose current stream is ours takes the
    kit (``_dlpack_export``): the peer still gets the same memory and values; the kit
    steps aside once the tensor is reclaimed."""
    p = peer(peer_name)
    base = sample(tc.float32)
    whole, other = up(s, base), up(s, base + 1)
    t = VIEWS[view](whole)
    with _our_stream_current(p, s.stream):
        for _ in range(4):
            x, y = p.from_dlpack(t), p.from_dlpack(other)
            assert p.ptr(x) == t.data_ptr() and p.ptr(y) == other.data_ptr()
            del x, y
        x = p.from_dlpack(t)
        _equal(p.numpy(x), VIEWS[view](base))
        _equal(p.numpy(p.from_dlpack(other)), base + 1)
    assert type(t._kit).__name__ == "_Kit" and type(other._kit).__name__ == "_Kit"
    assert live_exports(t) == 1
    del x
    gc.collect()
    assert live_exports(t) == 0
    s.reclaim_buffer(whole)
    with pytest.raises(tc.RuntimeStateError, match="reclaimed"):
        t.__dlpack__(stream=int(s.stream), max_version=(1, 0))


def test_a_kit_steps_aside_once_its_runtime_is_closed(monkeypatch):
    rt = CudaRuntime.create_separate(0)
    try:
        ctx = rt.exec_context()
        # (a separate runtime is in no registry: its arena is made known to the export
        # by hand, as the registry would make that of a session's runtime)
        monkeypatch.setitem(_foreign._by_arena, id(ctx.home), (ctx.home, ctx))
        with rt.current():
            t = Tensor._make(tc.float32, (4, 4), buffer=ctx.home.alloc(64, "test"))
        for _ in range(3):
            t.__dlpack__(stream=-1, max_version=(1, 0))
        assert type(t._kit).__name__ == "_Kit"
    finally:
        rt.close()
    with pytest.raises(tc.RuntimeStateError, match="closed|reclaimed"):
        t.__dlpack__(stream=-1, max_version=(1, 0))
