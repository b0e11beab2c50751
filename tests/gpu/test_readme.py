"""The README's examples run as written on the GPU (tests/readme_blocks.py extracts them);
what they print is checked against numpy."""

from __future__ import annotations

import numpy as np
from readme_blocks import block


def _run(heading: str) -> list:
    printed: list = []
    code = compile(block(heading), f"README: {heading}", "exec")
    exec(code, {"__name__": "__readme__", "print": lambda *a: printed.append(a)})
    return printed


def test_library_user_example():
    (out,), = _run("For library users")
    y = np.arange(6.0).reshape(2, 3).T
    want = np.exp(y) * y + np.arange(3.0).reshape(3, 1)
    assert out.shape == (3, 2) and np.allclose(out, want, rtol=1e-14, atol=0)


def test_kernel_author_example():
    (out,), = _run("For kernel authors")
    assert np.array_equal(out, np.full(3, 2.0, np.float32))
