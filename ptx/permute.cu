// Permutation (strided copy) kernels behind transpose, to_contiguous_read, copy_read_into,
// broadcast_in_dim, extract_diagonal and embed_diagonal. The host
// (tenferro_cuda/ops/storage/plan.py) canonicalises both layouts first: destination
// strides made positive, axes sorted by destination stride, mergeable axes coalesced. Then:
//
// - permute_rows: the destination-fastest axis is also the source's fastest (or the source
//   steps along it with a small or zero stride): each row is copied with V-element vector
//   stores (16 bytes when aligned) and vector loads when the source run is contiguous.
// - permute_tiled: the two fastest axes differ (a transpose in some pair of axes). A tile
//   spans T elements of the source-fastest axis j and T of the destination-fastest axis k.
//   Full aligned tiles: each thread loads V vectors of V elements along j (V x V block),
//   transposes the block in registers and writes V vectors of k into shared memory; after
//   the barrier each thread reads vectors along k and stores them. Every global access is
//   one V-element vector and coalesced; shared memory is addressed in whole vectors with
//   an XOR swizzle (column ^ (row / V)) instead of padding, which puts the lanes of every
//   shared-memory wavefront (a quarter-warp for 16-byte vectors, a half-warp for 8-byte
//   ones) on distinct banks. Edge tiles and unaligned layouts take the element-wise path
//   through the same shared tile.
//
// Instantiated per element size S (tf::u8 .. tf::b128); I = tf::u32 / tf::u64.
#include "tenferro/permute.cuh"

namespace tf {

// ---- row copy ------------------------------------------------------------------------
#define TF_ROW_UNROLL 4  // vectors per thread per row chunk (bytes in flight)

template <class S, int V, class I>
__device__ __forceinline__ typename lanes<S, V>::W load_run(const S* __restrict__ src, I so,
                                                            I c, const RowPlan<I>& p) {
  typename lanes<S, V>::U u;
  if (V > 1 && p.svec) {
    u.w = *reinterpret_cast<const typename lanes<S, V>::W*>(src + (I)(so + c));
  } else {
#pragma unroll
    for (int q = 0; q < V; ++q) u.e[q] = src[(I)(so + (I)(c + (I)q) * p.sst)];
  }
  return u.w;
}

template <class S, int V, class I>
__device__ __forceinline__ void store_run(S* __restrict__ dst, I dof, I c,
                                          typename lanes<S, V>::W w, const RowPlan<I>& p) {
  if (V > 1) {
    *reinterpret_cast<typename lanes<S, V>::W*>(dst + (I)(dof + c)) = w;
  } else {
    typename lanes<S, V>::U u;
    u.w = w;
    dst[(I)(dof + c * p.dst_)] = u.e[0];
  }
}

// Grid: x over column chunks of (threads per row * TF_ROW_UNROLL) vectors, y over row
// groups (grid-stride). A block of 256 threads covers 256 >> tpr_log2 rows at once.
template <class S, int V, class I>
__global__ void __launch_bounds__(TF_PERM_THREADS)
permute_rows(S* __restrict__ dst, const S* __restrict__ src, const RowPlan<I> p) {
  tf::grid_wait();
  typedef typename lanes<S, V>::W W;
  const int lg = p.tpr_log2;
  const I tpr = (I)1 << lg;
  const I lane = (I)threadIdx.x & (tpr - 1);
  const u64 rpb = (u64)(TF_PERM_THREADS >> lg);
  const I c0 = ((I)blockIdx.x * tpr * TF_ROW_UNROLL + lane) * V;
  for (u64 r64 = (u64)blockIdx.y * rpb + (threadIdx.x >> lg); r64 < (u64)p.rows;
       r64 += (u64)gridDim.y * rpb) {
    I t = (I)r64;
    I so = p.soff, dof = p.doff;
#pragma unroll
    for (int d = TF_ROW_RANK - 1; d >= 0; --d) {
      if (d < p.nd) {
        I e = p.ext[d];
        I q = t / e;
        I i = t - q * e;
        so += i * p.ss[d];
        dof += i * p.ds[d];
        t = q;
      }
    }
    W v[TF_ROW_UNROLL];
#pragma unroll
    for (int u = 0; u < TF_ROW_UNROLL; ++u) {
      I c = c0 + (I)u * tpr * V;
      if (c < p.cols) v[u] = load_run<S, V, I>(src, so, c, p);
    }
#pragma unroll
    for (int u = 0; u < TF_ROW_UNROLL; ++u) {
      I c = c0 + (I)u * tpr * V;
      if (c < p.cols) store_run<S, V, I>(dst, dof, c, v[u], p);
    }
  }
}

// ---- tiled copy ----------------------------------------------------------------------
// Shared tile: T rows (tile-local j), NB = T / V vectors per row holding k. Vector column
// kv of row j lives at column kv ^ swz(j).
template <int V, int NB>
__device__ __forceinline__ int swz(int row) { return (row / V) & (NB - 1); }

template <class S, int V, int T>
__device__ __forceinline__ S& tile_elem(typename lanes<S, V>::W (*sm)[T / V], int j, int k) {
  const int NB = T / V;
  typename lanes<S, V>::W* w = &sm[j][(k / V) ^ swz<V, NB>(j)];
  return reinterpret_cast<S*>(w)[k % V];
}

template <class S, int V, int T, class I>
__device__ __forceinline__ void tile_fast(S* __restrict__ dst, const S* __restrict__ src,
                                          typename lanes<S, V>::W (*sm)[T / V], I sb, I db,
                                          const TilePlan<I>& p) {
  typedef typename lanes<S, V>::U U;
  typedef typename lanes<S, V>::W W;
  const int NB = T / V;
  const int BPT = NB * NB / TF_PERM_THREADS;  // V x V blocks per thread
#pragma unroll
  for (int b = 0; b < BPT; ++b) {
    const int q = threadIdx.x + b * TF_PERM_THREADS;
    const int bk = q / NB, bj = q % NB;
    U in[V], out[V];
#pragma unroll
    for (int r = 0; r < V; ++r)
      in[r].w = *reinterpret_cast<const W*>(src + (I)(sb + (I)(bk * V + r) * p.sk +
                                                      (I)(bj * V)));
#pragma unroll
    for (int jj = 0; jj < V; ++jj) {
#pragma unroll
      for (int r = 0; r < V; ++r) out[jj].e[r] = in[r].e[jj];
    }
#pragma unroll
    for (int jj = 0; jj < V; ++jj) {
      const int row = bj * V + jj;
      sm[row][bk ^ swz<V, NB>(row)] = out[jj].w;
    }
  }
  __syncthreads();
#pragma unroll
  for (int i = 0; i < BPT * V; ++i) {
    const int q = threadIdx.x + i * TF_PERM_THREADS;
    const int row = q / NB, bk = q % NB;
    *reinterpret_cast<W*>(dst + (I)(db + (I)row * p.dj + (I)(bk * V))) =
        sm[row][bk ^ swz<V, NB>(row)];
  }
}

template <class S, int V, int T, class I>
__device__ __forceinline__ void tile_edge(S* __restrict__ dst, const S* __restrict__ src,
                                          typename lanes<S, V>::W (*sm)[T / V], I sb, I db,
                                          const TilePlan<I>& p, int nj, int nk) {
  // Element-wise, bounds-checked. A thread keeps one tile column fixed and walks the other
  // axis in steps of R; its loads go out in independent batches of B. Loads: lanes along j
  // (the source-fastest axis); stores: lanes along k (the destination-fastest axis).
  const int R = TF_PERM_THREADS / T;
  const int E = T * T / TF_PERM_THREADS;
  const int B = E < 8 ? E : 8;  // loads in flight per thread (bounds the registers)
  {
    const int jl = threadIdx.x % T, kl = threadIdx.x / T;
    const I off = sb + (I)jl * p.sj + (I)kl * p.sk, step = (I)R * p.sk;
#pragma unroll
    for (int h = 0; h < E; h += B) {
      S v[B];
#pragma unroll
      for (int i = 0; i < B; ++i)
        if (jl < nj && kl + (h + i) * R < nk) v[i] = src[(I)(off + (I)(h + i) * step)];
#pragma unroll
      for (int i = 0; i < B; ++i)
        if (jl < nj && kl + (h + i) * R < nk)
          tile_elem<S, V, T>(sm, jl, kl + (h + i) * R) = v[i];
    }
  }
  __syncthreads();
  const int kl = threadIdx.x % T, jl = threadIdx.x / T;
  const I off = db + (I)kl * p.dk + (I)jl * p.dj, step = (I)R * p.dj;
#pragma unroll
  for (int i = 0; i < E; ++i)
    if (kl < nk && jl + i * R < nj)
      dst[(I)(off + (I)i * step)] = tile_elem<S, V, T>(sm, jl + i * R, kl);
}

// Grid: one block per tile (x = tile index; the host keeps ntiles < 2^31). Block: 256.
template <class S, int V, int T, class I>
__global__ void __launch_bounds__(TF_PERM_THREADS)
permute_tiled(S* __restrict__ dst, const S* __restrict__ src, const TilePlan<I> p) {
  tf::grid_wait();
  typedef typename lanes<S, V>::W W;
  static_assert(T % V == 0 && ((T / V) & (T / V - 1)) == 0, "T / V must be a power of 2");
  static_assert((T / V) * (T / V) % TF_PERM_THREADS == 0, "tile blocks must fill the threads");
  __shared__ W sm[T][T / V];
  if ((u64)blockIdx.x >= p.ntiles) return;
  I t = (I)blockIdx.x;
  const I tk = t % p.ntk;
  t /= p.ntk;
  const I tj = t % p.ntj;
  t /= p.ntj;
  I sb = p.soff, db = p.doff;
#pragma unroll
  for (int d = TF_TILE_RANK - 1; d >= 0; --d) {
    if (d < p.nd) {
      I e = p.ext[d];
      I q = t / e;
      I i = t - q * e;
      sb += i * p.ss[d];
      db += i * p.ds[d];
      t = q;
    }
  }
  const I j0 = tj * (I)T, k0 = tk * (I)T;
  sb += j0 * p.sj + k0 * p.sk;
  db += j0 * p.dj + k0 * p.dk;
  const I nj = p.nj - j0, nk = p.nk - k0;
  if (p.vec && nj >= (I)T && nk >= (I)T) {
    tile_fast<S, V, T, I>(dst, src, sm, sb, db, p);
  } else {
    tile_edge<S, V, T, I>(dst, src, sm, sb, db, p, nj < (I)T ? (int)nj : T,
                          nk < (I)T ? (int)nk : T);
  }
}

}  // namespace tf
