"""Checks of plain Python values that several layers share: the configurations
(``configs/``), the argument checks (``shapes/``, which hands them on) and the raw
session. Pure Python, no device, below all of them.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

import numpy as np

from .errors import ValidationError

__all__ = ["int_sequence"]


def int_sequence(values: object, op: str, what: str) -> tuple[int, ...]:
    """``values`` as a tuple of ints, in the order written: a sequence (list, tuple,
    range, ...) of ints or a 1-d integer ndarray. Sets and dicts (no order of their own),
    iterators (read once), str/bytes and bools (also ``np.bool_``) raise ValidationError."""
    if type(values) is tuple or type(values) is list:  # the usual case: plain ints
        for v in values:
            if type(v) is not int:
                break
        else:
            return tuple(values)
    bad = f"{what} must be a sequence of ints (a list, tuple or 1-d integer array; got " \
          f"{values!r:.200})"
    if isinstance(values, np.ndarray):
        if values.ndim != 1 or (values.dtype.kind not in "iu" and values.size):
            raise ValidationError(bad, op=op)
        return tuple(int(v) for v in values.tolist())
    if isinstance(values, (str, bytes, bytearray)) or not isinstance(values, Sequence):
        raise ValidationError(bad, op=op)
    out = []
    for v in values:
        if isinstance(v, (bool, np.bool_)):
            raise ValidationError(bad, op=op)
        try:
            out.append(operator.index(v))
        except TypeError:
            raise ValidationError(bad, op=op) from None
    return tuple(out)
