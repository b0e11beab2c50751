"""The session's public surface is statically visible and the facade is thin (DESIGN 9):

- every public method has a real signature (no ``*args``/``**kwargs``) and a docstring;
- ``_session_ops.pyi`` is exactly what ``tools/gen_stubs.py`` writes from the tables;
- each op method forwards to its family function with that function's parameters;
- the session derives from one table-built class, not a chain of family mixins.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from tenferro_cuda import _session_ops
from tenferro_cuda.errors import ValidationError
from tenferro_cuda.exec.entry import OUTPUT_PARAMETERS
from tenferro_cuda.session import CudaExecSession

STUB = Path(_session_ops.__file__).with_suffix(".pyi")
PUBLIC = sorted(n for n in dir(CudaExecSession) if not n.startswith("_"))
METHODS = dict(_session_ops.all_methods())


def test_stub_is_in_step_with_the_tables():
    assert STUB.is_file(), "run python tools/gen_stubs.py"
    assert STUB.read_text() == _session_ops.stub_text(), "run python tools/gen_stubs.py"


def test_stub_declares_every_op_method():
    text = STUB.read_text()
    for name in METHODS:
        assert f"    def {name}(self" in text, name


@pytest.mark.parametrize("name", PUBLIC)
def test_public_method_has_a_real_signature_and_a_docstring(name):
    attr = inspect.getattr_static(CudaExecSession, name)
    fn = attr.fget if isinstance(attr, property) else attr
    assert inspect.getdoc(fn), f"{name} has no docstring"
    if isinstance(attr, property):
        return
    params = inspect.signature(fn).parameters.values()
    assert not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in params), name
    code = fn.__code__
    assert code.co_varnames[:code.co_argcount + code.co_kwonlyargcount] == tuple(
        p.name for p in inspect.signature(fn).parameters.values()), \
        f"{name}: the function's own parameters differ from its signature"


@pytest.mark.parametrize("name", sorted(METHODS))
def test_op_method_forwards_to_its_family_function(name):
    method = getattr(CudaExecSession, name)
    fn = METHODS[name]
    assert method.__wrapped_op__ is fn
    want = list(inspect.signature(fn).parameters)[1:]  # after ctx
    assert list(inspect.signature(method).parameters)[1:] == want
    assert method.__doc__ == fn.__doc__


OUTPUTS = sorted((name, p.name) for name, fn in METHODS.items()
                 for p in list(inspect.signature(fn).parameters.values())[1:]
                 if p.name in OUTPUT_PARAMETERS)


def test_the_output_table_is_not_empty():
    assert {"add_into", "copy_read_into", "axpby_read_into_accum"} <= {n for n, _ in OUTPUTS}


@pytest.mark.parametrize("name,param", OUTPUTS)
def test_an_output_given_as_none_is_refused_before_anything(name, param):
    """A required output (``out``, ``dst``, the accumulated ``y``) given as None raises
    ValidationError naming it, before the session is even looked at (this one has no
    state at all): a family function may read None as "allocate"."""
    method = getattr(CudaExecSession, name)
    params = list(inspect.signature(method).parameters)[1:]
    session = object.__new__(CudaExecSession)
    args = [None if p == param else object() for p in params]
    with pytest.raises(ValidationError, match=f"{param} must be a Tensor") as raised:
        method(session, *args)
    assert raised.value.op == name


def test_the_session_is_a_thin_facade():
    bases = [c.__name__ for c in CudaExecSession.__mro__]
    assert bases == ["CudaExecSession", "SessionOps", "Authority", "object"]
    assert _session_ops.SessionOps.__bases__ == (object,)


def test_op_families_have_no_session_plumbing():
    """No family reaches the session through ``self`` any more."""
    ops = Path(_session_ops.__file__).parent / "ops"
    for path in ops.rglob("*.py"):
        text = path.read_text()
        for word in ("self._begin", "self._state", "self._rt", "self._resident",
                     "self._alloc", 'getattr(self, "'):
            assert word not in text, f"{path.relative_to(ops)} uses {word}"
