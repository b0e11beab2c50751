"""The small transfers on the CPU (tests/gpu/test_transfer.py runs them on the device):
uploads and downloads of at most 8 bytes go through the context's pinned word with one
copy, and a download with one wait; the word is written only when no copy from it can be
pending; larger transfers use the array's own memory; uploads never wait. The context is
``reference.fake_context.FakeContext`` over real host memory, with every copy recorded."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest
from reference.fake_context import FakeContext, FakeSession, HostMemory

from tenferro_cuda.dtypes import ALL_DTYPES
from tenferro_cuda.ops import transfer
from tenferro_cuda.tensor import Tensor


class Ctx(FakeContext):
    """Copies recorded as (kind, destination, source, bytes); a pinned word of 8 bytes."""

    def __init__(self) -> None:
        super().__init__(HostMemory(), None)
        self._word = ctypes.create_string_buffer(8)
        self.err_host = ctypes.addressof(self._word)
        self.copies: list[tuple] = []
        self.waits = 0

    def upload(self, dst, host, nbytes, op) -> None:
        self.copies.append(("up", dst, host, nbytes))
        super().upload(dst, host, nbytes, op)

    def download(self, host, src, nbytes, op) -> None:
        self.copies.append(("down", host, src, nbytes))
        super().download(host, src, nbytes, op)

    def wait(self, op) -> None:
        self.waits += 1


@pytest.fixture
def ctx():
    return Ctx()


@pytest.fixture
def s(ctx):
    return FakeSession(ctx, transfer.METHODS)


def _sample(dtype, n: int) -> np.ndarray:
    raw = np.arange(1, n * dtype.itemsize + 1, dtype=np.uint8) * 37
    if dtype.value == "bool":
        return raw.astype(bool)
    return raw.view(dtype.numpy)


def _warm(s):
    """One download, after which the word is known to be free."""
    s.download_to_host(s.upload_host_tensor(np.zeros(1, np.uint8)))


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.value)
def test_every_dtype_round_trips_through_the_word(ctx, s, dtype):
    _warm(s)
    for n in sorted({1, max(1, 8 // dtype.itemsize), 8 // dtype.itemsize + 1}):
        a = _sample(dtype, n)
        ctx.copies.clear()
        ctx.waits = 0
        t = s.upload_host_tensor(a)
        small = a.nbytes <= 8
        (up,) = ctx.copies
        assert (up[2] == ctx.err_host) == small and up[3] == a.nbytes and ctx.waits == 0
        got = s.download_to_host(t).numpy()
        down = ctx.copies[-1]
        assert (down[1] == ctx.err_host) == small and ctx.waits == 1
        assert got.dtype == a.dtype and got.tobytes() == a.tobytes() and got.shape == a.shape


@pytest.mark.parametrize("nbytes", [7, 8, 9], ids=lambda n: f"{n}B")
def test_threshold(ctx, s, nbytes):
    _warm(s)
    a = np.arange(nbytes, dtype=np.uint8)
    ctx.copies.clear()
    got = s.download_to_host(s.upload_host_tensor(a))
    up, down = ctx.copies
    assert (up[2] == ctx.err_host, down[1] == ctx.err_host) == (nbytes <= 8,) * 2
    assert np.array_equal(got.numpy(), a)


def test_word_is_never_rewritten_while_a_copy_from_it_may_be_pending(ctx, s):
    first = s.upload_host_tensor(np.array(1.5, np.float32))  # the word's state unknown: pageable
    assert ctx.copies[-1][2] != ctx.err_host
    s.download_to_host(first)  # the stream is idle afterwards: the word is free
    a = s.upload_host_tensor(np.array(2.5, np.float32))
    assert ctx.copies[-1][2] == ctx.err_host
    b = s.upload_host_tensor(np.array(3.5, np.float32))  # a's copy may still be pending
    c = s.upload_host_tensor(np.array(7))
    assert [x[2] == ctx.err_host for x in ctx.copies[-2:]] == [False, False]
    assert [s.download_to_host(t).numpy().item() for t in (a, b, c)] == [2.5, 3.5, 7]
    big = s.upload_host_tensor(np.arange(100.0))
    s.download_to_host(big)  # a large download leaves the stream idle too
    s.upload_host_tensor(np.array(4.5, np.float32))
    assert ctx.copies[-1][2] == ctx.err_host


def test_forgotten_word_is_taken_to_be_busy(ctx, s):
    _warm(s)
    ctx.memo.clear()  # an evicted entry: unknown history
    s.upload_host_tensor(np.array(1, np.float32))
    assert ctx.copies[-1][2] != ctx.err_host


@pytest.mark.parametrize("shape", [(), (1,), (2, 1), (0,), (3, 0, 2)], ids=str)
def test_shapes_and_empty(ctx, s, shape):
    _warm(s)
    a = np.full(shape, 3, np.float16)
    ctx.copies.clear()
    ctx.waits = 0
    got = s.download_to_host(s.upload_host_tensor(a))
    assert got.shape == shape and np.array_equal(got.numpy(), a)
    assert isinstance(got, Tensor) and got.base.host.flags.c_contiguous
    if a.size == 0:
        assert ctx.copies == [] and ctx.waits == 0
    else:
        assert len(ctx.copies) == 2 and ctx.waits == 1


def test_downloaded_array_does_not_share_the_word(ctx, s):
    _warm(s)
    x = s.download_to_host(s.upload_host_tensor(np.array(5, np.int32)))
    s.download_to_host(s.upload_host_tensor(np.array(9, np.int32)))
    assert x.numpy().item() == 5 and not np.shares_memory(x.numpy(), np.frombuffer(ctx._word))
