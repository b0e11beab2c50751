"""Bad inputs to the raw and kernel sessions, the session's ``supports`` and ``KernelArg``
raise a typed ``TenferroError`` before anything is allocated, compiled, loaded or launched
(docs/errors.md), and nothing is silently coerced (an int for bytes, one string for a list
of options). Runs the real session, sub-session scopes and raw / kernel sessions over the
fake context stack; what would reach the device is recorded."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest
from reference.fake_ctx_stack import Ctx, install
from reference.fake_graph import FakeCtx

import tenferro_cuda as tc
from tenferro_cuda import _driver
from tenferro_cuda import raw as raw_module
from tenferro_cuda import session as session_module
from tenferro_cuda.errors import RuntimeStateError, TenferroError, ValidationError
from tenferro_cuda.exec import guard
from tenferro_cuda.raw import Function, KernelArg, LaunchConfig, Module

CONTEXTS = {0: Ctx(0x1000), 1: Ctx(0x1100)}


class _Reached(Exception):
    """Raised by the recorders: the bad input got past validation to device work."""


class Runtime:
    def __init__(self, ordinal: int) -> None:
        self.ordinal = ordinal
        self.context = CONTEXTS[ordinal]
        self.context_id = int(self.context)
        self._tls = threading.local()
        self.loaded: list = []

    def check_alive(self, op: str = "") -> None:
        pass

    def current(self):
        return guard.within(self.context, self.context_id)

    def load_module(self, image: bytes, op: str = ""):
        self.loaded.append(image)
        return SimpleNamespace(image=image, ordinal=self.ordinal)

    def exec_context(self):
        ctx = getattr(self._tls, "ctx", None)
        if ctx is None:
            ctx = self._tls.ctx = FakeCtx()
            ctx.runtime, ctx.context, ctx.context_id = self, self.context, self.context_id
            ctx.ordinal, ctx.session_open = self.ordinal, False
            ctx.info = SimpleNamespace(arch="sm_90", max_threads_per_block=1024,
                                       max_shared_per_block=48 << 10)
            ctx.device_work = []

            def reached(what):
                def record(*args, **kwargs):
                    ctx.device_work.append((what, args))
                    raise _Reached(what)
                return record

            ctx.alloc = reached("alloc")
            ctx.source_function = reached("source_function")
            ctx.launches = SimpleNamespace(get=reached("launch preparation"))
        return ctx


@pytest.fixture
def model(monkeypatch, driver):
    m = install(monkeypatch)
    runtimes = {o: Runtime(o) for o in CONTEXTS}
    monkeypatch.setattr(session_module.CudaRuntime, "get",
                        classmethod(lambda cls, o=0: runtimes[o]))
    return m


def _assert_typed_and_nothing_done(call, ctx, loaded=None):
    try:
        call()
    except TenferroError:
        pass
    except _Reached as exc:
        pytest.fail(f"the bad input reached device work ({exc}) instead of a TenferroError")
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"untyped {type(exc).__name__}: {exc}")
    else:
        pytest.fail("the bad input was accepted")
    assert ctx.device_work == []
    if loaded is not None:
        assert loaded == []


# --- RawSession ------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [16, None, 1.5], ids=["int", "None", "float"])
def test_load_ptx_rejects_what_is_not_text_or_bytes(model, bad):
    """raw.py: ``bytes(ptx)`` of an int is that many zero bytes, handed to
    cuModuleLoadData (``load_ptx(2**40)`` tries to build a 1 TiB image on the host)."""
    with tc.cuda_exec_session(0) as s, s.raw("test") as raw:
        rt = s._rt
        _assert_typed_and_nothing_done(lambda: raw.load_ptx(bad), s._ctx, rt.loaded)


@pytest.mark.parametrize("bad", [16, "text"], ids=["int", "str"])
def test_load_cubin_rejects_what_is_not_bytes(model, bad):
    with tc.cuda_exec_session(0) as s, s.raw("test") as raw:
        _assert_typed_and_nothing_done(lambda: raw.load_cubin(bad), s._ctx, s._rt.loaded)


@pytest.mark.parametrize("bad", [3, -1, "ab"], ids=["int", "negative", "str"])
def test_upload_bytes_rejects_what_is_not_bytes(model, monkeypatch, bad):
    """``upload_bytes(3)`` uploads three zero bytes (``bytes(3)``); ``upload_bytes(-1)``
    is a bare ValueError."""
    uploads = []

    def upload(self, a):
        uploads.append(a)
        raise _Reached("upload_host_tensor")

    monkeypatch.setattr(session_module.CudaExecSession, "upload_host_tensor", upload)
    with tc.cuda_exec_session(0) as s, s.raw("test") as raw:
        _assert_typed_and_nothing_done(lambda: raw.upload_bytes(bad), s._ctx, uploads)


@pytest.mark.parametrize("bad", [2.5, "16", True], ids=["float", "str", "bool"])
def test_alloc_bytes_rejects_what_is_not_an_int(model, bad):
    """``alloc_bytes`` runs ``int(nbytes)`` first: 2.5 allocates 2 bytes, "16" 16."""
    with tc.cuda_exec_session(0) as s, s.raw("test") as raw:
        _assert_typed_and_nothing_done(lambda: raw.alloc_bytes(bad), s._ctx)


def test_compile_nvrtc_rejects_options_given_as_one_string(model, monkeypatch):
    """``tuple("-O3")`` is three options '-', 'O', '3' handed to NVRTC."""
    compiled = []

    def compile_cached(*args, **kwargs):
        compiled.append(args)
        raise _Reached("compile_cached")

    monkeypatch.setattr(raw_module, "compile_cached", compile_cached)
    with tc.cuda_exec_session(0) as s, s.raw("test") as raw:
        _assert_typed_and_nothing_done(
            lambda: raw.compile_nvrtc("extern \"C\" __global__ void k() {}", "-O3"),
            s._ctx, compiled)


def test_launch_rejects_args_that_are_not_a_sequence(model):
    with tc.cuda_exec_session(0) as s, s.raw("test") as raw:
        fn = Function(object(), Module(object(), s._ctx, raw._scope), "k")
        _assert_typed_and_nothing_done(
            lambda: raw.launch(fn, LaunchConfig(1, 1), KernelArg.i32(1)), s._ctx)


def test_launch_rejects_a_function_of_another_devices_session(model, monkeypatch):
    """raw.py says "fn must be a Function lent by this scope", but only checks that the
    Function's own scope is alive on this thread: a kernel loaded into device 1's context
    goes on to launch preparation on device 0's stream."""
    monkeypatch.setattr(_driver, "module_get_function",
                        lambda module, name, op="": ("CUfunction", module.ordinal, name))
    with tc.cuda_exec_session(0) as s0, tc.cuda_exec_session(1) as s1:
        with s0.raw("test.dev0") as raw0, s1.raw("test.dev1") as raw1:
            fn1 = raw1.load_ptx(".version 8.0").function("k")
            _assert_typed_and_nothing_done(
                lambda: raw0.launch(fn1, LaunchConfig(1, 1), [KernelArg.i32(1)]), s0._ctx)


def test_module_function_rejects_a_name_that_is_not_text(model):
    with tc.cuda_exec_session(0) as s, s.raw("test") as raw:
        mod = raw.load_ptx(".version 8.0")
        _assert_typed_and_nothing_done(lambda: mod.function(5), s._ctx)


def test_sub_session_op_name_must_be_text(model):
    """``s.raw(op)`` / ``s.kernels(op)`` take ``op: str`` (the name every error carries);
    anything is accepted."""
    with tc.cuda_exec_session(0) as s:
        for make in (s.raw, s.kernels):
            _assert_typed_and_nothing_done(lambda make=make: make(12345).__enter__(), s._ctx)


# --- KernelSession ---------------------------------------------------------------------

def test_kernel_session_compile_rejects_one_string_of_names(model):
    """``ks.compile(src, "scale")`` compiles the name expressions 's', 'c', 'a', 'l', 'e'."""
    with tc.cuda_exec_session(0) as s, s.kernels("test") as ks:
        _assert_typed_and_nothing_done(
            lambda: ks.compile("extern \"C\" __global__ void scale() {}", "scale"), s._ctx)


# --- session and KernelArg ---------------------------------------------------------------

@pytest.mark.parametrize("bad", ["no_such_capability", 7], ids=["str", "int"])
def test_supports_an_unknown_capability_is_a_typed_error(model, bad):
    """``GpuExtensionCapability(bad)`` raises the enum's bare ValueError."""
    with tc.cuda_exec_session(0) as s:
        with pytest.raises(TenferroError):
            s.supports(bad)


@pytest.mark.parametrize("bad", [4096.5, "4096"], ids=["float", "str"])
def test_kernel_arg_pointer_rejects_what_is_not_an_address(bad):
    """``KernelArg.pointer`` runs ``int(p)``: 4096.5 packs 4096, "4096" packs 4096."""
    with pytest.raises(TenferroError):
        KernelArg.pointer(bad)


@pytest.mark.parametrize("bad", [5, "abc"], ids=["int", "str"])
def test_kernel_arg_raw_rejects_what_is_not_bytes(bad):
    """``KernelArg.raw(5)`` is five zero bytes; ``KernelArg.raw("abc")`` a bare TypeError."""
    with pytest.raises(TenferroError):
        KernelArg.raw(bad)


# --- the kernel session ---------------------------------------------------------------

LIMITS = dict(max_threads_per_block=1024, max_block_dims=(1024, 1024, 64),
              max_grid_dims=(2**31 - 1, 65535, 65535), max_shared_per_block=48 << 10)


def _kernels(s):
    info = s._ctx.info
    for k, v in LIMITS.items():
        setattr(info, k, v)
    return s.kernels("test.ks")


@pytest.mark.parametrize("n, block", [(10, 2048), (10, 1 << 20), (1 << 45, 1)],
                         ids=["block-2048", "block-1M", "grid-2**45"])
def test_grid_1d_respects_the_device_limits(model, n, block):
    """``grid_1d`` checks n and block for type and sign only: it returns LaunchConfigs
    of 2048-thread blocks or 2**45-block grids, which no device launches."""
    with tc.cuda_exec_session(0) as s, _kernels(s) as ks:
        try:
            config = ks.grid_1d(n, block)
        except ValidationError:
            return
        assert config.block[0] <= LIMITS["max_threads_per_block"] and \
            config.grid[0] <= LIMITS["max_grid_dims"][0], (
                f"grid_1d({n}, {block}) handed out {config}, beyond the device's limits")


@pytest.mark.parametrize("args", [(["copy"], "fill"), ("copy", ["fill"]),
                                  ({"copy": 1}, "fill")],
                         ids=["family-list", "entry-list", "family-dict"])
def test_function_with_unhashable_names_is_a_typed_error(model, args):
    """``family_of(family).entry(entry)`` catches KeyError only: a list or dict as the
    family or entry name escapes as a bare ``TypeError: unhashable type``."""
    with tc.cuda_exec_session(0) as s, _kernels(s) as ks:
        _assert_typed_and_nothing_done(lambda: ks.function(*args), s._ctx)


@pytest.mark.parametrize("shape", [(0, 2**70), (2**62, 2**62), (2**63,)],
                         ids=["empty-2**70", "bytes-2**124", "extent-2**63"])
@pytest.mark.parametrize("method", ["alloc_output", "alloc_zero_output"])
def test_alloc_output_overflowing_shape_is_refused_before_allocating(model, method, shape):
    """docs/errors.md kind ``overflow``: a shape that does not fit int64 (an extent, or the
    byte size, of 2**63 or more; also for an empty shape) is a ValidationError, as
    ``s.zeros((2**62, 4), float64)`` is. The kernel session's allocators hand such shapes
    to the allocator (an empty (0, 2**70) tensor is even made)."""
    with tc.cuda_exec_session(0) as s, _kernels(s) as ks:
        ctx = s._ctx
        try:
            getattr(ks, method)("float32", shape)
        except ValidationError as exc:
            assert exc.kind == "overflow"
        except Exception as exc:  # noqa: BLE001
            pytest.fail(f"{type(exc).__name__} ({exc}) instead of ValidationError(overflow);"
                        f" device work: {ctx.device_work}")
        else:
            pytest.fail("accepted")
        assert ctx.device_work == []


def test_everything_lent_refuses_after_the_scope_and_on_another_thread(model):
    """(passes) Every KernelSession method, and a Function it lent, raise
    RuntimeStateError after the scope and from another thread, before device work."""
    with tc.cuda_exec_session(0) as s:
        with _kernels(s) as ks:
            calls = {
                "function": lambda: ks.function("copy", "fill"),
                "compile": lambda: ks.compile("src", ["k"]),
                "alloc_output": lambda: ks.alloc_output("float32", (4,)),
                "alloc_zero_output": lambda: ks.alloc_zero_output("float32", (4,)),
                "scale_tensor_write": lambda: ks.scale_tensor_write(object(), 2),
                "grid_1d": lambda: ks.grid_1d(4),
                "launch": lambda: ks.launch(object(), tc.LaunchConfig(1, 1), []),
                "stream": lambda: ks.stream(),
            }
            errors = {}

            def other():
                for name, call in calls.items():
                    try:
                        call()
                    except RuntimeStateError:
                        continue
                    except Exception as exc:  # noqa: BLE001
                        errors[name] = exc
                    else:
                        errors[name] = "accepted"

            t = threading.Thread(target=other)
            t.start()
            t.join()
            assert errors == {}
        for call in calls.values():
            with pytest.raises(RuntimeStateError):
                call()
        assert s._ctx.device_work == []
