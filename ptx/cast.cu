// Cast kernels: out = tf::CastOp<To> applied to a (the projection of docs/dtypes.md, through
// tf::ew::cast = tf::convert plus the rounding fix of ops.cuh), instantiated per (target,
// source) pair by name expressions such as `tf::cast_contig<tf::CastOp<float>, tf::half>`.
// The bodies are the elementwise ones (ewkernel.cuh): cast_contig for compact operands
// (16-byte vectors of the wider dtype when aligned), cast_strided for runtime layouts
// (`mode` bit 0: tiled 2-D transpose path). b, c, err and the by-value words ha, hb, hc
// are unused (pass 0): a cast has one operand, a tensor.
#include "tenferro/ewkernel.cuh"

namespace tf {

template <class Op, class T>
__global__ void __launch_bounds__(TF_EW_BLOCK)
cast_contig(typename sig<Op, T>::R* __restrict__ out, const typename sig<Op, T>::A* a,
          const typename sig<Op, T>::B* b, const typename sig<Op, T>::C* c, u32 n, int flags,
          int* err, int code, u64 ha, u64 hb, u64 hc) {
  tf::grid_wait();
  const Err e{err, code};
  contig_body<Op, T, u32>(out, a, b, c, n, flags, e, Words{{ha, hb, hc}});
}

template <class Op, class T>
__global__ void __launch_bounds__(TF_EW_BLOCK)
cast_strided(typename sig<Op, T>::R* __restrict__ out, Layout lo, const typename sig<Op, T>::A* a,
           Layout la, const typename sig<Op, T>::B* b, Layout lb,
           const typename sig<Op, T>::C* c, Layout lc, u32 n, int mode, int* err, int code,
           u64 ha, u64 hb, u64 hc) {
  tf::grid_wait();
  const Err e{err, code};
  const Words hi{{ha, hb, hc}};
  if (mode & 1) tiled_body<Op, T>(out, lo, a, la, b, lb, c, lc, mode, e, hi);
  else strided_body<Op, T, u32>(out, lo, a, la, b, lb, c, lc, n, mode, e, hi);
}

}  // namespace tf
