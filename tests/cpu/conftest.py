"""The CPU tier: the NVRTC builds of the compile tests (``reference/nvrtc_builds.py``)
start in worker processes as soon as collection ends, in the order of the tests, and
the workers stop when the run ends; so do the host compiler's builds of the emulated
kernels that the selected test modules declared (``reference/cuda_emu.py``, ``ahead``).
The tests that read NVRTC builds run after all the others (in their own order), so that
this process runs the rest of the tier while the workers compile, instead of waiting
for the builds in the middle of the run.
The fixtures ``nccl`` (a fake NCCL) and ``two`` (a communicator over two fake sessions)
serve the collectives' tests, ``driver`` (recorders of the driver's graph calls,
``reference/fake_graph.py``) the graph tests, and ``capture_model`` (sessions and capture
scopes over the context-stack model) the capture and hostile-guard tests."""

from __future__ import annotations

import gc
import inspect

import pytest
from reference import cuda_emu, nvrtc_builds
from reference.fake_context import HostMemory
from reference.fake_graph import capture_model, driver  # noqa: F401 - graph test fixtures
from reference.fake_sessions import Ctx, Session, install

from tenferro_cuda.collectives import Communicator


def _builds_of(item: pytest.Item) -> list[nvrtc_builds.Build]:
    builds_of = getattr(getattr(item, "function", None), "nvrtc_builds_of", None)
    if builds_of is None or item.get_closest_marker("skip") is not None:
        return []
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    out = builds_of(**{name: params[name] for name in inspect.signature(builds_of).parameters})
    return out if isinstance(out, list) else [out]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    waits = [bool(_builds_of(item)) for item in items]
    items[:] = ([item for item, w in zip(items, waits) if not w]
                + [item for item, w in zip(items, waits) if w])


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    nvrtc_builds.prefetch(b for item in session.items for b in _builds_of(item))
    cuda_emu.start_ahead(getattr(getattr(item, "module", None), "__name__", "")
                         for item in session.items)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    nvrtc_builds.shutdown()
    cuda_emu.shutdown()


# --- the collectives' fakes (test_collectives*.py) ---------------------------------------

@pytest.fixture
def nccl(monkeypatch):
    lib = install(monkeypatch)
    yield lib
    gc.collect()  # communicators a test left open are aborted into this fake, not the next


@pytest.fixture
def two(nccl):
    memory = HostMemory()
    sessions = [Session(Ctx(memory, 0)), Session(Ctx(memory, 1))]
    comm = Communicator.from_sessions(sessions)
    nccl.log.clear()
    yield comm, sessions, nccl
    if not comm.closed:
        comm.abort()
