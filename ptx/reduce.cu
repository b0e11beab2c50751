// Reductions over any set of axes; tenferro_cuda/shapes/reduction_plan.py plans the passes.
//
// reduce_rows: work item w is reduced by a group of `group` lanes (1..32, or the whole
//   256-thread block when group > 32) and written to out[w]. Item w = (output o, chunk s):
//   it covers flat reduced indices [s*chunk, min(total, (s+1)*chunk)) of output o, whose
//   elements sit at in[offset_of(kept, o) + offset_of(outer, j / run) + (j % run) *
//   run_stride]. Unit-stride runs are read with 16-byte loads (scalar head up to the
//   alignment boundary, scalar tail). `flat` spreads the lanes over the flat index when
//   runs are shorter than the group.
// reduce_cols: thread x owns column (or V adjacent columns, 16-byte loads when `vec`) k of
//   outer kept index o and walks reduced rows [s*chunk, ...) with s = the thread's y index;
//   adjacent threads read adjacent columns, so every row is read coalesced. Reduced row r
//   sits at offset_of(outer, r / run) + (r % run) * rs (runs of equally spaced rows). It
//   writes out[s*plane + offset_of(oout, o) + k*col_out].
// A pass writes either the result (Out = T) or per-chunk partials (Out = the partial
// type) that the next pass reduces: a fixed tree and no atomics, so the bits of a result
// do not change from run to run.
#include "tenferro/reduce.cuh"

namespace tf {
namespace rd {

// Fold elements [c0, c1) of the run at p (element stride st), lanes lane, lane+group, ...
template <class Op, class In, class I>
__device__ __forceinline__ typename Op::acc fold_run(typename Op::acc a, const In* p, I c0,
                                                     I c1, i64 st, I lane, I group) {
  typedef vec16<In> V;
  if (V::n > 1 && st == 1) {
    const In* q = p + c0;
    I n = c1 - c0;
    I head = to_boundary<In, I>(q);
    if (head > n) head = n;
    for (I h = lane; h < head; h += group) a = fold<Op>(a, q[h]);
    q += head;
    n -= head;
    const V* vq = reinterpret_cast<const V*>(q);
    const I nv = n / (I)V::n;
    I v = lane;
    for (; v + 3 * group < nv; v += 4 * group) {
      const V x0 = vq[v], x1 = vq[v + group], x2 = vq[v + 2 * group], x3 = vq[v + 3 * group];
      a = fold_vec<Op>(a, x0);
      a = fold_vec<Op>(a, x1);
      a = fold_vec<Op>(a, x2);
      a = fold_vec<Op>(a, x3);
    }
    for (; v < nv; v += group) {
      const V x = vq[v];  // a local copy keeps this one 16-byte load
      a = fold_vec<Op>(a, x);
    }
    for (I t = nv * (I)V::n + lane; t < n; t += group) a = fold<Op>(a, q[t]);
  } else {
    I c = c0 + lane;
    for (; c + 3 * group < c1; c += 4 * group) {
      const In x0 = p[(i64)c * st], x1 = p[(i64)(c + group) * st];
      const In x2 = p[(i64)(c + 2 * group) * st], x3 = p[(i64)(c + 3 * group) * st];
      a = fold<Op>(a, x0);
      a = fold<Op>(a, x1);
      a = fold<Op>(a, x2);
      a = fold<Op>(a, x3);
    }
    for (; c < c1; c += group) a = fold<Op>(a, p[(i64)c * st]);
  }
  return a;
}

// This lane's share of work item w of reduce_rows.
template <class Op, class In, class I>
__device__ __forceinline__ typename Op::acc row_item(const In* in, const Layout& kept,
                                                     const Layout& outer, I run, i64 run_stride,
                                                     I total, I chunk, I nchunks, I w, I lane,
                                                     I group, int flat) {
  typename Op::acc a = Op::identity();
  const I o = w / nchunks;
  const I j0 = (w - o * nchunks) * chunk;
  const I j1 = j0 + chunk < total ? j0 + chunk : total;
  // offset_of (unrolled) where the offset is taken once per item or per element; the
  // rank-sized loop of rd::offset once per run (fewer registers in the hot loops).
  const In* base = in + offset_of<I>(kept, o);
  if (flat) {
    for (I j = j0 + lane; j < j1; j += group) {
      const I r = j / run;
      a = fold<Op>(a, base[offset_of<I>(outer, r) + (i64)(j - r * run) * run_stride]);
    }
  } else {
    const I r0 = j0 / run, r1 = (j1 - 1) / run;
    for (I r = r0; r <= r1; ++r) {
      const I c0 = r == r0 ? j0 - r * run : 0;
      const I c1 = r == r1 ? j1 - r * run : run;
      a = fold_run<Op>(a, base + offset<I>(outer, r), c0, c1, run_stride, lane, group);
    }
  }
  return a;
}

template <class Op, class In, int V>
__device__ __forceinline__ void fold_cols(typename Op::acc (&a)[V], const In* q) {
  if constexpr (V > 1) {
    const vec16<In> x = *reinterpret_cast<const vec16<In>*>(q);
#pragma unroll
    for (int j = 0; j < V; ++j) a[j] = fold<Op>(a[j], x.e[j]);
  } else {
    a[0] = fold<Op>(a[0], *q);
  }
}

// Thread item x of reduce_cols over reduced rows [r0, r1): V adjacent columns. Reduced row
// r sits at offset_of(outer, r / run) + (r % run) * rs.
template <class Op, class In, class Out, class I, int V>
__device__ __forceinline__ void col_item(const In* in, const Layout& oin, const Layout& oout,
                                         const Layout& outer, I run, i64 rs, I ncv,
                                         i64 col_in, i64 col_out, I r0, I r1, i64 plane_off,
                                         I x, Out* out) {
  typedef typename Op::acc A;
  const I o = x / ncv;
  const I k = (x - o * ncv) * (I)V;
  i64 ib, ob;
  offset2<I>(oin, oout, o, ib, ob);
  const In* p = in + ib + (i64)k * col_in;
  A a[V];
#pragma unroll
  for (int j = 0; j < V; ++j) a[j] = Op::identity();
  for (I r = r0; r < r1;) {
    const I ro = r / run;
    const I c = r - ro * run;
    const I n = (run - c < r1 - r) ? run - c : r1 - r;
    const In* q = p + offset<I>(outer, ro) + (i64)c * rs;
    I i = 0;
    for (; i + 4 <= n; i += 4, q += 4 * rs) {
      fold_cols<Op, In, V>(a, q);
      fold_cols<Op, In, V>(a, q + rs);
      fold_cols<Op, In, V>(a, q + 2 * rs);
      fold_cols<Op, In, V>(a, q + 3 * rs);
    }
    for (; i < n; ++i, q += rs) fold_cols<Op, In, V>(a, q);
    r += n;
  }
  Out* po = out + plane_off + ob + (i64)k * col_out;
#pragma unroll
  for (int j = 0; j < V; ++j) po[(i64)j * col_out] = cv<Out, A>::go(a[j]);
}

}  // namespace rd

template <class Op, class In, class Out, class I>
__global__ void __launch_bounds__(256)
reduce_rows(const In* __restrict__ in, Layout kept, Layout outer, I run, i64 run_stride,
            I total, I chunk, I nchunks, I nitems, int group, int flat, Out* __restrict__ out) {
  tf::grid_wait();
  typedef typename Op::acc A;
  __shared__ __align__(16) unsigned char smem[32 * sizeof(A)];
  const I g = (I)group;
  const I gid = ((I)blockIdx.x * blockDim.x + threadIdx.x) / g;
  const I lane = (I)threadIdx.x & (g - 1);
  // Groups of one warp loop together (their shuffles need every lane of the warp).
  const I first = group < 32 ? gid - (I)((threadIdx.x & 31) / group) : gid;
  const I ngroups = (I)gridDim.x * blockDim.x / g;
  for (I wb = first; wb < nitems; wb += ngroups) {
    const I w = wb + (gid - first);
    A a = Op::identity();
    if (w < nitems) {
      a = rd::row_item<Op, In, I>(in, kept, outer, run, run_stride, total, chunk, nchunks, w,
                                  lane, g, flat);
    }
    a = group > 32 ? rd::block_reduce<Op>(a, reinterpret_cast<A*>(smem))
                   : rd::group_reduce<Op>(a, group);
    if (w < nitems && lane == 0) out[w] = rd::cv<Out, A>::go(a);
  }
}

template <class Op, class In, class Out, class I>
__global__ void __launch_bounds__(256)
reduce_cols(const In* __restrict__ in, Layout oin, Layout oout, Layout outer, I run, i64 rs,
            I ncols, i64 col_in, i64 col_out, I total, I chunk, I nitems, i64 plane, int vec,
            Out* __restrict__ out) {
  tf::grid_wait();
  constexpr int V = rd::vec16<In>::n;
  const I s = (I)blockIdx.y * blockDim.y + threadIdx.y;
  const I r0 = s * chunk;
  if (r0 >= total) return;
  const I r1 = r0 + chunk < total ? r0 + chunk : total;
  const i64 plane_off = (i64)s * plane;
  const I step = (I)gridDim.x * blockDim.x;
  for (I x = (I)blockIdx.x * blockDim.x + threadIdx.x; x < nitems; x += step) {
    if (V > 1 && vec) {
      rd::col_item<Op, In, Out, I, V>(in, oin, oout, outer, run, rs, ncols / (I)V, col_in,
                                      col_out, r0, r1, plane_off, x, out);
    } else {
      rd::col_item<Op, In, Out, I, 1>(in, oin, oout, outer, run, rs, ncols, col_in, col_out,
                                      r0, r1, plane_off, x, out);
    }
  }
}

}  // namespace tf
