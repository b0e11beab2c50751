"""Helpers for GPU tests: ``from gpu_util import up, down``."""

from __future__ import annotations

import numpy as np


def up(session, array):
    """Upload a numpy array."""
    return session.upload_host_tensor(np.asarray(array))


def down(session, tensor):
    """Download to numpy."""
    return session.download_to_host(tensor).numpy()
