"""Op tables of the indexing family shared by the emulated CPU tests and the GPU tests:
(id, shapes, indices, config, expected kernel) rows, the combiner x dtype matrix, and a
sampler of exact (integer-valued, NaN-free) data for every dtype."""

from __future__ import annotations

import numpy as np

from tenferro_cuda import ALL_DTYPES, DType


def sample(dtype: DType, shape, rng, lo=-50, hi=50):
    """Integer-valued data (exact under any summation order), NaN-free."""
    if dtype.is_bool:
        return rng.integers(0, 2, shape).astype(bool)
    vals = rng.integers(0 if dtype is DType.UINT8 else lo, hi, shape)
    if dtype.is_complex:
        vals = vals + 1j * rng.integers(lo, hi, shape)
    return vals.astype(dtype.numpy)


GATHER_TABLE = [  # (id, operand shape, indices, cfg, expected kernel)
    ("scalar", (37,), np.array([[3], [-4], [36], [40], [0]]),
     dict(offset_dims=(), collapsed_slice_dims=(0,), start_index_map=(0,),
          index_vector_dim=1, slice_sizes=(1,)), "gather_scalar"),
    ("scalar-2d", (6, 7), np.array([[1, 2], [9, -1], [5, 6]]),
     dict(offset_dims=(), collapsed_slice_dims=(0, 1), start_index_map=(1, 0),
          index_vector_dim=1, slice_sizes=(1, 1)), "gather_scalar"),
    ("rows", (9, 12), np.array([7, 0, 12, -3, 8]),
     dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
          index_vector_dim=1, slice_sizes=(1, 12)), "gather_rows"),
    ("rows-partial", (9, 12), np.array([[7, 2], [0, 11], [3, -1]]),
     dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0, 1),
          index_vector_dim=1, slice_sizes=(1, 5)), "gather_rows"),
    ("general", (9, 12), np.array([7, 0, 12]),
     dict(offset_dims=(0,), collapsed_slice_dims=(0,), start_index_map=(0,),
          index_vector_dim=1, slice_sizes=(1, 12)), "gather_general"),
]


SCATTER_TABLE = [  # (id, operand shape, indices, update shape, cfg, kernel)
    ("scalar", (7,), np.array([[3], [-1], [3], [6], [7], [3]]), (6,),
     dict(update_window_dims=(), inserted_window_dims=(0,),
          scatter_dims_to_operand_dims=(0,), index_vector_dim=1), "scatter_scalar"),
    ("scalar-2d", (4, 5), np.array([[1, 2], [1, 2], [3, 4], [4, 0], [0, 0]]), (5,),
     dict(update_window_dims=(), inserted_window_dims=(0, 1),
          scatter_dims_to_operand_dims=(0, 1), index_vector_dim=1), "scatter_scalar"),
    ("rows", (6, 4), np.array([[5], [0], [5], [2], [9]]), (5, 4),
     dict(update_window_dims=(1,), inserted_window_dims=(0,),
          scatter_dims_to_operand_dims=(0,), index_vector_dim=1), "scatter_general"),
    ("windows", (6, 5), np.array([[1, 1], [0, 3], [1, 2], [5, 0]]), (4, 2, 3),
     dict(update_window_dims=(1, 2), inserted_window_dims=(),
          scatter_dims_to_operand_dims=(0, 1), index_vector_dim=1), "scatter_general"),
]
COMBINERS = {"add": lambda d: d.is_numeric, "replace": lambda d: True,
             "max": lambda d: d.is_integer or d.is_float,
             "min": lambda d: d.is_integer or d.is_float}
COMBOS = [(c, d) for c, ok in COMBINERS.items() for d in ALL_DTYPES if ok(d)]
