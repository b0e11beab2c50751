"""GPU-tier fixtures. Every test here is marked ``gpu``; tests/conftest.py skips them
without a device.

NVLink multicast (NVLS) stays off in every NCCL communicator these tests make: a program
that uses it can put a host's shared GPUs out of service, and nothing here needs it. JAX
allocates on demand (no preallocation).
"""

from __future__ import annotations

import os

os.environ["NCCL_NVLS_ENABLE"] = "0"  # before any communicator exists (NCCL reads it then)
# JAX (a reference and an interop peer here) takes 75 % of the GPU's memory when it first
# runs unless told not to, which starves the large tests and the subprocesses
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from context_util import contexts, empty_stack  # noqa: E402, F401 - the context tests'

import tenferro_cuda as tc  # noqa: E402


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


@pytest.fixture(scope="module")
def torch_cuda():
    """PyTorch with a CUDA device (the test is skipped without one)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA device")
    return torch
