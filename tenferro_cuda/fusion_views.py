"""Views that feed a fusion plan without materialising anything.

``broadcast_view(t, shape, dims)`` is ``broadcast_in_dim`` as a ``TensorView``: operand
axis ``i`` becomes output axis ``dims[i]`` (StableHLO rules: ``dims`` has one entry per
operand axis, each in range and distinct; the operand extent equals the output extent or
is 1), every other output axis and every broadcast extent-1 axis gets stride 0. No data
moves: the view addresses ``t``'s elements. Ops that read (``*_read``, fusion) accept it;
as an output it would write elements more than once, which the ``_into`` ops reject.

    bias = broadcast_view(b, (rows, cols), (1,))          # b: (cols,)
    out, = s.execute_elementwise_fusion([x, bias], plan)  # x + bias in one pass
"""

from __future__ import annotations

from collections.abc import Sequence

from .errors import ValidationError
from .shapes.structural import broadcast_in_dim, broadcast_strides
from .tensor import TensorView, _Strided

__all__ = ["broadcast_view"]


def broadcast_view(t: _Strided, shape: Sequence[int], dims: Sequence[int]) -> TensorView:
    """A stride-0 view of ``t`` broadcast to ``shape`` along ``dims``.

    Parameters
    ----------
    t : Tensor or TensorView
        The operand (device or host).
    shape : sequence of int
        The output shape.
    dims : sequence of int
        ``dims[i]`` is the output axis of operand axis ``i``.

    Returns
    -------
    TensorView
        A view of ``t``'s storage with ``shape`` (stride 0 on broadcast axes).

    Raises
    ------
    ValidationError
        ``t`` is not a tensor or view; ``dims`` of the wrong length, out of range or
        repeated; an operand extent that is neither 1 nor the output extent.
    """
    op = "broadcast_view"
    if not isinstance(t, _Strided):
        raise ValidationError(f"expected a Tensor or TensorView (got {type(t).__name__})",
                              op=op)
    out, d = broadcast_in_dim(t.shape, shape, dims, op)
    return TensorView(t.base, out, broadcast_strides(t.shape, t.strides, out, d), t.offset)
