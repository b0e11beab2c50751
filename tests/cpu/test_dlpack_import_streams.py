"""Import side of the interop table on the CPU: what ``from_dlpack`` asks the producer
(``stream=``), which stream waits for which, ``stream=`` on the import functions (ints and
``__cuda_stream__`` objects), ``byte_offset``, versions and dtypes of foreign capsules, the
producer signatures, and the session stream object's protocol."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from reference.dlpack_fakes import OUR_STREAM, Interop, LegacyProducer, Producer, StreamObject

from tenferro_cuda import _driver, _driver_fast, _foreign, dlpack
from tenferro_cuda.authority import Scope
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import RuntimeStateError, UnsupportedDTypeError, ValidationError
from tenferro_cuda.ops import interop
from tenferro_cuda.raw import StreamHandle
from tenferro_cuda.tensor import Tensor, TensorView

PTR = 0xBEE0


@pytest.fixture
def fx(monkeypatch):
    return Interop(monkeypatch)


# (stream= of from_dlpack, what the producer is asked, the order (waiter, producer) made)
IMPORT_ROWS = [
    ("default", None, 1, [(OUR_STREAM, 1)]),
    ("pointer", PTR, -1, [(OUR_STREAM, PTR)]),
    ("protocol", StreamObject(PTR), -1, [(OUR_STREAM, PTR)]),
    ("protocol-null", StreamObject(0), -1, [(OUR_STREAM, 1)]),
    ("per-thread", 2, -1, [(OUR_STREAM, 2)]),
    ("our-stream", OUR_STREAM, -1, []),
    ("no-sync", -1, -1, []),
]


@pytest.mark.parametrize("stream,asked,orders", [r[1:] for r in IMPORT_ROWS],
                         ids=[r[0] for r in IMPORT_ROWS])
def test_import_asks_the_cheapest_stream(fx, stream, asked, orders):
    p = Producer(np.arange(8.0).reshape(2, 4))
    t = interop.from_dlpack(fx, p, stream)
    assert p.asked == [asked] and fx.orders == orders
    assert isinstance(t, Tensor) and t.shape == (2, 4) and t.data_ptr() == p.array.ctypes.data
    assert fx.made <= 1


class MinusOneRefused(Producer):
    """A producer whose ``__dlpack__`` takes -1 for a stream handle and fails on it (as
    jax's does, with its own runtime error)."""

    def __dlpack__(self, *, stream=None, **kwargs):
        if stream == -1:
            self.asked.append("refused")
            raise RuntimeError("INTERNAL: CUDA_ERROR_INVALID_HANDLE: invalid resource handle")
        return super().__dlpack__(stream=stream, **kwargs)


@pytest.mark.parametrize("stream", [PTR, -1], ids=["pointer", "no-sync"])
def test_a_producer_refusing_minus_one_is_asked_with_stream_1(fx, stream, monkeypatch):
    monkeypatch.setattr(interop, "_no_sync_refused", set())
    p = MinusOneRefused(np.arange(4.0))
    t = interop.from_dlpack(fx, p, stream)
    assert p.asked == ["refused", 1]  # once; then the caller's ordering as before
    assert fx.orders == ([(OUR_STREAM, PTR)] if stream == PTR else [])
    assert t.data_ptr() == p.array.ctypes.data
    again = MinusOneRefused(np.arange(2.0))  # remembered for the type: asked once
    interop.from_dlpack(fx, again, stream)
    assert again.asked == [1]


def test_a_producer_error_on_a_stream_it_takes_is_not_retried(fx):
    class Broken(Producer):
        def __dlpack__(self, **kwargs):
            self.asked.append(kwargs.get("stream"))
            raise RuntimeError("producer bug")

    p = Broken(np.arange(2.0))
    with pytest.raises(RuntimeError, match="producer bug"):
        interop.from_dlpack(fx, p, None)  # asked with stream 1: not the -1 fallback
    assert p.asked == [1]


def test_a_producer_refusing_one_array_on_every_stream_is_not_marked(fx, monkeypatch):
    """A producer that refuses this array whatever the stream (PyTorch before 2.10 raised
    RuntimeError for a tensor that requires grad): its own error, and the type's next
    array is still asked with -1 (no slower path for good)."""
    monkeypatch.setattr(interop, "_no_sync_refused", set())

    class Picky(Producer):
        def __dlpack__(self, *, stream=None, **kwargs):
            if self.array.size == 1:
                self.asked.append(stream)
                raise RuntimeError("Can't export tensors that require gradient")
            return super().__dlpack__(stream=stream, **kwargs)

    bad = Picky(np.arange(1.0))
    with pytest.raises(RuntimeError, match="require gradient"):
        interop.from_dlpack(fx, bad, PTR)
    assert bad.asked == [-1, 1] and Picky not in interop._no_sync_refused
    good = Picky(np.arange(3.0))
    interop.from_dlpack(fx, good, PTR)
    assert good.asked == [-1]


def test_import_of_our_own_tensor_costs_no_event(fx):
    t = fx.tensor(np.arange(6.0))
    same = interop.from_dlpack(fx, t)
    assert same.data_ptr() == t.data_ptr() and fx.orders == [] and fx.made == 0


def test_import_session_stream_object(fx):
    """The session's own stream object: the producer's data is on our stream already."""
    handle = StreamHandle(fx.stream, Scope("session"), "session stream")
    p = Producer(np.arange(3.0))
    interop.from_dlpack(fx, p, handle)
    assert p.asked == [-1] and fx.orders == []


@pytest.mark.parametrize("stream", [None, PTR], ids=["none", "pointer"])
def test_bare_capsule(fx, stream):
    p = Producer(np.arange(5, dtype=np.int32))
    t = interop.from_dlpack(fx, p.capsule(), stream)
    assert p.asked == [] and fx.orders == ([] if stream is None else [(OUR_STREAM, PTR)])
    assert t.dtype is DType.INT32


@pytest.mark.parametrize("stream,text", [("s", "stream must be"), (1.5, "stream must be"),
                                         (-3, "stream must be"),
                                         (StreamObject(result=(0, "x")), "__cuda_stream__")],
                         ids=["str", "float", "minus-three", "protocol-junk"])
def test_import_bad_stream_before_the_producer_is_asked(fx, stream, text):
    p = Producer(np.arange(3.0))
    with pytest.raises(ValidationError, match=text):
        interop.from_dlpack(fx, p, stream)
    with pytest.raises(ValidationError, match=text):
        interop.from_cuda_array_interface(fx, {"shape": (1,), "typestr": "<f8",
                                               "data": (p.array.ctypes.data, False),
                                               "version": 3}, stream)
    assert p.asked == [] and fx.orders == []


def test_byte_offset_honoured(fx):
    p = Producer(np.arange(10, dtype=np.int64), byte_offset=24)
    t = interop.from_dlpack(fx, p)
    assert t.data_ptr() == p.array.ctypes.data  # data + byte_offset
    assert p.managed.dl_tensor.data == p.array.ctypes.data - 24


def test_strided_capsule_gives_a_view(fx):
    p = Producer(np.arange(12.0), strides=(-2,))
    p.shape[0] = 6
    p.managed.dl_tensor.data = p.array.ctypes.data + 10 * 8  # element 10, stepping back by 2
    t = interop.from_dlpack(fx, p.capsule())
    assert isinstance(t, TensorView) and t.shape == (6,) and t.strides == (-2,)
    assert t.data_ptr() == p.array.ctypes.data + 80 and t.base.size == 11


def test_deleter_runs_once_when_the_tensor_goes(fx, monkeypatch):
    monkeypatch.setattr(_driver_fast, "stream_query", lambda stream: True)
    p = Producer(np.arange(3.0))
    t = interop.from_dlpack(fx, p)
    view = t[1:]
    del t
    gc.collect()
    assert p.calls == 0  # the view keeps the memory
    del view
    gc.collect()
    assert p.calls == 1


def test_unknown_major_version_released_and_refused(fx):
    p = Producer(np.arange(3.0), major=2)
    with pytest.raises(ValidationError, match="version 2.1"):
        interop.from_dlpack(fx, p)
    gc.collect()
    assert p.calls == 1 and fx.orders == []


@pytest.mark.parametrize("code,bits", [(2, 8), (0, 128), (1, 1), (3, 64), (8, 8)],
                         ids=["float8", "int128", "uint1", "opaque", "code-8"])
def test_foreign_dtype_refused_before_anything(fx, code, bits):
    p = Producer(np.arange(4, dtype=np.uint8 if bits == 8 else np.int64), code=code, bits=bits)
    with pytest.raises(UnsupportedDTypeError, match="lanes must be 1"):
        interop.from_dlpack(fx, p)
    assert fx.orders == [] and p.calls == 0


@pytest.mark.parametrize("device,error", [((1, 0), ValidationError), ((2, 3), RuntimeStateError),
                                          ((3, 0), ValidationError)],
                         ids=["cpu", "other-gpu", "cuda-host"])
def test_capsule_device_checked_before_ordering(fx, device, error):
    p = Producer(np.arange(3.0), device=device)
    with pytest.raises(error):
        interop.from_dlpack(fx, p.capsule(), PTR)
    assert fx.orders == [] and p.calls == 0


def test_legacy_producer_signature_remembered(fx):
    LegacyProducer.tries = 0
    first = LegacyProducer(np.arange(3.0))
    interop.from_dlpack(fx, first)
    assert LegacyProducer.tries == 2  # the 1.x call failed with TypeError, then stream= only
    second = LegacyProducer(np.arange(3.0))
    interop.from_dlpack(fx, second)
    assert LegacyProducer.tries == 3 and first.asked == second.asked == [1]


def test_producer_buffer_error_becomes_validation_error(fx):
    class Refuses(Producer):
        def __dlpack__(self, **kwargs):
            raise BufferError("needs a copy")

    with pytest.raises(ValidationError, match="needs a copy"):
        interop.from_dlpack(fx, Refuses(np.arange(3.0)))


# --- CUDA Array Interface streams ----------------------------------------------------------

def _iface(array, **extra):
    return {"shape": array.shape, "typestr": array.dtype.str, "version": 3,
            "data": (array.ctypes.data, False), **extra}


@pytest.mark.parametrize("entry,stream,orders", [
    (None, None, []), (0x77, None, [(OUR_STREAM, 0x77)]), (0x77, PTR, [(OUR_STREAM, PTR)]),
    (0x77, StreamObject(PTR), [(OUR_STREAM, PTR)]), (0x77, -1, []),
    (OUR_STREAM, None, []), (0, None, [(OUR_STREAM, 1)])],
    ids=["no-entry", "entry", "override", "protocol", "no-sync", "our-stream", "zero-entry"])
def test_cai_import_streams(fx, entry, stream, orders):
    array = np.arange(6.0).reshape(2, 3)
    t = interop.from_cuda_array_interface(fx, _iface(array, stream=entry), stream)
    assert fx.orders == orders and t.data_ptr() == array.ctypes.data and fx.made <= 1


# --- the stream protocol ----------------------------------------------------------------

@pytest.mark.parametrize("value,handle", [(5, 5), (StreamObject(0xAB), 0xAB),
                                          (StreamObject(0), 1),
                                          (_driver.stream_handle(0xCD), 0xCD)],
                         ids=["int", "protocol", "protocol-null", "cuda-bindings-stream"])
def test_stream_value(value, handle):
    assert _foreign.stream_value(value, "t") == handle


def test_stream_handle_speaks_the_protocol():
    scope = Scope("session")
    h = StreamHandle(_driver.stream_handle(0x1234), scope, "session stream")
    assert h.__cuda_stream__() == (0, 0x1234) and int(h) == 0x1234
    assert _foreign.consumer_stream(h, "t") is not None
    assert int(_foreign.consumer_stream(h, "t")) == 0x1234
    assert h == StreamHandle(_driver.stream_handle(0x1234), scope) and "0x1234" in repr(h)
    errors: list = []
    thread = threading.Thread(target=lambda: errors.append(_raises(h.__cuda_stream__)))
    thread.start()
    thread.join()
    assert isinstance(errors[0], RuntimeStateError)
    scope.alive = False
    with pytest.raises(RuntimeStateError, match="scope has ended"):
        h.__cuda_stream__()


def _raises(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - returned to the test
        return exc
    return None


def test_session_exposes_a_stream_object():
    from tenferro_cuda.session import CudaExecSession

    prop = CudaExecSession.__dict__["stream"]
    assert isinstance(prop, property) and "__cuda_stream__" in prop.__doc__
    assert dlpack.CAPSULE_TYPE.__name__ == "PyCapsule"


# --- a producer's code and the caller's context stack -------------------------------------

F1, F2 = 0xF1, 0xF2
CHANGES = {
    "pushes and forgets": lambda m: m.cuCtxPushCurrent(F2),
    "pushes twice": lambda m: (m.cuCtxPushCurrent(F2), m.cuCtxPushCurrent(F1)),
    "pops ours": lambda m: m.cuCtxPopCurrent(),
    "pops everything": lambda m: [m.cuCtxPopCurrent() for _ in list(m.stack)],
    "sets current": lambda m: m.cuCtxSetCurrent(F2),
}


class Meddler(Producer):
    """A producer (of no array library) whose ``__dlpack__`` and CUDA Array Interface
    change the thread's contexts and leave them so."""

    change = staticmethod(lambda m: None)
    model = None

    def __dlpack__(self, **kwargs):
        self.change(self.model)
        return super().__dlpack__(**kwargs)

    @property
    def __cuda_array_interface__(self):
        self.change(self.model)
        return _iface(self.array)


@pytest.mark.parametrize("how", ["dlpack", "cai"])
@pytest.mark.parametrize("change", CHANGES)
def test_a_producer_that_meddles_with_contexts_leaves_the_stack_as_it_was(fx, how, change):
    from reference.fake_ctx_stack import Ctx

    fx.model.stack[:] = [Ctx(F1), fx.context]  # a caller's context under ours
    p = Meddler(np.arange(4.0))
    p.change, p.model = CHANGES[change], fx.model
    t = (interop.from_dlpack if how == "dlpack" else interop.from_cuda_array_interface)(fx, p)
    assert fx.model.stack == [F1, fx.context_id]
    assert t.data_ptr() == p.array.ctypes.data


def test_array_library_producers_take_the_light_guard(fx):
    """A producer class of a known array library costs one context query, no snapshot."""
    Known = type("Tensor", (Producer,), {"__module__": "torch"})  # noqa: N806
    p = Known(np.arange(4.0))
    fx.model.calls.clear()
    interop.from_dlpack(fx, p)
    assert fx.model.calls == ["get"]
    fx.model.calls.clear()
    interop.from_dlpack(fx, Producer(np.arange(4.0)))
    assert "pop" in fx.model.calls and "push" in fx.model.calls
