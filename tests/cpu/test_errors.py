"""The exception hierarchy of tenferro_cuda.errors (DESIGN §6): bases, fields, pickling."""

from __future__ import annotations

import pickle

import pytest

from tenferro_cuda import errors as E

# (class, keyword fields, builtins/tenferro bases it must have, bases it must NOT have)
HIERARCHY = [
    (E.ValidationError, {"kind": "shape_mismatch"}, (ValueError,), (TypeError, RuntimeError)),
    (E.UnsupportedDTypeError, {}, (TypeError,), (ValueError, RuntimeError)),
    (E.UnsupportedDTypeConversionError, {}, (TypeError,), (ValueError, E.UnsupportedDTypeError)),
    (E.UnsupportedError, {}, (NotImplementedError, RuntimeError), (ValueError, TypeError)),
    (E.RuntimeStateError, {}, (RuntimeError,), (E.BackendSourceError, ValueError)),
    (E.SessionEntryError, {"kind": "contended"}, (E.RuntimeStateError, RuntimeError),
     (E.BackendSourceError,)),
    (E.BackendSourceError, {}, (RuntimeError,), (E.RuntimeStateError, MemoryError)),
    (E.OutOfMemoryError, {"requested_bytes": 1 << 40},
     (E.BackendSourceError, MemoryError, RuntimeError), (E.ContextLostError,)),
    (E.CompileError,
     {"log": "x.cu(3): error: expected a ';'", "source_name": "x.cu",
      "options": ("-std=c++17", "--gpu-architecture=sm_90")},
     (E.BackendSourceError, RuntimeError), (MemoryError,)),
    (E.ContextLostError, {}, (E.BackendSourceError, RuntimeError), (MemoryError,)),
    (E.CudaDeviceError, {}, (RuntimeError,), (E.BackendSourceError, E.RuntimeStateError)),
]
IDS = [case[0].__name__ for case in HIERARCHY]


def _make(cls, fields, op="myop"):
    return cls("something went wrong", op=op, **fields)


@pytest.mark.parametrize(("cls", "fields", "bases", "not_bases"), HIERARCHY, ids=IDS)
def test_bases(cls, fields, bases, not_bases):
    err = _make(cls, fields)
    assert isinstance(err, E.TenferroError)
    assert isinstance(err, Exception)
    for base in bases:
        assert isinstance(err, base), f"{cls.__name__} should be a {base.__name__}"
    for base in not_bases:
        assert not isinstance(err, base), f"{cls.__name__} must not be a {base.__name__}"


@pytest.mark.parametrize(("cls", "fields", "bases", "not_bases"), HIERARCHY, ids=IDS)
def test_caught_by_builtin_base(cls, fields, bases, not_bases):
    with pytest.raises(bases[0]):
        raise _make(cls, fields)


@pytest.mark.parametrize(("cls", "fields", "bases", "not_bases"), HIERARCHY, ids=IDS)
def test_fields_kept(cls, fields, bases, not_bases):
    err = _make(cls, fields)
    assert err.op == "myop"
    for name, value in fields.items():
        assert getattr(err, name) == value


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize(("cls", "fields", "bases", "not_bases"), HIERARCHY, ids=IDS)
def test_pickle_round_trip(cls, fields, bases, not_bases, protocol):
    err = _make(cls, fields)
    back = pickle.loads(pickle.dumps(err, protocol=protocol))
    assert type(back) is cls
    assert back.args == err.args
    assert str(back) == str(err)
    assert back.op == "myop"
    for name, value in fields.items():
        assert getattr(back, name) == value


@pytest.mark.parametrize(("cls", "fields", "bases", "not_bases"), HIERARCHY, ids=IDS)
def test_str_includes_op(cls, fields, bases, not_bases):
    err = _make(cls, fields, op="dot_general")
    assert str(err).startswith("dot_general: ")
    assert "something went wrong" in str(err)


@pytest.mark.parametrize(("cls", "fields", "bases", "not_bases"), HIERARCHY, ids=IDS)
def test_str_without_op_is_message(cls, fields, bases, not_bases):
    assert str(_make(cls, fields, op="")) == "something went wrong"


@pytest.mark.parametrize("kind", E.VALIDATION_KINDS)
def test_validation_kinds(kind):
    err = E.ValidationError("bad", op="add", kind=kind)
    assert err.kind == kind
    assert pickle.loads(pickle.dumps(err)).kind == kind


def test_validation_default_kind():
    assert E.ValidationError("bad").kind == "invalid_argument"


def test_validation_unknown_kind_rejected():
    with pytest.raises(ValueError, match="unknown validation kind"):
        E.ValidationError("bad", kind="not_a_kind")


@pytest.mark.parametrize("kind", ["reentered", "contended"])
def test_session_entry_kinds(kind):
    err = E.SessionEntryError("busy", op="cuda_exec_session", kind=kind)
    assert pickle.loads(pickle.dumps(err)).kind == kind


def test_compile_error_options_are_a_tuple():
    err = E.CompileError("failed", log="L", options=["-a", "-b"])
    assert err.options == ("-a", "-b")
    back = pickle.loads(pickle.dumps(err))
    assert (back.log, back.options) == ("L", ("-a", "-b"))


NATIVE = [E.CudaError, E.NvrtcError, E.CublasError, E.NcclError]


@pytest.mark.parametrize("cls", NATIVE, ids=[c.__name__ for c in NATIVE])
def test_native_error_pickles_with_code(cls):
    err = cls("cuModuleLoadData", 200, "CUDA_ERROR_INVALID_IMAGE")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert (back.api, back.code, back.name) == ("cuModuleLoadData", 200, "CUDA_ERROR_INVALID_IMAGE")
    assert str(back) == "cuModuleLoadData failed: CUDA_ERROR_INVALID_IMAGE (200)"
    assert not isinstance(err, E.TenferroError)


def test_all_exports_exist():
    for name in E.__all__:
        assert hasattr(E, name), name


def test_no_builtin_shadowed():
    import builtins

    shadowed = [name for name in E.__all__ if hasattr(builtins, name)]
    assert shadowed == []
