// argmax / argmin along one axis; tenferro_cuda/shapes/reduction_arg.py plans the passes.
//
// arg_reduce: work item w = (chunk c, output o) with c = w / nout, o = w % nout (chunk
//   major, so that with one lane per item adjacent threads take adjacent outputs) is
//   reduced by a group of `group` lanes (1..32, or the whole 256-thread block when group >
//   32). It covers the axis positions j in [c*chunk, min(n, (c+1)*chunk)); element j of
//   output o sits at in[offset_of(kept, o) + j*st] and its index is j (first pass) or
//   in_idx[same offset] (a pass over the partials of a split pass). A split pass
//   (part_val != 0) writes the winning value and index of every item to part_val[w] and
//   out_idx[w]: partials laid out [nchunks, nout], reduced by the next pass along their
//   axis 0. The last pass writes out_idx[o].
// The winner of two (value, index) pairs: NaN beats every number, then the larger (max) or
// smaller (min) value, and equal values (-0.0 == +0.0, NaN and NaN) go to the smaller
// index. That is a total order on the pairs, so any combine tree gives the same result:
// the first index of the maximum (the first NaN, if any), as np.argmax.
#include "tenferro/reduce.cuh"

namespace tf {
namespace ar {

// The value the comparisons see: the compute type (float for half/bfloat16), u8 for bool.
template <class T> struct val { typedef typename compute<T>::type type; };
template <> struct val<bool> { typedef u8 type; };

template <class T> struct ArgMax {
  typedef typename val<T>::type V;
  // a strictly better than b
  static __device__ __forceinline__ bool better(V a, V b) { return a > b || (a != a && b == b); }
};
template <class T> struct ArgMin {
  typedef typename val<T>::type V;
  static __device__ __forceinline__ bool better(V a, V b) { return a < b || (a != a && b == b); }
};

#define TF_ARG_NONE 0x7fffffffffffffffLL  // no element seen yet

// (v, i) becomes the winner of itself and (v2, i2).
template <class Op>
__device__ __forceinline__ void pick(typename Op::V& v, i64& i, typename Op::V v2, i64 i2) {
  if (i2 == TF_ARG_NONE) return;
  if (i == TF_ARG_NONE || Op::better(v2, v) || (!Op::better(v, v2) && i2 < i)) {
    v = v2;
    i = i2;
  }
}

// Butterfly over aligned groups of `group` lanes (every lane of the warp calls it).
template <class Op>
__device__ __forceinline__ void group_pick(typename Op::V& v, i64& i, int group) {
  for (int m = group >> 1; m > 0; m >>= 1) {
    const typename Op::V v2 = rd::shfl(v, m);
    const i64 i2 = rd::shfl(i, m);
    pick<Op>(v, i, v2, i2);
  }
}

// Whole block (every thread calls it); thread 0 ends with the block's winner.
template <class Op>
__device__ __forceinline__ void block_pick(typename Op::V& v, i64& i, typename Op::V* sv,
                                           i64* si) {
  group_pick<Op>(v, i, 32);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    sv[warp] = v;
    si[warp] = i;
  }
  __syncthreads();
  if (threadIdx.x < (blockDim.x >> 5)) {
    v = sv[threadIdx.x];
    i = si[threadIdx.x];
  } else {
    i = TF_ARG_NONE;
  }
  if (warp == 0) group_pick<Op>(v, i, 32);
  __syncthreads();
}

}  // namespace ar

template <class Op, class In, class I>
__global__ void __launch_bounds__(256)
arg_reduce(const In* __restrict__ in, const i64* __restrict__ in_idx, Layout kept, I n,
           i64 st, I chunk, I nchunks, I nout, int group,
           typename Op::V* __restrict__ part_val, i64* __restrict__ out_idx) {
  tf::grid_wait();
  typedef typename Op::V V;
  __shared__ V sv[32];
  __shared__ i64 si[32];
  const I g = (I)group;
  const I gid = ((I)blockIdx.x * blockDim.x + threadIdx.x) / g;
  const I lane = (I)threadIdx.x & (g - 1);
  // Groups of one warp loop together (their shuffles need every lane of the warp).
  const I first = group < 32 ? gid - (I)((threadIdx.x & 31) / group) : gid;
  const I ngroups = (I)gridDim.x * blockDim.x / g;
  const I nitems = nout * nchunks;
  for (I wb = first; wb < nitems; wb += ngroups) {
    const I w = wb + (gid - first);
    V v = V(0);
    i64 i = TF_ARG_NONE;
    if (w < nitems) {
      const I c = w / nout;
      const I o = w - c * nout;
      const I j0 = c * chunk;
      const I j1 = j0 + chunk < n ? j0 + chunk : n;
      const i64 base = rd::offset<I>(kept, o);
      I j = j0 + lane;
      // Ascending j per lane: a later element replaces the winner only when strictly
      // better, so each lane keeps its first best.
      for (; j + 3 * g < j1; j += 4 * g) {
        const i64 p0 = base + (i64)j * st, p1 = p0 + (i64)g * st;
        const i64 p2 = p1 + (i64)g * st, p3 = p2 + (i64)g * st;
        const V x0 = rd::cv<V, In>::go(in[p0]), x1 = rd::cv<V, In>::go(in[p1]);
        const V x2 = rd::cv<V, In>::go(in[p2]), x3 = rd::cv<V, In>::go(in[p3]);
        ar::pick<Op>(v, i, x0, in_idx ? in_idx[p0] : (i64)j);
        ar::pick<Op>(v, i, x1, in_idx ? in_idx[p1] : (i64)(j + g));
        ar::pick<Op>(v, i, x2, in_idx ? in_idx[p2] : (i64)(j + 2 * g));
        ar::pick<Op>(v, i, x3, in_idx ? in_idx[p3] : (i64)(j + 3 * g));
      }
      for (; j < j1; j += g) {
        const i64 p = base + (i64)j * st;
        ar::pick<Op>(v, i, rd::cv<V, In>::go(in[p]), in_idx ? in_idx[p] : (i64)j);
      }
    }
    if (group > 32) {
      ar::block_pick<Op>(v, i, sv, si);
    } else {
      ar::group_pick<Op>(v, i, group);
    }
    if (w < nitems && lane == 0) {
      if (part_val) part_val[w] = v;
      out_idx[w] = i;
    }
  }
}

}  // namespace tf
