"""Host emulation of the single-axis reduction kernels (ptx/argreduce.cu, scan.cu,
sort.cu), shared by test_reduction_axis_emulated*.py: the same harness as
reduction_emu.py (the real kernels compiled by the host C++ compiler, every thread a
fiber, the real op functions and argument packing) with the warp built-ins these
kernels use besides ``__shfl_xor_sync``: ``__shfl_up_sync``, ``__shfl_sync``,
``__ballot_sync``, ``__match_any_sync`` and shared-memory ``atomicAdd``.

````session`` lowers the planners' thresholds so that small inputs take every path (split
argmax passes, multi-level and chained scans, the radix sort from 101 elements a row, over several
blocks per row and several tiles per block).
"""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

import pytest

from tenferro_cuda.ops.reduction import argreduce as arg_ops
from tenferro_cuda.ops.reduction import scan as scan_ops
from tenferro_cuda.ops.reduction import sort as sort_ops
from tenferro_cuda.shapes import reduction_arg, reduction_scan, reduction_sort

_spec = importlib.util.spec_from_file_location("reduction_emu_axis",
                                               Path(__file__).with_name("reduction_emu.py"))
emu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(emu)

SHIM_EXTRA = r"""
template <class T> T emu_lane_exchange(T v, int src) {  // lane src's v (barriers around)
  unsigned t = threadIdx.x + threadIdx.y * blockDim.x;
  std::memcpy(emu_xchg[t], &v, sizeof(T));
  emu_warp[t / 32].wait();
  T r;
  std::memcpy(&r, emu_xchg[(t & ~31u) | (unsigned)src], sizeof(T));
  emu_warp[t / 32].wait();
  return r;
}
inline unsigned emu_lane() { return (threadIdx.x + threadIdx.y * blockDim.x) & 31u; }
template <class T> T __shfl_up_sync(unsigned, T v, int d) {
  int lane = (int)emu_lane();
  return emu_lane_exchange(v, lane >= d ? lane - d : lane);
}
template <class T> T __shfl_sync(unsigned, T v, int src) {
  return emu_lane_exchange(v, src & 31);
}
inline unsigned __ballot_sync(unsigned, int p) {
  unsigned t = threadIdx.x + threadIdx.y * blockDim.x;
  emu_xchg[t][0] = p ? 1 : 0;
  emu_warp[t / 32].wait();
  unsigned m = 0;
  for (unsigned i = 0; i < 32 && (t & ~31u) + i < blockDim.x * blockDim.y; ++i)
    if (emu_xchg[(t & ~31u) + i][0]) m |= 1u << i;
  emu_warp[t / 32].wait();
  return m;
}
template <class T> unsigned __match_any_sync(unsigned, T v) {
  unsigned t = threadIdx.x + threadIdx.y * blockDim.x;
  std::memcpy(emu_xchg[t], &v, sizeof(T));
  emu_warp[t / 32].wait();
  unsigned m = 0;
  for (unsigned i = 0; i < 32 && (t & ~31u) + i < blockDim.x * blockDim.y; ++i)
    if (std::memcmp(emu_xchg[(t & ~31u) + i], &v, sizeof(T)) == 0) m |= 1u << i;
  emu_warp[t / 32].wait();
  return m;
}
inline int __all_sync(unsigned, int p) {
  unsigned t = threadIdx.x + threadIdx.y * blockDim.x;
  unsigned lanes = std::min(32u, blockDim.x * blockDim.y - (t & ~31u));
  unsigned every = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
  return __ballot_sync(0xffffffffu, p) == every;
}
inline unsigned atomicAdd(unsigned* p, unsigned v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  emu_warp[(threadIdx.x + threadIdx.y * blockDim.x) / 32].wait();
}
"""
FAMILIES = ("argreduce", "scan", "sort", "copy", "permute")


def build_args() -> dict:
    """``cuda_emu.build``'s arguments for FAMILIES (see reduction_emu.build_args)."""
    return emu.build_args(FAMILIES, SHIM_EXTRA)


def build():
    """The emulation library of FAMILIES (see reduction_emu.build)."""
    return emu.build(FAMILIES, SHIM_EXTRA)


def session_fixture(module: str):
    """The fixture ``s`` of test module ``module`` (see reduction_emu.session_fixture)."""
    return emu.session_fixture(module, build_args, build, session)


def _clear() -> None:
    for cache in (arg_ops._plans, scan_ops._plans, sort_ops._plans,
                  emu.reduction_plan_ops._occupancy):
        cache.clear()


@contextlib.contextmanager
def session(lib=(None, None)):
    """An EmuSession (reduction_emu) with small thresholds (see the module docs)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(arg_ops, "resident_blocks", lambda ctx, family, expr: 3)
        for name, value in [("MIN_CHUNK", 64), ("BLOCK_GROUP_MIN", 48), ("MIN_ROWS", 4)]:
            mp.setattr(reduction_arg, name, value)
        for name, value in [("TARGET_THREADS", 96), ("MIN_ROWS", 4), ("CHAIN_WARPS", 16)]:
            mp.setattr(reduction_scan, name, value)
        mp.setattr(sort_ops, "resident_blocks", lambda ctx, family, expr: 1)
        mp.setattr(reduction_sort, "SMALL", 100)  # rows of more elements: the radix sort
        _clear()
        try:
            yield emu.EmuSession(*lib)
        finally:
            _clear()
