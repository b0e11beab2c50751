"""The DLPack 1.x conformance table of docs/interop.md, export side, on the CPU.

Each row of the table is a test here: ``stream=`` values (which stream waits for which,
through pooled events; what the deleter orders), ``max_version``, ``dl_device``, ``copy``
with ``IS_COPIED``, read-only tensors, bool and bfloat16 fields, and capsules taken once.
The execution context is ``reference.dlpack_fakes.Interop``: its driver calls are
recorded, its memory is host memory.
"""

from __future__ import annotations

import ctypes
import gc
import threading

import numpy as np
import pytest
from reference.dlpack_fakes import OUR_STREAM, Interop, StreamObject, read
from reference.dlpack_fakes import consume as _consume
from reference.fake_ctx_stack import Ctx

from tenferro_cuda import _foreign, cai, dlpack
from tenferro_cuda._dlpack_export import live_exports
from tenferro_cuda.dtypes import DType
from tenferro_cuda.errors import RuntimeStateError, ValidationError
from tenferro_cuda.ops import interop

PTR = 0xABC0


@pytest.fixture
def fx(monkeypatch):
    return Interop(monkeypatch)


# --- stream= -----------------------------------------------------------------------------

# (stream argument, consumer handle that waits (None: no order), the deleter orders back)
STREAM_ROWS = [
    ("none", None, 1, True),
    ("legacy-1", 1, 1, True),
    ("per-thread-2", 2, 2, True),
    ("no-sync--1", -1, None, False),
    ("pointer", PTR, PTR, False),
    ("protocol", StreamObject(PTR), PTR, False),
    ("protocol-null", StreamObject(0), 1, True),
    ("own-stream", OUR_STREAM, None, False),
]


@pytest.mark.parametrize("stream,waiter,back", [r[1:] for r in STREAM_ROWS],
                         ids=[r[0] for r in STREAM_ROWS])
def test_export_stream_orders_the_consumer(fx, stream, waiter, back):
    t = fx.tensor(np.arange(12.0).reshape(3, 4))
    kwargs = {} if stream is None and waiter == 1 else {"stream": stream}
    capsule = t.__dlpack__(max_version=(1, 0), **kwargs)
    assert fx.orders == ([] if waiter is None else [(waiter, OUR_STREAM)])
    info, owner = _consume(capsule)
    assert info.data == t.data_ptr()
    del owner  # the consumer's array goes: its deleter runs
    gc.collect()
    expected_back = [(OUR_STREAM, waiter)] if back else []
    assert fx.orders[1 if waiter is not None else 0:] == expected_back
    assert live_exports(t) == 0


BAD_STREAMS = [
    ("zero", 0, BufferError, "ambiguous"),
    ("minus-two", -2, BufferError, "not allowed"),
    ("float", 1.0, TypeError, "stream"),
    ("bool", True, TypeError, "stream"),
    ("protocol-version-1", StreamObject(result=(1, PTR)), TypeError, "__cuda_stream__"),
    ("protocol-junk", StreamObject(result="junk"), TypeError, "__cuda_stream__"),
    ("protocol-negative", StreamObject(result=(0, -5)), TypeError, "__cuda_stream__"),
]


@pytest.mark.parametrize("stream,error,text", [r[1:] for r in BAD_STREAMS],
                         ids=[r[0] for r in BAD_STREAMS])
def test_export_bad_stream_raises_before_anything(fx, stream, error, text):
    t = fx.tensor(np.arange(4.0))
    with pytest.raises(error, match=text):
        t.__dlpack__(stream=stream, max_version=(1, 0))
    assert fx.orders == [] and live_exports(t) == 0


def test_export_events_come_from_a_pool(fx):
    t = fx.tensor(np.arange(4.0))
    keep = [t.__dlpack__(stream=PTR, max_version=(1, 0)) for _ in range(50)]
    assert len(fx.orders) == 50 and fx.made == 1 and len(fx.events) == 1
    del keep
    gc.collect()
    assert fx.made == 1 and fx.destroyed == 0


def test_nested_order_takes_a_second_event(fx, monkeypatch):
    """An order running while another holds the pooled event (a deleter called from a
    finalizer in between) must not share that event."""
    seen: list = []
    record = fx._order

    def order(event, producer, waiter):
        seen.append(event)
        if len(seen) == 1:
            _foreign.order(fx, fx.stream, _foreign.LEGACY_STREAM)  # nested
        record(event, producer, waiter)

    monkeypatch.setattr("tenferro_cuda._driver_fast.order", order)
    _foreign.order(fx, _foreign.PER_THREAD_STREAM, fx.stream)
    assert seen[0] is not seen[1] and fx.made == 2 and len(fx.events) == 2


@pytest.mark.parametrize("current", [False, True], ids=["asked", "vouched"])
def test_an_order_asks_for_our_context_unless_the_caller_vouches(fx, monkeypatch, current):
    """``order`` makes our context current around the two calls when another is on top
    (and puts the stack back); ``current=True`` -- an op body, which runs with ours
    current -- asks nothing and pushes nothing."""
    foreign = Ctx(0x7777)
    fx.model.stack.append(foreign)
    stack = list(fx.model.stack)
    tops: list = []
    record = fx._order

    def order(event, producer, waiter):
        tops.append(fx.model.stack[-1])
        record(event, producer, waiter)

    monkeypatch.setattr("tenferro_cuda._driver_fast.order", order)
    _foreign.order(fx, _foreign.PER_THREAD_STREAM, fx.stream, current)
    assert tops == [foreign if current else fx.context]
    assert fx.model.stack == stack
    assert fx.orders == [(2, OUR_STREAM)]


class _Capture:
    def __init__(self):
        self.refused: list[str] = []

    def refuse(self, op):
        self.refused.append(op)
        raise RuntimeStateError(f"{op} is not allowed during capture", op=op)


def test_export_refused_while_the_stream_captures(fx):
    t = fx.tensor(np.arange(4.0))
    fx.capture = _Capture()
    with pytest.raises(RuntimeStateError, match="during capture"):
        t.__dlpack__(stream=1, max_version=(1, 0))
    with pytest.raises(RuntimeStateError, match="during capture"):
        t.__cuda_array_interface__  # noqa: B018
    assert fx.capture.refused == ["__dlpack__", "__cuda_array_interface__"]
    errors: list = []
    thread = threading.Thread(target=lambda: errors.append(_raised(t.__dlpack__)))
    thread.start()
    thread.join()
    assert isinstance(errors[0], RuntimeStateError) and len(fx.capture.refused) == 2
    assert fx.orders == [] and live_exports(t) == 0


def _raised(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - returned to the test
        return exc
    return None


# --- max_version and dl_device ----------------------------------------------------------

VERSION_ROWS = [(None, b"dltensor", None), ((0, 8), b"dltensor", None),
                ((1, 0), b"dltensor_versioned", (1, 0)),
                ((1, 1), b"dltensor_versioned", (1, 1)),
                ((1, 7), b"dltensor_versioned", (1, 1)),
                ((2, 0), b"dltensor_versioned", (1, 1)),
                ([1, 0], b"dltensor_versioned", (1, 0))]


@pytest.mark.parametrize("max_version,name,version", VERSION_ROWS,
                         ids=[str(r[0]) for r in VERSION_ROWS])
def test_max_version_picks_the_capsule(fx, max_version, name, version):
    t = fx.tensor(np.arange(6, dtype=np.int32).reshape(2, 3))
    capsule = t.__dlpack__(stream=-1, max_version=max_version)
    assert dlpack._capsule_get_name(capsule) == name
    info = dlpack.parse_capsule(capsule)
    if version is not None:
        m = dlpack.DLManagedTensorVersioned.from_address(info.managed)
        assert (m.version.major, m.version.minor, m.flags) == (*version, 0)
    assert (info.shape, info.strides, info.dtype) == ((2, 3), (3, 1), DType.INT32)


@pytest.mark.parametrize("device,ok", [((2, 0), True), (None, True), ((1, 0), False),
                                       ((2, 1), False), ((13, 0), False), ((3, 0), False)],
                         ids=["cuda-0", "none", "cpu", "cuda-1", "managed", "cuda-host"])
def test_dl_device(fx, device, ok):
    t = fx.tensor(np.arange(3.0))
    if ok:
        assert dlpack.parse_capsule(t.__dlpack__(stream=-1, dl_device=device)).shape == (3,)
        return
    with pytest.raises(BufferError, match="dl_device"):
        t.__dlpack__(stream=-1, dl_device=device)
    assert live_exports(t) == 0


# --- copy --------------------------------------------------------------------------------

@pytest.mark.parametrize("copy", [None, False], ids=["none", "false"])
def test_no_copy_shares_memory(fx, copy):
    t = fx.tensor(np.arange(5.0))
    info = dlpack.parse_capsule(t.__dlpack__(stream=-1, max_version=(1, 0), copy=copy))
    assert info.data == t.data_ptr() and info.flags == 0


def test_copy_on_the_consumer_stream(fx):
    want = np.arange(12.0).reshape(3, 4)
    t = fx.tensor(want)
    capsule = t.__dlpack__(stream=PTR, max_version=(1, 0), copy=True)
    info = dlpack.parse_capsule(capsule)
    assert info.flags == dlpack.FLAG_IS_COPIED and info.data != t.data_ptr()
    # the consumer waits for our stream, the copy runs on its stream, ours waits for it
    assert fx.orders == [(PTR, OUR_STREAM), (OUR_STREAM, PTR)]
    assert fx.copies == [(PTR, info.data, t.data_ptr(), want.nbytes)]
    np.testing.assert_array_equal(read(info.data, DType.FLOAT64, 12).reshape(3, 4), want)


def test_copy_without_sync_is_made_on_our_stream(fx):
    want = np.arange(6, dtype=np.int64)
    t = fx.tensor(want)
    info = dlpack.parse_capsule(t.__dlpack__(stream=-1, max_version=(1, 0), copy=True))
    assert info.flags == dlpack.FLAG_IS_COPIED and fx.orders == []
    assert fx.copies == [(OUR_STREAM, info.data, t.data_ptr(), want.nbytes)]
    np.testing.assert_array_equal(read(info.data, DType.INT64, 6), want)


def test_copy_of_a_strided_view_is_compacted_on_our_stream(fx):
    t = fx.tensor(np.arange(20.0).reshape(4, 5))
    view = t[::2, ::-1]
    info = dlpack.parse_capsule(view.__dlpack__(stream=PTR, max_version=(1, 0), copy=True))
    assert info.flags == dlpack.FLAG_IS_COPIED and info.shape == (2, 5)
    assert info.strides == (5, 1)  # the copy is compact
    assert len(fx.launches) == 1 and fx.copies == []  # one copy kernel on our stream
    assert fx.orders == [(PTR, OUR_STREAM)]


def test_copy_from_another_thread_is_refused(fx):
    t = fx.tensor(np.arange(3.0))
    errors: list = []

    def other():
        try:
            t.__dlpack__(stream=PTR, copy=True)
        except BufferError as exc:
            errors.append(exc)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert errors and "thread" in str(errors[0])
    assert fx.orders == [] and live_exports(t) == 0


def test_copy_must_be_a_bool(fx):
    with pytest.raises(BufferError, match="copy must be"):
        fx.tensor(np.arange(3.0)).__dlpack__(stream=-1, copy="yes")


# --- read-only ---------------------------------------------------------------------------

def _read_only_tensor(fx):
    base = np.arange(6.0)
    fx.keep.append(base)
    owner = dlpack.ForeignOwner(0, None, readonly=True)
    return interop._adopt(fx, base.ctypes.data, DType.FLOAT64, (6,), None, owner)


def test_read_only_export_flags_the_capsule(fx):
    t = _read_only_tensor(fx)
    info = dlpack.parse_capsule(t.__dlpack__(stream=-1, max_version=(1, 0)))
    assert info.readonly and info.flags == dlpack.FLAG_READ_ONLY
    with pytest.raises(BufferError, match="read-only"):
        t.__dlpack__(stream=-1)  # a legacy capsule cannot say so
    copied = dlpack.parse_capsule(t.__dlpack__(stream=-1, copy=True, max_version=(1, 0)))
    assert copied.flags == dlpack.FLAG_IS_COPIED and not copied.readonly
    assert t.__cuda_array_interface__["data"] == (t.data_ptr(), True)
    assert fx.tensor(np.arange(2.0)).__cuda_array_interface__["data"][1] is False


def test_read_only_import_through_dlpack_and_cai(fx):
    from reference.dlpack_fakes import Producer

    p = Producer(np.arange(4.0), flags=dlpack.FLAG_READ_ONLY)
    assert interop.from_dlpack(fx, p.capsule()).base.buffer.owner.readonly is True
    plain = Producer(np.arange(4.0))
    assert interop.from_dlpack(fx, plain.capsule()).base.buffer.owner.readonly is False
    iface = {"shape": (4,), "typestr": "<f8", "data": (plain.array.ctypes.data, True),
             "version": 3}
    assert interop.from_cuda_array_interface(fx, iface).base.buffer.owner.readonly is True
    assert cai.parse_interface({**iface, "data": (1, False)}).readonly is False


# --- dtypes both ways, and one consumption ---------------------------------------------------

@pytest.mark.parametrize("dtype,code,bits", [(DType.BOOL, 6, 8), (DType.BFLOAT16, 4, 16)],
                         ids=["bool", "bfloat16"])
def test_bool_and_bfloat16_both_ways(fx, dtype, code, bits):
    from reference.dlpack_fakes import Producer

    values = np.array([1, 0, 1, 1], dtype.numpy)
    t = fx.tensor(values)
    capsule = t.__dlpack__(stream=-1, max_version=(1, 0))
    m = dlpack.DLManagedTensorVersioned.from_address(dlpack.parse_capsule(capsule).managed)
    assert (m.dl_tensor.dtype.code, m.dl_tensor.dtype.bits, m.dl_tensor.dtype.lanes) == (
        code, bits, 1)
    back = interop.from_dlpack(fx, Producer(values, code=code, bits=bits).capsule())
    assert back.dtype is dtype
    assert read(back.data_ptr(), dtype, 4).tobytes() == values.tobytes()


@pytest.mark.parametrize("max_version,used", [((1, 0), b"used_dltensor_versioned"),
                                              (None, b"used_dltensor")],
                         ids=["versioned", "legacy"])
def test_capsule_is_taken_once(fx, max_version, used):
    t = fx.tensor(np.arange(3.0))
    capsule = t.__dlpack__(stream=-1, max_version=max_version)
    adopted = interop.from_dlpack(fx, capsule)
    assert dlpack._capsule_get_name(capsule) == used
    with pytest.raises(ValidationError, match="consumed already"):
        interop.from_dlpack(fx, capsule)
    assert live_exports(t) == 1
    del adopted
    gc.collect()
    assert live_exports(t) == 0  # our deleter ran, once
    del capsule
    gc.collect()
    assert live_exports(t) == 0


def test_struct_layouts_agree_with_the_header_structures():
    """The packed layouts the hot paths use describe the same bytes as the Structures."""
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    for versioned in (True, False):
        m = dlpack.DLManagedTensorVersioned() if versioned else dlpack.DLManagedTensor()
        shape = (ctypes.c_int64 * 2)(2, 3)
        t = m.dl_tensor
        t.data, t.device, t.ndim = arr.ctypes.data, dlpack.DLDevice(2, 3), 2
        t.dtype = dlpack.DLDataType(2, 32, 1)
        t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = 16
        if versioned:
            m.version, m.flags = dlpack.DLPackVersion(1, 1), 3
        layout = dlpack.VERSIONED if versioned else dlpack.LEGACY
        assert layout.size == ctypes.sizeof(m)
        fields = layout.unpack_from(dlpack.MEMORY, ctypes.addressof(m))
        tensor = fields[5:15] if versioned else fields[:10]
        assert tensor == (arr.ctypes.data, 2, 3, 2, 2, 32, 1, ctypes.addressof(shape), 0, 16)
        if versioned:
            assert fields[:2] == (1, 1) and fields[4] == 3
        assert dlpack.ints_at(ctypes.addressof(shape), 2) == (2, 3)
