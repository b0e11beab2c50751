// Cumulative sums, products, maxima and minima along one axis; tenferro_cuda/shapes/
// reduction_scan.py plans the passes. Row r of the problem (every index of the other axes)
// has n elements: element j sits at in[offset_of(rin, r) + j*st_in] and its result at
// out[offset_of(rout, r) + j*st_out] (a reversed scan has both strides negated).
//
// A pass either scans (out != 0) or only totals (out == 0, totals != 0) the pieces of the
// rows: a scanning pass adds the carry into piece t of row r, carry[r*crs + (t-1)*cts]
// (the inclusive scan of the pieces' totals, made by the passes in between), when t > 0
// and carry != 0; a totalling pass writes piece t's total to totals[r*trs + t*tts]. In
// and out may be the same buffer (a scan of totals runs in place): every element is read
// before the thread or block that owns it writes it, and no pointer is __restrict__.
//
// scan_rows: a segment of `seg` warps (32*seg lanes) owns piece t = one tile of
//   32*seg*TF_SCAN_ITEMS consecutive elements of a row. The tile is staged through shared
//   memory (striped, coalesced loads), each lane folds TF_SCAN_ITEMS consecutive elements
//   in order, lanes combine by a shuffle scan, warps by their totals in warp order. With
//   `chain`, a segment owns a whole row instead and scans its tiles one after the other,
//   the running total carried in registers (rows enough to fill the device: one pass).
// scan_cols: one thread owns piece t = positions [t*chunk, (t+1)*chunk) of one row and
//   folds them in order; adjacent threads take adjacent rows (coalesced when the rows are
//   the inner axis), thread y picks the chunk.
// Every combination happens in an order fixed by the shape alone (no atomics), so the
// bits of a result are the same every run and on every device.
#include "tenferro/reduce.cuh"

#define TF_SCAN_ITEMS 8
#define TF_SCAN_TILE (256 * TF_SCAN_ITEMS)

namespace tf {
namespace sc {

// Shared-memory position of element p of the block's tile: one pad slot per 32 elements
// keeps the lanes' consecutive runs and the striped loads free of bank conflicts.
__device__ __forceinline__ int pad(int p) { return p + (p >> 5); }

template <class A> __device__ __forceinline__ A shfl_up(A v, int d) {
  return __shfl_up_sync(TF_FULL_MASK, v, d);
}
template <> __device__ __forceinline__ i8 shfl_up<i8>(i8 v, int d) {
  return (i8)__shfl_up_sync(TF_FULL_MASK, (int)v, d);
}
template <> __device__ __forceinline__ u8 shfl_up<u8>(u8 v, int d) {
  return (u8)__shfl_up_sync(TF_FULL_MASK, (int)v, d);
}
template <> __device__ __forceinline__ i16 shfl_up<i16>(i16 v, int d) {
  return (i16)__shfl_up_sync(TF_FULL_MASK, (int)v, d);
}
template <> __device__ __forceinline__ u16 shfl_up<u16>(u16 v, int d) {
  return (u16)__shfl_up_sync(TF_FULL_MASK, (int)v, d);
}
template <> __device__ __forceinline__ complex<float> shfl_up(complex<float> v, int d) {
  return complex<float>(shfl_up(v.re, d), shfl_up(v.im, d));
}
template <> __device__ __forceinline__ complex<double> shfl_up(complex<double> v, int d) {
  return complex<double>(shfl_up(v.re, d), shfl_up(v.im, d));
}

// Inclusive scan over the 32 lanes of a warp (every lane calls it).
template <class Op>
__device__ __forceinline__ typename Op::acc warp_scan(typename Op::acc v, int lane) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const typename Op::acc u = shfl_up(v, d);
    if (lane >= d) v = Op::combine(u, v);
  }
  return v;
}

template <class Op, class P>
__device__ __forceinline__ typename Op::acc carry_in(const P* carry, i64 crs, i64 cts, i64 r,
                                                     i64 t) {
  typedef typename Op::acc A;
  return (carry && t > 0) ? rd::cv<A, P>::go(carry[r * crs + (t - 1) * cts]) : Op::identity();
}

}  // namespace sc

template <class Op, class In, class Out, class P, class I>
__global__ void __launch_bounds__(256)
scan_rows(const In* in, Layout rin, i64 st_in, Out* out, Layout rout, i64 st_out, I n,
          I ntiles, I nitems, int seg, int chain, const P* carry, i64 crs, i64 cts,
          P* totals, i64 trs, i64 tts) {
  tf::grid_wait();
  typedef typename Op::acc A;
  __shared__ __align__(16) unsigned char raw[(TF_SCAN_TILE + TF_SCAN_TILE / 32) * sizeof(A)];
  __shared__ __align__(16) unsigned char raw_w[16 * sizeof(A)];
  A* s = reinterpret_cast<A*>(raw);
  A* wtot = reinterpret_cast<A*>(raw_w);  // [0, 8): warps' totals; [8, 16): segments'
  const int lanes = 32 * seg, per_block = 8 / seg;
  const int q = threadIdx.x / lanes, l = threadIdx.x - q * lanes;  // segment, its lane
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const I tile = (I)lanes * TF_SCAN_ITEMS;
  const int base = q * lanes * TF_SCAN_ITEMS;  // the segment's part of the block's tile
  // An item is one tile of a row, or (chain) a whole row whose tiles the segment scans in
  // order, carrying the running total from one to the next. Every segment of a block runs
  // the same number of tiles, so every thread reaches every barrier.
  for (I wb = (I)blockIdx.x * per_block; wb < nitems; wb += (I)gridDim.x * per_block) {
    const I w = wb + (I)q;
    const bool live = w < nitems;
    const I r = live ? (chain ? w : w / ntiles) : 0;
    const I t0 = (chain || !live) ? 0 : w - r * ntiles, t1 = chain ? ntiles : t0 + 1;
    i64 ib = 0, ob = 0;
    if (live) rd::offset2<I>(rin, rout, r, ib, ob);
    A run = chain ? Op::identity() : sc::carry_in<Op, P>(carry, crs, cts, (i64)r, (i64)t0);
    for (I t = t0; t < t1; ++t) {
      const I j0 = t * tile;
      const I cnt = live ? (n - j0 < tile ? n - j0 : tile) : 0;
#pragma unroll
      for (int i = 0; i < TF_SCAN_ITEMS; ++i) {  // striped: 8 coalesced loads in flight
        const int k = l + i * lanes;
        s[sc::pad(base + k)] = (I)k < cnt
                                   ? rd::cv<A, In>::go(in[ib + (i64)(j0 + k) * st_in])
                                   : Op::identity();
      }
      __syncthreads();
      A loc[TF_SCAN_ITEMS];
      A acc = Op::identity();
#pragma unroll
      for (int k = 0; k < TF_SCAN_ITEMS; ++k) {
        acc = Op::combine(acc, s[sc::pad(base + l * TF_SCAN_ITEMS + k)]);
        loc[k] = acc;
      }
      const A incl = sc::warp_scan<Op>(acc, lane);  // lanes of this warp up to this one
      const A excl = sc::shfl_up(incl, 1);          // ... before this one
      if (lane == 31) wtot[warp] = incl;
      __syncthreads();
      A pre = run;
      for (int v = q * seg; v < warp; ++v) pre = Op::combine(pre, wtot[v]);
      if (totals && !out) {
        if (live && l == lanes - 1) {
          totals[(i64)r * trs + (i64)t * tts] = rd::cv<P, A>::go(Op::combine(pre, incl));
        }
      } else {
        if (l == lanes - 1) wtot[8 + q] = Op::combine(pre, incl);  // the next carry
        if (lane > 0) pre = Op::combine(pre, excl);
#pragma unroll
        for (int k = 0; k < TF_SCAN_ITEMS; ++k) {
          s[sc::pad(base + l * TF_SCAN_ITEMS + k)] = Op::combine(pre, loc[k]);
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < TF_SCAN_ITEMS; ++i) {
          const int k = l + i * lanes;
          if ((I)k < cnt) out[ob + (i64)(j0 + k) * st_out] = rd::cv<Out, A>::go(
              s[sc::pad(base + k)]);
        }
        run = wtot[8 + q];
      }
      __syncthreads();  // s and wtot are reused by the next tile
    }
  }
}

template <class Op, class In, class Out, class P, class I>
__global__ void __launch_bounds__(256)
scan_cols(const In* in, Layout rin, i64 st_in, Out* out, Layout rout, i64 st_out, I n,
          I chunk, I m, const P* carry, i64 crs, i64 cts, P* totals, i64 trs, i64 tts) {
  tf::grid_wait();
  typedef typename Op::acc A;
  const I t = (I)blockIdx.y * blockDim.y + threadIdx.y;
  const I j0 = t * chunk;
  if (j0 >= n) return;
  const I j1 = n - j0 < chunk ? n : j0 + chunk;
  const I step = (I)gridDim.x * blockDim.x;
  for (I r = (I)blockIdx.x * blockDim.x + threadIdx.x; r < m; r += step) {
    i64 ib, ob;
    rd::offset2<I>(rin, rout, r, ib, ob);
    const In* p = in + ib + (i64)j0 * st_in;
    A acc = sc::carry_in<Op, P>(carry, crs, cts, (i64)r, (i64)t);
    I j = j0;
    if (totals && !out) {
      for (; j + 4 <= j1; j += 4, p += 4 * st_in) {
        const In x0 = p[0], x1 = p[st_in], x2 = p[2 * st_in], x3 = p[3 * st_in];
        acc = rd::fold<Op>(acc, x0);
        acc = rd::fold<Op>(acc, x1);
        acc = rd::fold<Op>(acc, x2);
        acc = rd::fold<Op>(acc, x3);
      }
      for (; j < j1; ++j, p += st_in) acc = rd::fold<Op>(acc, p[0]);
      totals[(i64)r * trs + (i64)t * tts] = rd::cv<P, A>::go(acc);
      continue;
    }
    Out* o = out + ob + (i64)j0 * st_out;
    for (; j + 4 <= j1; j += 4, p += 4 * st_in, o += 4 * st_out) {
      const In x0 = p[0], x1 = p[st_in], x2 = p[2 * st_in], x3 = p[3 * st_in];
      acc = rd::fold<Op>(acc, x0);
      o[0] = rd::cv<Out, A>::go(acc);
      acc = rd::fold<Op>(acc, x1);
      o[st_out] = rd::cv<Out, A>::go(acc);
      acc = rd::fold<Op>(acc, x2);
      o[2 * st_out] = rd::cv<Out, A>::go(acc);
      acc = rd::fold<Op>(acc, x3);
      o[3 * st_out] = rd::cv<Out, A>::go(acc);
    }
    for (; j < j1; ++j, p += st_in, o += st_out) {
      acc = rd::fold<Op>(acc, p[0]);
      o[0] = rd::cv<Out, A>::go(acc);
    }
  }
}

}  // namespace tf
