// StableHLO gather: result[i] = operand[operand_index(i)] with start indices clamped so the
// window fits. Gather moves bits, so every kernel is instantiated per storage unit S
// (u8, unsigned short, u32, u64, b128), not per dtype. Three paths, chosen on the host:
//  (a) gather_scalar: every window is one element: one index vector per result element,
//      GATHER_UNROLL independent loads in flight per thread, index loads coalesced;
//  (b) gather_rows: each window is a contiguous run of the operand and of the result: a
//      group of threads (up to a warp) per window copies it in units of up to 16 bytes;
//  (c) gather_general: any geometry, one result element per iteration, offsets from the
//      coalesced Geometry (a = operand, b = index tensor).
#include "tenferro/index.cuh"

namespace tf {

#define GATHER_UNROLL 8
#define ROW_UNROLL 4

// out[i] = operand[base + clamped_start(idx at i * m.k)], i < n; indices compact with
// the index vector dimension last (or one component). One component (the common case)
// keeps GATHER_UNROLL loads in flight; more components go one element at a time.
template <class S>
__global__ void __launch_bounds__(256, 4) gather_scalar(S* __restrict__ out,
                                                        const S* __restrict__ operand,
                                                        i64 base, const void* __restrict__ idx,
                                                        IndexMap m, i64 n) {
  constexpr int UN = sizeof(S) >= 16 ? GATHER_UNROLL / 2 : GATHER_UNROLL;
  const i64 tile = (i64)blockDim.x * UN;
  const i64 hi = m.hi[0], stride = m.stride[0];
  for (i64 t0 = (i64)blockIdx.x * tile + threadIdx.x; t0 < n; t0 += (i64)gridDim.x * tile) {
    if (m.k != 1) {
      for (int j = 0; j < UN; ++j) {
        const i64 i = t0 + (i64)j * blockDim.x;
        if (i < n) out[i] = ldg(operand + base + clamped_start(m, idx, i * m.k));
      }
      continue;
    }
    i64 off[UN];
#pragma unroll
    for (int j = 0; j < UN; ++j) {
      const i64 i = t0 + (i64)j * blockDim.x;
      off[j] = i < n ? base + clamp_index(load_index(idx, i, m.wide), hi) * stride : base;
    }
    S v[UN];
#pragma unroll
    for (int j = 0; j < UN; ++j) {
      if (t0 + (i64)j * blockDim.x < n) v[j] = ldg(operand + off[j]);
    }
#pragma unroll
    for (int j = 0; j < UN; ++j) {
      const i64 i = t0 + (i64)j * blockDim.x;
      if (i < n) out[i] = v[j];
    }
  }
}

// Row r of the result (units contiguous units) = the window at
// operand + a(r) + clamped_start(b(r)); ab/bb map the batch index to the operand offset
// (batching dimensions) and to the index-vector offset. `group` is a power of two <= 32.
// The next row's start index is loaded before the current row is copied, so the index
// load latency overlaps the copy.
__device__ __forceinline__ i64 row_source(const Layout& ab, const Layout& bb, const void* idx,
                                          const IndexMap& m, i64 r, i64 rows) {
  i64 a, b;
  row_offsets(ab, bb, r, rows, a, b);
  return a + clamped_start(m, idx, b);
}

template <class U>
__global__ void __launch_bounds__(256) gather_rows(U* __restrict__ out,
                                                   const U* __restrict__ operand, Layout ab,
                                                   Layout bb, const void* __restrict__ idx,
                                                   IndexMap m, i64 rows, i64 units,
                                                   int group) {
  const int lane = threadIdx.x & (group - 1);
  const i64 first = ((i64)blockIdx.x * blockDim.x + threadIdx.x) / group;
  const i64 groups = ((i64)gridDim.x * blockDim.x) / group;
  if (first >= rows) return;
  i64 src = row_source(ab, bb, idx, m, first, rows);
  for (i64 r = first; r < rows; r += groups) {
    const i64 next = r + groups < rows ? row_source(ab, bb, idx, m, r + groups, rows) : 0;
    const U* in = operand + src;
    U* dst = out + r * units;
    for (i64 u = lane; u < units; u += (i64)ROW_UNROLL * group) {
      U v[ROW_UNROLL];
#pragma unroll
      for (int j = 0; j < ROW_UNROLL; ++j) {
        if (u + (i64)j * group < units) v[j] = ldg(in + u + (i64)j * group);
      }
#pragma unroll
      for (int j = 0; j < ROW_UNROLL; ++j) {
        if (u + (i64)j * group < units) dst[u + (i64)j * group] = v[j];
      }
    }
    src = next;
  }
}

// out[i] = operand[a(i) + clamped_start(b(i))] for i < n (compact result, any geometry).
template <class S, class I>
__global__ void __launch_bounds__(256) gather_general(S* __restrict__ out,
                                                      const S* __restrict__ operand,
                                                      Geometry g,
                                                      const void* __restrict__ idx, IndexMap m,
                                                      I n) {
  const I stride = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    i64 a, b, c;
    geometry_offsets<I, false>(g, i, a, b, c);
    out[i] = ldg(operand + a + clamped_start(m, idx, b));
  }
}

}  // namespace tf
