"""The deferred-error word is read by ``synchronize`` only when a launch that may write it
was enqueued since the last read (``exec/device_errors.ErrorWatch``): launches prepared
with the word among their constants count themselves, a graph that captured one counts
each replay, and nothing else does. Recorded driver calls, no GPU."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from reference.fake_context import INFO
from reference.fake_graph import FakeSession, tensor

from tenferro_cuda import _driver, _driver_fast, _foreign
from tenferro_cuda.errors import BackendSourceError, CudaDeviceError, ValidationError
from tenferro_cuda.exec import capture as cap
from tenferro_cuda.exec.context import ExecContext
from tenferro_cuda.exec.device_errors import ErrorWatch, error_code
from tenferro_cuda.graph import CudaGraph
from tenferro_cuda.kernels import launch as launch_mod
from tenferro_cuda.kernels.launch import PreparedLaunch, WatchedLaunch
from tenferro_cuda.memo import BoundedCache
from tenferro_cuda.session import _synchronize

WORD = 0x7F00_0000_1000


def _failing(*args):
    """A launch the driver refuses (CUDA_ERROR_INVALID_VALUE)."""
    raise launch_mod._Failure(1)


class SyncCtx:
    """The ExecContext calls ``_synchronize`` makes, recorded; ``word`` is the device
    error word's value."""

    def __init__(self) -> None:
        self.errors = ErrorWatch()
        self.err_word = SimpleNamespace(ptr=WORD)
        self.err_host = 0  # read through ``read_host`` below
        self.calls: list[str] = []
        self.word = 0
        self.wait_fails = False

    def flush(self) -> None:
        self.calls.append("flush")

    def download(self, host, src, nbytes, op) -> None:
        assert src == WORD and nbytes == 4
        self.calls.append("download")

    def wait(self, op) -> None:
        self.calls.append("wait")
        if self.wait_fails:
            raise CudaDeviceError("cuStreamSynchronize failed", op=op)

    def memset(self, dst, value, nbytes, op) -> None:
        assert dst == WORD and value == 0
        self.calls.append("memset")
        self.word = 0


@pytest.fixture
def sync_ctx(monkeypatch):
    ctx = SyncCtx()
    monkeypatch.setattr("tenferro_cuda.session._read_host",
                        lambda address, n: ctx.word.to_bytes(4, "little", signed=True))
    return ctx


def test_no_watched_launch_no_read(sync_ctx):
    _synchronize(sync_ctx)
    _synchronize(sync_ctx)
    assert sync_ctx.calls == ["flush", "wait"] * 2


def test_a_watched_launch_makes_the_next_synchronize_read_once(sync_ctx):
    sync_ctx.errors.count += 1
    _synchronize(sync_ctx)
    assert sync_ctx.calls == ["flush", "download", "wait"]
    _synchronize(sync_ctx)
    assert sync_ctx.calls[3:] == ["flush", "wait"]


def test_a_written_word_raises_once_and_is_cleared(sync_ctx):
    code = error_code("divide", "integer division by zero")
    sync_ctx.errors.count += 2
    sync_ctx.word = code
    with pytest.raises(ValidationError, match="integer division by zero") as info:
        _synchronize(sync_ctx)
    assert info.value.op == "divide" and info.value.kind == "device_data"
    assert sync_ctx.calls == ["flush", "download", "wait", "memset", "wait"]
    assert sync_ctx.word == 0 and not sync_ctx.errors.pending
    _synchronize(sync_ctx)  # read: nothing new can be there
    assert sync_ctx.calls[5:] == ["flush", "wait"]


def test_a_failed_wait_keeps_the_word_unread(sync_ctx):
    sync_ctx.errors.count += 1
    sync_ctx.wait_fails = True
    with pytest.raises(CudaDeviceError):
        _synchronize(sync_ctx)
    assert sync_ctx.errors.pending
    sync_ctx.wait_fails = False
    _synchronize(sync_ctx)
    assert sync_ctx.calls[-3:] == ["flush", "download", "wait"]
    assert not sync_ctx.errors.pending



@pytest.mark.parametrize("word", [0, 1], ids=["clean", "device-error"])
def test_synchronize_lets_go_of_foreign_arrays_dropped_while_the_stream_ran(
        sync_ctx, monkeypatch, word):
    """An adopted array dropped while the stream was busy is parked; the synchronize
    that finds the stream idle lets it go (also when it then raises a device error)."""
    idle = {"value": False}
    monkeypatch.setattr(_foreign, "_parked", type(_foreign._parked)())
    monkeypatch.setattr(_driver_fast, "stream_query", lambda stream: idle["value"])
    released: list[int] = []
    _foreign.release_when_idle(_driver.stream_handle(0x5A5A0), released.append, 7)
    assert released == [] and _foreign.parked_count() == 1
    idle["value"] = True  # what the wait inside synchronize makes true
    if word:
        sync_ctx.errors.count += 1
        sync_ctx.word = error_code("divide", "integer division by zero")
        with pytest.raises(ValidationError, match="division by zero"):
            _synchronize(sync_ctx)
    else:
        _synchronize(sync_ctx)
    assert released == [7] and _foreign.parked_count() == 0

def _prep_ctx():
    return SimpleNamespace(launches=BoundedCache(16), err_word=SimpleNamespace(ptr=WORD),
                           errors=ErrorWatch(), stream=3, info=SimpleNamespace(**INFO))


@pytest.mark.parametrize("tail, watched", [((WORD, 7, 0, 0, 0), True), ((0, 0, 0, 0, 0), False),
                                           ((), False), ((WORD + 8, 1), False)])
def test_prepare_watches_the_launches_that_carry_the_word(monkeypatch, tail, watched):
    ctx = _prep_ctx()
    launched = []
    monkeypatch.setattr(launch_mod, "_launch", lambda *a: launched.append(a[1:4]) or (0,))
    monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
    codes = "PQ" + "PiQQQ"[:len(tail)] if tail else "PQ"
    launch = ExecContext.prepare(ctx, "key", "fn", codes, tail=tail, op="t")
    assert isinstance(launch, WatchedLaunch) is watched
    assert isinstance(launch, PreparedLaunch)
    launch.run(2, 1 << 20, 5)
    launch.run3((1, 2, 3), 1 << 20, 5)
    assert launched == [(2, 1, 1), (1, 2, 3)]
    assert ctx.errors.count == (2 if watched else 0)
    assert ExecContext.prepare(ctx, "key", "fn", codes, tail=tail) is launch  # cached


def test_a_failed_watched_launch_still_counts(monkeypatch):
    """A launch that fails may still have been enqueued: the word is read (harmless)."""
    ctx = _prep_ctx()
    monkeypatch.setattr(launch_mod, "_launch", _failing)
    monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
    launch = ExecContext.prepare(ctx, "k", "fn", "PQPi", tail=(WORD, 3))
    with pytest.raises(BackendSourceError):
        launch.run(1, 0, 0)
    assert ctx.errors.pending


@pytest.mark.parametrize("tail, watched", [((WORD, 7, 0, 0, 0), True), ((0, 0, 0, 0, 0), False)])
def test_a_bound_launch_launches_the_packed_block_and_counts_when_watched(monkeypatch, tail,
                                                                          watched):
    """``bound(gx)``: the launch with every argument fixed (the hot paths' form); a watched
    kernel's bound launch counts itself like ``run``."""
    ctx = _prep_ctx()
    launched = []
    monkeypatch.setattr(launch_mod, "_launch", lambda *a: launched.append(a) or (0,))
    monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
    launch = ExecContext.prepare(ctx, "key", "fn", "PQ" + "PiQQQ", tail=tail, op="t")
    go = launch.bound(7)
    launch.pack(1 << 20, 5)
    go()
    go()
    launch.run(7, 1 << 20, 5)
    assert launched[0] == launched[1] == launched[2]
    assert launched[0][:4] == ("fn", 7, 1, 1) and launched[0][8:] == (3, launch.address, 0)
    assert ctx.errors.count == (3 if watched else 0)


def test_failed_gives_the_typed_error_of_a_bound_launch(monkeypatch):
    """What a bound launch raises, through ``failed``: the typed error naming the op, as
    ``run`` raises it; an exception that is not a driver failure passes unchanged."""
    ctx = _prep_ctx()
    monkeypatch.setattr(launch_mod, "_launch", _failing)
    monkeypatch.setattr(launch_mod, "_handle", lambda h: h)  # fake functions
    launch = ExecContext.prepare(ctx, "k", "fn", "PQ", op="the_op")
    go = launch.bound(1)
    with pytest.raises(BackendSourceError, match="the_op") as raised:
        try:
            go()
        except Exception as exc:  # noqa: BLE001 - the hot paths' form
            launch.failed(exc)
    with pytest.raises(BackendSourceError) as by_run:
        launch.run(1, 0, 0)
    assert str(raised.value) == str(by_run.value)
    with pytest.raises(KeyboardInterrupt):
        launch.failed(KeyboardInterrupt())


def _graph(session, watched_launches: int):
    ctx = session._ctx
    state = cap.CaptureState(ctx, cap.GraphMemory(ctx.home, 99))
    state._note(tensor(ctx), False)
    ctx.errors.count += watched_launches  # what the captured launches counted
    g = CudaGraph._begin(session, state)
    g._ready(state, 0xA1, 0xE1)
    return g


@pytest.mark.parametrize("watched", [0, 1, 3])
def test_a_graph_that_captured_a_watched_launch_counts_each_replay(driver, watched):
    session = FakeSession()
    ctx = session._ctx
    ctx.errors.read = ctx.errors.count = 10
    g = _graph(session, watched)
    ctx.errors.read = ctx.errors.count  # a synchronize after the capture
    for _ in range(3):
        assert g._launch(ctx, None) == 0
    assert ctx.errors.count - ctx.errors.read == (3 if watched else 0)
    assert [c[0] for c in driver.lib.calls] == ["cuGraphLaunch"] * 3
