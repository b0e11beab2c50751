// StableHLO gather: result[i] = operand[operand_index(i)] with start indices clamped so the
// window fits. Gather moves bits, so every kernel is instantiated per storage unit S
// (u8, unsigned short, u32, u64, b128), not per dtype. Three paths, chosen on the host:
//  (a) gather_scalar: every window is one element: one index vector per result element,
//      GATHER_UNROLL independent loads in flight per thread, index loads coalesced;
//  (b) gather_rows: each window is a contiguous run of the operand and of the result: a
//      group of threads (up to a warp) per window copies it in units of up to 16 bytes;
//  (c) gather_general: any geometry, one result element per iteration, offsets from the
//      coalesced Geometry (a = operand, b = index tensor);
//  (d) gather_split + gather_chunks + gather_place: path (a) for a table much larger than
//      L2 read densely (rules: ops/indexing/partition.py). Random reads of such a table are
//      bound by the DRAM's rate of random accesses; these three passes read it instead one
//      L2-sized chunk at a time, so that each 32-byte sector comes from DRAM once and the
//      random reads hit L2. 4-, 8- and 16-byte units.
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
  tf::grid_wait();
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
  tf::grid_wait();
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
  tf::grid_wait();
  const I stride = (I)gridDim.x * blockDim.x;
  for (I i = (I)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    i64 a, b, c;
    geometry_offsets<I, false>(g, i, a, b, c);
    out[i] = ldg(operand + a + clamped_start(m, idx, b));
  }
}

// ---- (d) the partitioned scalar gather ----------------------------------------------------
// split:  block b takes PART_ROWS<S> result elements [b R, b R + rows), computes each one's
//         table offset (base + clamped start, base making every offset >= 0), counts them
//         per chunk (offset >> shift) and writes, chunk by chunk, each in-chunk offset (the
//         key, in the low 32 bits of a result unit) and the element's row in the block (pos);
//         offs[t * nb + b] = where chunk t starts in block b's run (row `chunks` = rows).
//         Block 0 zeroes the work counter of gather_chunks (offs[(chunks + 1) * nb]).
// chunks: persistent blocks take work items in chunk order from that counter, so that the
//         blocks in flight read one or two chunks; an item is PART_ITEM blocks' runs of one
//         chunk, a warp per run: key -> operand[(t << shift) + key], written in place.
// place:  block b moves its values back to row order through shared memory.
#define PART_BLOCK 256
#define PART_CHUNKS_MAX 512
#define PART_ITEM 16
#define PART_LOADS 4

template <class S> struct part_rows { static constexpr int value = sizeof(S) >= 16 ? 2048 : 4096; };
template <class S> __device__ __forceinline__ S key_unit(u32 k) { return (S)k; }
template <> __device__ __forceinline__ b128 key_unit<b128>(u32 k) {
  b128 r;
  r.lo = k;
  r.hi = 0;
  return r;
}
template <class S> __device__ __forceinline__ u32 unit_key(S v) { return (u32)v; }
template <> __device__ __forceinline__ u32 unit_key<b128>(b128 v) { return (u32)v.lo; }

template <class S>
__global__ void __launch_bounds__(PART_BLOCK, 4) gather_split(S* __restrict__ out,
                                                           const void* __restrict__ idx,
                                                           IndexMap m, i64 base, i64 n,
                                                           u32 shift, u32 chunks,
                                                           unsigned short* __restrict__ pos,
                                                           u32* __restrict__ offs) {
  tf::grid_wait();
  constexpr int R = part_rows<S>::value, PER = R / PART_BLOCK;
  __shared__ u32 cnt[PART_CHUNKS_MAX + 1];
  __shared__ u32 skey[R];
  __shared__ unsigned short spos[R];
  const u32 nb = gridDim.x;
  if (blockIdx.x == 0 && threadIdx.x == 0) offs[(u64)(chunks + 1) * nb] = 0;
  const i64 b0 = (i64)blockIdx.x * R;
  const int rows = (int)(n - b0 < R ? n - b0 : R);
  for (int t = threadIdx.x; t <= (int)chunks; t += PART_BLOCK) cnt[t] = 0;
  __syncthreads();
  // Offsets into the table (< chunks << shift <= 2^31 units, so 32 bits), every index
  // load issued before the first shared atomic.
  u32 off[PER];
  if (m.k == 1) {
    i64 v[PER];
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int i = threadIdx.x + j * PART_BLOCK;
      v[j] = i < rows ? load_index(idx, b0 + i, m.wide) : 0;
    }
#pragma unroll
    for (int j = 0; j < PER; ++j) off[j] = (u32)(base + clamp_index(v[j], m.hi[0]) * m.stride[0]);
  } else {
#pragma unroll
    for (int j = 0; j < PER; ++j) {
      const int i = threadIdx.x + j * PART_BLOCK;
      off[j] = i < rows ? (u32)(base + clamped_start(m, idx, (b0 + i) * m.k)) : 0;
    }
  }
  u32 rank[PER];
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    if ((int)threadIdx.x + j * PART_BLOCK < rows) rank[j] = atomicAdd(&cnt[off[j] >> shift], 1u);
  }
  __syncthreads();
  if (threadIdx.x < 32) {  // exclusive scan of cnt[0, chunks) by one warp
    const int lane = threadIdx.x, per = (int)(chunks + 31) / 32;
    u32 sum = 0;
    for (int k = 0; k < per; ++k) {
      const int t = lane * per + k;
      if (t < (int)chunks) sum += cnt[t];
    }
    u32 incl = sum;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const u32 y = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += y;
    }
    u32 run = incl - sum;
    for (int k = 0; k < per; ++k) {
      const int t = lane * per + k;
      if (t < (int)chunks) {
        const u32 c = cnt[t];
        cnt[t] = run;
        run += c;
      }
    }
  }
  __syncthreads();
  for (int t = threadIdx.x; t <= (int)chunks; t += PART_BLOCK)
    offs[(u64)t * nb + blockIdx.x] = t < (int)chunks ? cnt[t] : (u32)rows;
  const u32 mask = (u32)((1ull << shift) - 1);
#pragma unroll
  for (int j = 0; j < PER; ++j) {
    const int i = threadIdx.x + j * PART_BLOCK;
    if (i < rows) {
      const u32 slot = cnt[off[j] >> shift] + rank[j];
      skey[slot] = off[j] & mask;
      spos[slot] = (unsigned short)i;
    }
  }
  __syncthreads();
  for (int i = threadIdx.x; i < rows; i += PART_BLOCK) {
    out[b0 + i] = key_unit<S>(skey[i]);
    pos[b0 + i] = spos[i];
  }
}

template <class S>
__global__ void __launch_bounds__(PART_BLOCK) gather_chunks(S* out, const S* __restrict__ operand,
                                                            u32 shift, u32 chunks, u32 nb,
                                                            const u32* __restrict__ offs,
                                                            u32* counter) {
  tf::grid_wait();
  constexpr int R = part_rows<S>::value;
  __shared__ u32 item;
  const u32 groups = (nb + PART_ITEM - 1) / PART_ITEM;
  const u64 items = (u64)groups * chunks;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (;;) {
    __syncthreads();
    if (threadIdx.x == 0) item = atomicAdd(counter, 1u);
    __syncthreads();
    const u32 w = item;
    if (w >= items) return;
    const u32 t = w / groups, g = w % groups;
    const S* chunk = operand + ((u64)t << shift);
    const u32 bend = (g + 1) * PART_ITEM < nb ? (g + 1) * PART_ITEM : nb;
    for (u32 b = g * PART_ITEM + warp; b < bend; b += PART_BLOCK / 32) {
      const u32 s = offs[(u64)t * nb + b], e = offs[(u64)(t + 1) * nb + b];
      S* kv = out + (u64)b * R;
      for (u32 j0 = s + lane; j0 < e; j0 += 32 * PART_LOADS) {
        u32 k[PART_LOADS];
        S v[PART_LOADS];
#pragma unroll
        for (int u = 0; u < PART_LOADS; ++u)
          if (j0 + u * 32 < e) k[u] = unit_key<S>(kv[j0 + u * 32]);
#pragma unroll
        for (int u = 0; u < PART_LOADS; ++u)
          if (j0 + u * 32 < e) v[u] = ldg(chunk + k[u]);
#pragma unroll
        for (int u = 0; u < PART_LOADS; ++u)
          if (j0 + u * 32 < e) kv[j0 + u * 32] = v[u];
      }
    }
  }
}

template <class S>
__global__ void __launch_bounds__(PART_BLOCK) gather_place(S* __restrict__ out,
                                                           const unsigned short* __restrict__ pos,
                                                           i64 n) {
  tf::grid_wait();
  constexpr int R = part_rows<S>::value;
  __shared__ S tile[R];
  const i64 b0 = (i64)blockIdx.x * R;
  const int rows = (int)(n - b0 < R ? n - b0 : R);
  for (int i = threadIdx.x; i < rows; i += PART_BLOCK) tile[pos[b0 + i]] = out[b0 + i];
  __syncthreads();
  for (int i = threadIdx.x; i < rows; i += PART_BLOCK) out[b0 + i] = tile[i];
}

}  // namespace tf
