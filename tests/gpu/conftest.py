"""GPU-tier fixtures. Every test here is marked ``gpu``; tests/conftest.py skips them
without a device."""

from __future__ import annotations

import numpy as np
import pytest

import tenferro_cuda as tc


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "/tests/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)


@pytest.fixture
def s():
    """An open session on device 0; synchronizes (raising deferred errors) at the end."""
    with tc.cuda_exec_session(0) as session:
        yield session
        session.synchronize()


@pytest.fixture
def rng():
    return np.random.default_rng(12345)
