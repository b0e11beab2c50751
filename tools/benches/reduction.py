"""Reduction and BLAS-1 figures (issue 4), beside PyTorch and CuPy on the same sizes in the
same run:

- ``reduce_sum`` of 2^28 float32 over all axes (target >= 4,000 GB/s);
- ``reduce_sum`` of a 16384 x 16384 float32 tensor along axis 0 and along axis 1
  (target >= 3,800 GB/s each);
- for reference (no target): ``reduce_max`` over all axes, ``vdot_read`` and
  ``norm_squared_read`` of float32 vectors, ``axpby_read_into_accum`` (PyTorch:
  ``y.mul_(beta).add_(x, alpha=alpha)``, CuPy: one fused elementwise kernel);
- issue 17: ``sort`` and ``sort_with_indices`` of 2^28 and 2^24 float32 beside
  ``torch.sort(stable=True)`` (which always returns int64 indices too) and ``cupy.sort``
  (values only), target >= 50 % of torch.sort's throughput; ``argmax`` and ``cumsum`` of
  2^28 float32 and along each axis of a 16384 x 16384 float32 tensor.

GB/s = (bytes read + bytes written) / time, from CUDA-event medians after warm-up; a
sort's figure is Gkeys/s = elements / time / 1e9.
"""

from __future__ import annotations

import numpy as np

from .common import Row, cupy_ms, gbps, peers, release_peer_memory, session_ms, torch_ms

FAMILY = "reduction"
N_ALL = 1 << 28
N2 = 16384
N_VEC = 1 << 27




def _host(shape, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random(shape, dtype=np.float32)


def _timed(s, torch, cupy, ours, peer_t, peer_c):
    """(ours ms, torch ms, cupy ms); None where a peer is absent."""
    t = torch_ms(peer_t) if torch is not None else None
    c = cupy_ms(peer_c) if cupy is not None else None
    return session_ms(s, ours), t, c


def _row(name, nbytes, ms, target="", note="") -> Row:
    return Row(FAMILY, name, "GB/s", gbps(nbytes, ms[0]), gbps(nbytes, ms[1]),
               gbps(nbytes, ms[2]), target=target, note=note, extra={"ms": ms[0]})


def _peer_arrays(torch, cupy, a: np.ndarray):
    pt = torch.from_numpy(a).cuda() if torch is not None else None
    pc = cupy.asarray(a) if cupy is not None else None
    return pt, pc


def all_axes(s, torch, cupy) -> list[Row]:
    a = _host((N_ALL,), 1)
    x = s.upload_host_tensor(a)
    xt, xc = _peer_arrays(torch, cupy, a)
    nbytes = N_ALL * 4 + 4
    rows = [_row("reduce_sum 2^28 float32, all axes", nbytes,
                 _timed(s, torch, cupy, lambda: s.reduce_sum(x, (0,)), lambda: xt.sum(),
                        lambda: xc.sum()), target=">= 4,000 GB/s")]
    rows.append(_row("reduce_max 2^28 float32, all axes", nbytes,
                     _timed(s, torch, cupy, lambda: s.reduce_max(x, (0,)),
                            lambda: xt.max(), lambda: xc.max())))
    return rows


def matrix_axes(s, torch, cupy) -> list[Row]:
    a = _host((N2, N2), 2)
    x = s.upload_host_tensor(a)
    xt, xc = _peer_arrays(torch, cupy, a)
    nbytes = N2 * N2 * 4 + N2 * 4
    rows = []
    for axis in (0, 1):
        ms = _timed(s, torch, cupy, lambda axis=axis: s.reduce_sum(x, (axis,)),
                    lambda axis=axis: xt.sum(axis), lambda axis=axis: xc.sum(axis))
        rows.append(_row(f"reduce_sum 16384x16384 float32, axis {axis}", nbytes, ms,
                         target=">= 3,800 GB/s"))
    return rows


def blas1(s, torch, cupy) -> list[Row]:
    a, b = _host((N_VEC,), 3), _host((N_VEC,), 4)
    x, y = s.upload_host_tensor(a), s.upload_host_tensor(b)
    (xt, xc), (yt, yc) = _peer_arrays(torch, cupy, a), _peer_arrays(torch, cupy, b)
    rows = [_row("vdot_read 2^27 float32", 2 * N_VEC * 4 + 4,
                 _timed(s, torch, cupy, lambda: s.vdot_read(x, y), lambda: torch.dot(xt, yt),
                        lambda: cupy.vdot(xc, yc))),
            _row("norm_squared_read 2^27 float32", N_VEC * 4 + 4,
                 _timed(s, torch, cupy, lambda: s.norm_squared_read(x),
                        lambda: torch.dot(xt, xt), lambda: cupy.vdot(xc, xc)))]
    fused = None
    if cupy is not None:
        fused = cupy.ElementwiseKernel("float32 x, float32 a, float32 b", "float32 y",
                                       "y = a * x + b * y", "tf_bench_axpby")
    ms = _timed(s, torch, cupy, lambda: s.axpby_read_into_accum(0.5, x, 0.25, y),
                lambda: yt.mul_(0.25).add_(xt, alpha=0.5),
                lambda: fused(xc, np.float32(0.5), np.float32(0.25), yc))
    rows.append(_row("axpby_read_into_accum 2^27 float32", 3 * N_VEC * 4, ms,
                     note="PyTorch: mul_ then add_ (two passes)"))
    return rows


def _keys_row(name, n, ms, target="", note="") -> Row:
    rate = [None if t is None else n / (t * 1e-3) / 1e9 for t in ms]
    return Row(FAMILY, name, "Gkeys/s", rate[0], rate[1], rate[2], target=target, note=note,
               extra={"ms": ms[0]})


def _sort_rows(s, torch, cupy, log: int) -> list[Row]:
    n = 1 << log
    a = _host((n,), 5)
    x = s.upload_host_tensor(a)
    xt, xc = _peer_arrays(torch, cupy, a)
    peer_t = lambda: torch.sort(xt, stable=True)  # noqa: E731
    values = _timed(s, torch, cupy, lambda: s.sort(x), peer_t, lambda: cupy.sort(xc))
    both = (session_ms(s, lambda: s.sort_with_indices(x)), values[1], None)  # same torch
    return [_keys_row(f"sort 2^{log} float32, values", n, values,
                      target=">= 50% of torch.sort",
                      note="torch.sort also returns int64 indices; CuPy: values only"),
            _keys_row(f"sort_with_indices 2^{log} float32", n, both,
                      target=">= 50% of torch.sort")]


def sort_large(s, torch, cupy) -> list[Row]:
    return _sort_rows(s, torch, cupy, 28)


def sort_medium(s, torch, cupy) -> list[Row]:
    return _sort_rows(s, torch, cupy, 24)


def arg_scan_flat(s, torch, cupy) -> list[Row]:
    a = _host((N_ALL,), 6)
    x = s.upload_host_tensor(a)
    xt, xc = _peer_arrays(torch, cupy, a)
    return [_row("argmax 2^28 float32", N_ALL * 4 + 8,
                 _timed(s, torch, cupy, lambda: s.argmax(x, 0), lambda: xt.argmax(),
                        lambda: xc.argmax())),
            _row("cumsum 2^28 float32", N_ALL * 8,
                 _timed(s, torch, cupy, lambda: s.cumsum(x, 0), lambda: xt.cumsum(0),
                        lambda: xc.cumsum()))]


def arg_scan_matrix(s, torch, cupy) -> list[Row]:
    a = _host((N2, N2), 7)
    x = s.upload_host_tensor(a)
    xt, xc = _peer_arrays(torch, cupy, a)
    rows = []
    for axis in (0, 1):
        rows.append(_row(f"argmax 16384x16384 float32, axis {axis}", N2 * N2 * 4 + N2 * 8,
                         _timed(s, torch, cupy, lambda axis=axis: s.argmax(x, axis),
                                lambda axis=axis: xt.argmax(axis),
                                lambda axis=axis: xc.argmax(axis))))
        rows.append(_row(f"cumsum 16384x16384 float32, axis {axis}", N2 * N2 * 8,
                         _timed(s, torch, cupy, lambda axis=axis: s.cumsum(x, axis),
                                lambda axis=axis: xt.cumsum(axis),
                                lambda axis=axis: xc.cumsum(axis))))
    return rows


def run(s) -> list[Row]:
    torch, cupy = peers()
    rows: list[Row] = []
    for section in (all_axes, matrix_axes, blas1, sort_large, sort_medium,
                    arg_scan_flat, arg_scan_matrix):
        rows += section(s, torch, cupy)  # its tensors die on return
        s.synchronize()
        release_peer_memory(torch, cupy)
    return rows
