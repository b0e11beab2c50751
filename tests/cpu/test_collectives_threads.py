"""The communicator's thread and lifetime rule covers every method, ``rank_of`` included
(docs/multi-gpu.md: from another thread, after ``close()`` or after one of its sessions
ended, every call raises RuntimeStateError)."""

from __future__ import annotations

import threading

import pytest

import tenferro_cuda as tc


def test_rank_of_from_another_thread_is_refused(two):
    comm, sessions, _ = two
    box = {}

    def other():
        try:
            box["value"] = comm.rank_of(sessions[1])
        except tc.RuntimeStateError as exc:
            box["error"] = exc

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert "error" in box, f"rank_of worked on another thread: {box}"


def test_rank_of_after_close_is_refused(two):
    comm, sessions, _ = two
    comm.close()
    with pytest.raises(tc.RuntimeStateError):
        comm.rank_of(sessions[0])
