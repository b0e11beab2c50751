// Stable sort along one axis; tenferro_cuda/shapes/reduction_sort.py plans it.
//
// Keys. An element is sorted by its bits K (u8/u16/u32/u64 of its width) mapped to an
// unsigned key whose order is the value order (tf::st policies): unsigned and bool as
// they are, signed with the sign bit flipped, floats with negative values inverted and
// positive ones given the sign bit, -0.0 read as +0.0 (they compare equal, so a stable
// sort keeps their order), every NaN the all-ones key (after +inf). Descending inverts
// every key but NaN's, so NaNs come last in both directions. The kernels move the
// elements' own bits, never the keys: -0.0 stays -0.0 and a NaN keeps its payload.
//
// sort_small (rows of at most TF_SORT_SMALL elements): a block sorts 2^logt slots of
//   shared memory, rows of 2^logp slots each (padded with all-ones keys at positions >= n),
//   by a bitonic network on (key, position) pairs, a total order, so equal keys keep their
//   order; then writes out[j] = in[position] and the positions as int64 indices.
// radix_hist / radix_scatter (longer rows, compact [m, n] keys): LSD radix sort, 8 bits a
//   pass. Block `c` of row `r` owns positions [c*span, (c+1)*span). radix_hist counts its
//   digits into counts[(r*256 + d)*bpr + c]; an inclusive scan of every row of counts
//   (ptx/scan.cu) gives each (digit, block) its first output position; radix_scatter
//   ranks its tiles' elements in order (warp match per item, warp counters, a block scan
//   over digits), regroups them by digit in shared memory and writes them in runs. The
//   ranks follow the input order within every digit: each pass is stable.
// No atomics decide an order (the histograms' shared-memory atomics only count), so the
// result is unique, the same on every run and device.
#include "tenferro/reduce.cuh"

#define TF_SORT_SMALL 2048

namespace tf {
namespace st {

template <class K> __device__ __forceinline__ K top() {
  return (K)((K)1 << (8 * sizeof(K) - 1));
}

template <class K_> struct Unsigned {
  typedef K_ K;
  static __device__ __forceinline__ bool nan(K) { return false; }
  static __device__ __forceinline__ K key(K b) { return b; }
};
template <class K_> struct Signed {
  typedef K_ K;
  static __device__ __forceinline__ bool nan(K) { return false; }
  static __device__ __forceinline__ K key(K b) { return (K)(b ^ top<K>()); }
};
// E: the exponent mask (all-ones exponent, zero mantissa: +inf).
template <class K_, unsigned long long E> struct Float {
  typedef K_ K;
  static __device__ __forceinline__ bool nan(K b) { return (K)(b & (K)~top<K>()) > (K)E; }
  static __device__ __forceinline__ K key(K b) {
    if (nan(b)) return (K)~K(0);
    if (b == top<K>()) b = 0;
    return (b & top<K>()) ? (K)~b : (K)(b | top<K>());
  }
};

template <class Pol>
__device__ __forceinline__ typename Pol::K order(typename Pol::K b, int desc) {
  typedef typename Pol::K K;
  const K k = Pol::key(b);
  return (desc && !Pol::nan(b)) ? (K)~k : k;
}

template <class K> __device__ __forceinline__ u32 digit(K key, int shift) {
  return (u32)(key >> shift) & 255u;
}

template <class K> struct radix_items { enum { n = sizeof(K) == 8 ? 8 : 16 }; };

}  // namespace st

template <class Pol, class I>
__global__ void __launch_bounds__(256)
sort_small(const typename Pol::K* in, Layout rin, i64 st_in, typename Pol::K* out,
           i64* idx, Layout rout, i64 st_out, I n, I m, int logp, int logt, int desc) {
  tf::grid_wait();
  typedef typename Pol::K K;
  __shared__ K sk[TF_SORT_SMALL];
  __shared__ u32 sp[TF_SORT_SMALL];
  const int P = 1 << logp, T = 1 << logt;
  const I R = (I)(T >> logp);  // rows per block
  for (I rb = (I)blockIdx.x * R; rb < m; rb += (I)gridDim.x * R) {
    for (int s = threadIdx.x; s < T; s += blockDim.x) {
      const I row = rb + (I)(s >> logp);
      const u32 j = (u32)(s & (P - 1));
      K k = (K)~K(0);
      if (row < m && (I)j < n) {
        k = st::order<Pol>(in[rd::offset<I>(rin, row) + (i64)j * st_in], desc);
      }
      sk[s] = k;
      sp[s] = j;
    }
    __syncthreads();
    for (int kk = 2; kk <= P; kk <<= 1) {
      for (int jj = kk >> 1; jj > 0; jj >>= 1) {
        for (int p = threadIdx.x; p < (T >> 1); p += blockDim.x) {
          const int i = 2 * p - (p & (jj - 1)), q = i + jj;
          const bool up = ((i & (P - 1)) & kk) == 0;  // the last merge (kk == P) ascends
          const K ka = sk[i], kb = sk[q];
          const u32 pa = sp[i], pb = sp[q];
          const bool gt = ka > kb || (ka == kb && pa > pb);
          if (gt == up) {
            sk[i] = kb;
            sk[q] = ka;
            sp[i] = pb;
            sp[q] = pa;
          }
        }
        __syncthreads();
      }
    }
    for (int s = threadIdx.x; s < T; s += blockDim.x) {
      const I row = rb + (I)(s >> logp);
      const u32 j = (u32)(s & (P - 1));
      if (row < m && (I)j < n) {
        i64 ib, ob;
        rd::offset2<I>(rin, rout, row, ib, ob);
        const u32 pos = sp[s];
        out[ob + (i64)j * st_out] = in[ib + (i64)pos * st_in];
        if (idx) idx[ob + (i64)j * st_out] = (i64)pos;
      }
    }
    __syncthreads();
  }
}

template <class Pol>
__global__ void __launch_bounds__(256)
radix_hist(const typename Pol::K* keys, u32 n, u32 bpr, u32 span, u32 nitems, int shift,
           int desc, u32* counts) {
  tf::grid_wait();
  __shared__ u32 h[8][256];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  for (u32 item = blockIdx.x; item < nitems; item += gridDim.x) {
    for (int e = threadIdx.x; e < 8 * 256; e += blockDim.x) (&h[0][0])[e] = 0;
    __syncthreads();
    const u32 r = item / bpr, c = item - r * bpr;
    const u32 j0 = c * span, j1 = n - j0 < span ? n : j0 + span;
    const typename Pol::K* p = keys + (i64)r * n;
    // Warp-uniform steps of 4 x 32 keys (4 loads in flight a thread); a warp whose 32 keys
    // share one digit adds 32 at once (sorted runs and constant high bytes would otherwise
    // serialize on one counter).
    for (u32 jb = j0 + (u32)warp * 32; jb < j1; jb += 4 * blockDim.x) {
      u32 d[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const u32 j = jb + (u32)u * blockDim.x + (u32)lane;
        d[u] = j < j1 ? st::digit(st::order<Pol>(p[j], desc), shift) : 256u;
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const u32 d0 = __shfl_sync(TF_FULL_MASK, d[u], 0);
        if (__all_sync(TF_FULL_MASK, d[u] == d0)) {
          if (lane == 0 && d0 < 256u) atomicAdd(&h[warp][d0], 32u);
        } else if (d[u] < 256u) {
          atomicAdd(&h[warp][d[u]], 1u);
        }
      }
    }
    __syncthreads();
    const int d = threadIdx.x;
    u32 t = 0;
#pragma unroll
    for (int w = 0; w < 8; ++w) t += h[w][d];
    counts[((i64)r * 256 + d) * bpr + c] = t;
    __syncthreads();
  }
}

template <class Pol>
__global__ void __launch_bounds__(256, 3)
radix_scatter(const typename Pol::K* kin, const u32* iin, typename Pol::K* kout, u32* iout,
              i64* iout64, u32 n, u32 bpr, u32 span, u32 nitems, int shift, int desc,
              const u32* offs) {
  tf::grid_wait();
  typedef typename Pol::K K;
  enum { ITEMS = st::radix_items<K>::n, TILE = 256 * ITEMS };
  __shared__ K sk[TILE];
  __shared__ u32 si[TILE];
  __shared__ u32 wc[8][257];  // per warp and digit (256: past the end); then positions
  __shared__ u32 run[256], start[256], tot[256], wsum[8];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, d = threadIdx.x;
  const bool want = iout != 0 || iout64 != 0;
  for (u32 item = blockIdx.x; item < nitems; item += gridDim.x) {
    const u32 r = item / bpr, c = item - r * bpr;
    const u32 j0 = c * span, j1 = n - j0 < span ? n : j0 + span;
    const K* pk = kin + (i64)r * n;
    const u32* pi = iin ? iin + (i64)r * n : 0;
    const i64 row = (i64)r * n;
    const u32 flat = (u32)d * bpr + c;  // where this block's digit d starts in the row
    run[d] = flat ? offs[(i64)r * 256 * bpr + flat - 1] : 0u;
    for (u32 t0 = j0; t0 < j1; t0 += TILE) {
      for (int e = threadIdx.x; e < 8 * 257; e += blockDim.x) (&wc[0][0])[e] = 0;
      __syncthreads();
      K b[ITEMS];  // item k of lane l: element wbase + 32k + l (digit 256: past the end)
      u32 rk[ITEMS];
      const u32 wbase = t0 + (u32)warp * 32 * ITEMS;
#pragma unroll
      for (int k = 0; k < ITEMS; ++k) {
        const u32 j = wbase + 32 * k + (u32)lane;
        b[k] = j < j1 ? pk[j] : K(0);
      }
#pragma unroll
      for (int k = 0; k < ITEMS; ++k) {  // rank within (warp, digit), in element order
        const u32 dk = wbase + 32 * k + (u32)lane < j1
                           ? st::digit(st::order<Pol>(b[k], desc), shift) : 256u;
        const u32 peers = __match_any_sync(TF_FULL_MASK, dk);
        const int leader = __ffs(peers) - 1;
        u32 base = 0;
        if (lane == leader) {
          base = wc[warp][dk];
          wc[warp][dk] = base + (u32)__popc(peers);
        }
        base = __shfl_sync(TF_FULL_MASK, base, leader);
        rk[k] = base + (u32)__popc(peers & ((1u << lane) - 1u));
        __syncwarp();
      }
      __syncthreads();
      u32 s = 0;  // thread d: warps' offsets within digit d, the tile's count of d
#pragma unroll
      for (int w = 0; w < 8; ++w) {
        const u32 x = wc[w][d];
        wc[w][d] = s;
        s += x;
      }
      tot[d] = s;
      u32 inc = s;  // block scan of the counts over the digits
#pragma unroll
      for (int o = 1; o < 32; o <<= 1) {
        const u32 u = __shfl_up_sync(TF_FULL_MASK, inc, o);
        if (lane >= o) inc += u;
      }
      if (lane == 31) wsum[warp] = inc;
      __syncthreads();
      for (int w = 0; w < warp; ++w) inc += wsum[w];
      start[d] = inc - s;
#pragma unroll
      for (int w = 0; w < 8; ++w) wc[w][d] += inc - s;
      __syncthreads();
#pragma unroll
      for (int k = 0; k < ITEMS; ++k) {
        const u32 j = wbase + 32 * k + (u32)lane;
        if (j < j1) {
          const u32 pos = wc[warp][st::digit(st::order<Pol>(b[k], desc), shift)] + rk[k];
          sk[pos] = b[k];
          if (want) si[pos] = pi ? pi[j] : j;
        }
      }
      __syncthreads();
      const u32 cnt = j1 - t0 < (u32)TILE ? j1 - t0 : (u32)TILE;
      for (u32 i = threadIdx.x; i < cnt; i += blockDim.x) {
        const K bb = sk[i];
        const u32 e = st::digit(st::order<Pol>(bb, desc), shift);
        const i64 g = row + run[e] + (i - start[e]);
        kout[g] = bb;
        if (iout) {
          iout[g] = si[i];
        } else if (iout64) {
          iout64[g] = (i64)si[i];
        }
      }
      __syncthreads();
      run[d] += tot[d];
    }
    __syncthreads();
  }
}

}  // namespace tf
