"""Building views of a tensor -- ``view(shape, strides, offset)``, basic indexing,
``permute`` -- gives a view inside the base or raises the library's typed
``ValidationError`` (docs/errors.md: a shape of ``"ab"``, a bool where an int is meant, a
set where an ordered sequence is meant, ``transpose(x, (True, False))`` are
``invalid_argument``; an extent of 2**63 or more is ``overflow``, also for an empty
shape). Never a raw ValueError/TypeError/OverflowError, never a silently reinterpreted
argument."""

from __future__ import annotations

import numpy as np
import pytest

from tenferro_cuda.errors import ValidationError
from tenferro_cuda.tensor import Tensor

T = Tensor.from_numpy(np.arange(12.0).reshape(3, 4))


# --- __getitem__ -----------------------------------------------------------------------

@pytest.mark.parametrize("key", [
    slice(None, None, 0),                 # numpy: "slice step cannot be zero"
    (slice(None), slice(1, None, 0)),
], ids=["step0", "step0-axis1"])
def test_getitem_zero_step_is_validation_error(key):
    with pytest.raises(ValidationError):
        T[key]


@pytest.mark.parametrize("key", [
    slice("a", None), slice(1.5, None), slice(None, None, 1.0), (0, slice(None, "x")),
], ids=["str-start", "float-start", "float-step", "str-stop-axis1"])
def test_getitem_non_integer_slice_bounds_are_validation_error(key):
    with pytest.raises(ValidationError):
        T[key]


@pytest.mark.parametrize("key", [
    np.array([0, 1]), (np.array([0, 1]), 0), (0, np.array([True, False, True, False])),
], ids=["int-array", "int-array-in-tuple", "bool-mask-in-tuple"])
def test_getitem_array_keys_are_validation_error(key):
    # views cannot gather: the documented refusal is ValidationError("unsupported index"),
    # as for a list key (Ellipsis is found by identity: comparing an array with == would
    # ask for its truth value).
    with pytest.raises(ValidationError):
        T[key]


# --- view(shape, strides, offset) ------------------------------------------------------

def test_view_shape_string_is_validation_error():
    # docs/errors.md names exactly this: "a shape of "ab"" is invalid_argument
    with pytest.raises(ValidationError):
        T.view("ab", (1, 1))


def test_view_shape_digit_string_is_not_a_shape():
    # "12" is not a shape either (not (1, 2))
    with pytest.raises(ValidationError):
        T.view("12", (4, 1))


@pytest.mark.parametrize(("shape", "strides", "offset"), [
    ([True, 2], (1, 1), 0),          # a bool where an int is meant
    ((2,), (True,), 0),
    ((2,), (1,), True),
    ((2.9,), (1,), 0),               # floats (not truncated)
    ((2,), (1.9,), 0),
    ((2,), (1,), 2.7),
    ((2,), (1,), "3"),               # a string offset (not parsed)
    ({2, 3}, (4, 1), 0),             # sets have no order
    ((2, 2), {1, 4}, 0),
], ids=["bool-extent", "bool-stride", "bool-offset", "float-extent", "float-stride",
        "float-offset", "str-offset", "set-shape", "set-strides"])
def test_view_wrongly_typed_arguments_are_rejected(shape, strides, offset):
    with pytest.raises(ValidationError):
        T.view(shape, strides, offset)


@pytest.mark.parametrize(("shape", "strides", "offset"), [
    ((2,), None, 0),
    ((2,), ("a",), 0),
    ((2,), (1,), None),
    ((2,), (1,), float("inf")),
    ((2,), (1,), float("nan")),
    ((float("inf"),), (0,), 0),
    ((float("nan"),), (0,), 0),
    ((2,), (float("inf"),), 0),
], ids=["strides-None", "stride-str", "offset-None", "offset-inf", "offset-nan",
        "extent-inf", "extent-nan", "stride-inf"])
def test_view_garbage_arguments_raise_validation_error_not_raw(shape, strides, offset):
    with pytest.raises(ValidationError):
        T.view(shape, strides, offset)


@pytest.mark.parametrize(("shape", "strides"), [
    ((0, 2 ** 70), (1, 1)),
    ((2 ** 63, 0), (1, 1)),
], ids=["empty-2**70", "empty-2**63"])
def test_empty_view_with_extent_beyond_int64_is_overflow(shape, strides):
    # docs/errors.md, kind overflow: "a shape does not fit int64 (an extent ... of 2**63 or
    # more; also for an empty shape)"; such a view cannot even be exported (see
    # test_zz_review_tensor_protocols::test_dlpack_of_empty_view_with_huge_extent)
    with pytest.raises(ValidationError) as info:
        T.view(shape, strides, 0)
    assert info.value.kind == "overflow"


def test_a_view_of_any_rank_is_a_view_and_ops_bound_the_rank():
    """A host tensor may have any rank numpy allows, and so may its views; the ops refuse
    more than 8 axes (docs/errors.md, kind rank_mismatch) when given one."""
    from tenferro_cuda.shapes import check_rank

    v = T.view((1,) * 9, (0,) * 9, 0)
    assert v.shape == (1,) * 9
    with pytest.raises(ValidationError) as info:
        check_rank(v.shape, "reduce_sum")
    assert info.value.kind == "rank_mismatch"


# --- permute / T -------------------------------------------------------------------------

@pytest.mark.parametrize("perm", [
    (True, False),      # docs/errors.md example: transpose(x, (True, False))
    "10",               # a string is not a sequence of ints
    (1.7, 0.2),         # floats (not truncated to (1, 0))
    {1, 0},             # a set has no order
], ids=["bools", "str", "floats", "set"])
def test_permute_wrongly_typed_perm_is_rejected(perm):
    with pytest.raises(ValidationError):
        T.permute(perm)


@pytest.mark.parametrize("perm", [None, ["a", "b"], 5], ids=["None", "strs", "int"])
def test_permute_garbage_is_validation_error_not_raw(perm):
    with pytest.raises(ValidationError):
        T.permute(perm)


# --- non-empty broadcast views whose extent/size does not fit int64 --------------------
# A stride-0 axis addresses one element however long it is, so the bounds check passes
# for any extent; nothing checks that the extent (or the byte size) fits int64, and the
# view then breaks every consumer with a raw error: numpy() -> OverflowError ("Python
# int too large to convert to C long"), (2**62, 2**62) -> numpy's bare ValueError
# ("array is too big"), __dlpack__ -> struct.error.

@pytest.mark.parametrize(("shape", "strides"), [
    ((2 ** 63,), (0,)),
    ((2 ** 70,), (0,)),
    ((2 ** 62, 2 ** 62), (0, 0)),     # each extent fits, the element/byte count does not
], ids=["2**63", "2**70", "2**62x2**62"])
def test_broadcast_view_beyond_int64_is_overflow(shape, strides):
    with pytest.raises(ValidationError) as info:
        T.view(shape, strides, 0)
    assert info.value.kind == "overflow"


@pytest.mark.parametrize(("shape", "strides"), [((2 ** 63,), (0,)), ((2 ** 62, 2 ** 62), (0, 0))],
                         ids=["2**63", "2**62x2**62"])
def test_numpy_of_accepted_view_never_raises_raw(shape, strides):
    try:
        v = T.view(shape, strides, 0)
    except ValidationError:
        return
    try:
        v.numpy()
    except (ValidationError, MemoryError):
        pass


def test_view_integer_offsets_of_any_integer_type_are_taken():
    """A numpy integer offset is an int (operator.index); np.bool_ is not."""
    v = T.view((2,), (1,), np.int64(3))
    assert v.offset == 3 and type(v.offset) is int
    assert T.view((2,), (1,), 5).numpy().tolist() == [5.0, 6.0]
    with pytest.raises(ValidationError, match="offset"):
        T.view((2,), (1,), np.bool_(True))
