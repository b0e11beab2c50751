"""Interop while PyTorch captures a CUDA graph on another thread.

PyTorch captures in global mode by default: while it does, CUDA refuses stream and event
queries from every thread of the process and invalidates the capture, but allows event
records and waits. An export that orders a legacy-stream consumer after our stream, the
release that orders our stream after the legacy stream, and an import ordered after the
legacy stream use only those, so PyTorch's capture survives them and its graph replays.
(A release of adopted memory asks whether our stream is idle; during such a capture CUDA
refuses the question, and the release waits for a later drain: ``_foreign._idle``, tested
on the CPU.)
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from gpu_util import down, up

from tenferro_cuda import _foreign, dlpack

N = 1 << 16


@pytest.fixture(scope="module")
def torch(torch_cuda):
    return torch_cuda


class _Capture:
    """PyTorch captures ``x += 1`` twice into a graph on a thread of its own, and waits
    between the two for ``go_on`` (the test's interop runs then)."""

    def __init__(self, torch) -> None:
        self.torch = torch
        self.x = torch.zeros(N, device="cuda:0")
        self.graph = torch.cuda.CUDAGraph()
        self.started, self.go_on = threading.Event(), threading.Event()
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run)

    def _run(self) -> None:
        try:
            with self.torch.cuda.graph(self.graph):  # capture_error_mode="global"
                self.x.add_(1)
                self.started.set()
                self.go_on.wait(30)
                self.x.add_(1)
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.errors.append(exc)
        finally:
            self.started.set()

    def __enter__(self):
        self.torch.cuda.synchronize()
        self.thread.start()
        assert self.started.wait(30)
        return self

    def __exit__(self, *exc) -> None:
        self.go_on.set()
        self.thread.join()

    def replays(self) -> bool:
        """Whether the capture survived and its graph adds 2."""
        if self.errors:
            return False
        self.graph.replay()
        self.torch.cuda.synchronize()
        return bool((self.x == 2).all())


def _quiet(s) -> None:
    """Nothing left that would ask a stream whether it is idle during the capture: no
    garbage with a release to run, no parked release, an event in the pool."""
    s.synchronize()
    gc.collect()
    _foreign.drain()
    assert _foreign.parked_count() == 0
    capsule = up(s, np.zeros(4, np.float32)).__dlpack__(stream=1, max_version=(1, 0))
    owner = dlpack.consume(capsule, dlpack.parse_capsule(capsule))
    del owner, capsule
    s.synchronize()


def test_an_export_and_its_release_leave_pytorch_capture_intact(s, torch):
    want = np.arange(N, dtype=np.float32)
    t = up(s, want)
    _quiet(s)
    with _Capture(torch) as capture:
        capsule = t.__dlpack__(stream=1, max_version=(1, 0))  # an event: ours -> stream 1
        owner = dlpack.consume(capsule, dlpack.parse_capsule(capsule))
        del owner  # the deleter: an event, stream 1 -> ours
    assert capture.replays(), capture.errors
    y = torch.from_dlpack(t)  # and the tensor is still whole
    np.testing.assert_array_equal(y.cpu().numpy(), want)


def test_an_import_ordered_after_the_legacy_stream_leaves_pytorch_capture_intact(s, torch):
    y = torch.arange(N, device="cuda:0", dtype=torch.float32)
    capsule = y.__dlpack__()
    _quiet(s)
    with _Capture(torch) as capture:
        t = s.from_dlpack(capsule, stream=1)  # an event: stream 1 -> ours
    assert capture.replays(), capture.errors
    np.testing.assert_array_equal(down(s, t), np.arange(N, dtype=np.float32))
