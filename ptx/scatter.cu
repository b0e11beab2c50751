// StableHLO scatter into a copy of the operand (the host copies it first). For every update
// element: result_index = start + batching + window; a window whose start does not fit the
// operand (any component outside [0, dim - window]) is skipped whole (XLA semantics).
// OP selects the combiner:
//   OP_ADD / OP_MAX / OP_MIN  atomics per dtype T (complex add per component; max/min
//                             propagate NaN and order +0 above -0, so they are order-free);
//   OP_STORE                  plain store (replace with unique indices; T = storage unit);
//   OP_CLAIM, OP_COMMIT       deterministic replace in two passes: CLAIM writes the largest
//                             window key (row-major window order + 1) into `winner` with
//                             atomicMax, COMMIT stores only the update of that window.
// scatter_scalar serves windows of one element with compact indices (the update index is
// the window index); scatter_general any geometry through the coalesced Geometry
// (a = result offset, b = index-vector offset, c = window key - 1).
#include "tenferro/index.cuh"

namespace tf {

#define OP_ADD 0
#define OP_MAX 1
#define OP_MIN 2
#define OP_STORE 3
#define OP_CLAIM 4
#define OP_COMMIT 5
#define SCATTER_UNROLL 4

__device__ __forceinline__ bool winner_is(const void* winner, int wide_key, i64 off, i64 key) {
  return wide_key ? ((const u64*)winner)[off] == (u64)key : ((const u32*)winner)[off] == (u32)key;
}

template <class T, int OP>
__device__ __forceinline__ void apply(T* out, i64 off, T v, void* winner, int wide_key,
                                      i64 key) {
  if constexpr (OP == OP_ADD) {
    atomic_add(out + off, v);
  } else if constexpr (OP == OP_MAX) {
    atomic_max(out + off, v);
  } else if constexpr (OP == OP_MIN) {
    atomic_min(out + off, v);
  } else if constexpr (OP == OP_STORE) {
    out[off] = v;
  } else if constexpr (OP == OP_CLAIM) {
    if (wide_key) atomicMax((unsigned long long*)winner + off, (unsigned long long)key);
    else atomicMax((unsigned int*)winner + off, (unsigned int)key);
  } else {
    if (winner_is(winner, wide_key, off, key)) out[off] = v;
  }
}

// Update i (compact updates) goes to out[start(idx at i * m.k)], window key i + 1. One
// index component (the common case) keeps SCATTER_UNROLL updates in flight per thread.
template <class T, int OP>
__global__ void __launch_bounds__(256, 4) scatter_scalar(T* out, const T* __restrict__ upd,
                                                         const void* __restrict__ idx,
                                                         IndexMap m, i64 n, void* winner,
                                                         int wide_key) {
  const i64 tile = (i64)blockDim.x * SCATTER_UNROLL;
  const i64 hi = m.hi[0], stride = m.stride[0];
  for (i64 t0 = (i64)blockIdx.x * tile + threadIdx.x; t0 < n; t0 += (i64)gridDim.x * tile) {
    if (m.k != 1) {
      for (int j = 0; j < SCATTER_UNROLL; ++j) {
        const i64 i = t0 + (i64)j * blockDim.x;
        i64 off;
        if (i < n && checked_start(m, idx, i * m.k, off)) {
          T v;
          if constexpr (OP != OP_CLAIM) v = upd[i];
          apply<T, OP>(out, off, v, winner, wide_key, i + 1);
        }
      }
      continue;
    }
    i64 off[SCATTER_UNROLL];
#pragma unroll
    for (int j = 0; j < SCATTER_UNROLL; ++j) {
      const i64 i = t0 + (i64)j * blockDim.x;
      const i64 v = i < n ? load_index(idx, i, m.wide) : -1;
      off[j] = v >= 0 && v <= hi ? v * stride : -1;
    }
    T v[SCATTER_UNROLL];
    if constexpr (OP != OP_CLAIM) {
#pragma unroll
      for (int j = 0; j < SCATTER_UNROLL; ++j) {
        if (off[j] >= 0) v[j] = upd[t0 + (i64)j * blockDim.x];
      }
    }
#pragma unroll
    for (int j = 0; j < SCATTER_UNROLL; ++j) {
      if (off[j] >= 0) apply<T, OP>(out, off[j], v[j], winner, wide_key, t0 + (i64)j * blockDim.x + 1);
    }
  }
}

// Update i (compact updates, any geometry) goes to out[a(i) + start(b(i))], key c(i) + 1.
template <class T, int OP, class I>
__global__ void __launch_bounds__(256, 4) scatter_general(T* out, const T* __restrict__ upd,
                                                       Geometry g,
                                                       const void* __restrict__ idx, IndexMap m,
                                                       I n, void* winner, int wide_key) {
  constexpr bool KEY = OP == OP_CLAIM || OP == OP_COMMIT;
  const I stride = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    i64 a, b, c, start;
    geometry_offsets<I, KEY>(g, i, a, b, c);
    if (!checked_start(m, idx, b, start)) continue;
    T v;
    if constexpr (OP != OP_CLAIM) v = upd[i];
    apply<T, OP>(out, a + start, v, winner, wide_key, c + 1);
  }
}

}  // namespace tf
